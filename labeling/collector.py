"""Python's cycle collector, paused around work that makes many short-lived objects and no cycles.

Reference counting frees almost everything such work makes; the collector's passes over
hundreds of thousands of fresh rows, floats and answers only cost time (a frame chunk's
parse, a synthetic block, the Monitor's statistics: about 0.5 s of its 3 s on the large bench).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class _Pause:
    """How many blocks run with the collector paused, and whether it ran before the first."""

    lock = threading.Lock()
    depth = 0
    was_enabled = True


@contextmanager
def paused() -> Iterator[None]:
    """Pause the cycle collector while the block runs (cycles left are collected later).

    Nested and concurrent blocks (the app's threads) resume it when the last one ends, and
    only if it was running before the first.
    """
    with _Pause.lock:
        if _Pause.depth == 0:
            _Pause.was_enabled = gc.isenabled()
            gc.disable()
        _Pause.depth += 1
    try:
        yield
    finally:
        with _Pause.lock:
            _Pause.depth -= 1
            if _Pause.depth == 0 and _Pause.was_enabled:
                gc.enable()
