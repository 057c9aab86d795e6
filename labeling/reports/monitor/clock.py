"""A step timer for the Monitor's statistics (bench/monitor.py reads the seconds per step)."""

from __future__ import annotations

import time
from typing import Any


class Clock:
    """Calls a step and adds its seconds to a dict (or just calls it)."""

    def __init__(self, timings: dict[str, float] | None) -> None:
        """Record into timings when given."""
        self.timings = timings

    def __call__(self, name: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """fn(*args, **kwargs), timed under name."""
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            if self.timings is not None:
                self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - start
