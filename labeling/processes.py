"""Starting worker processes without re-running the parent's main script."""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager

_STARTING = threading.Lock()  # one pool at a time swaps __main__ (see plain_main)


@contextmanager
def plain_main() -> Iterator[None]:
    """Hide __main__ from the worker processes started meanwhile.

    A spawned process, and a forkserver as it starts, re-runs the parent's main script
    unless told otherwise, and inside Streamlit that is the page being run (it installs
    each page as __main__): a worker would run that page again. A bare module gives them
    nothing to re-run.
    """
    with _STARTING:
        real = sys.modules.get("__main__")
        bare = types.ModuleType("__main__")
        sys.modules["__main__"] = bare
        try:
            yield
        finally:  # another thread may have installed its own page meanwhile: keep that one
            if sys.modules.get("__main__") is bare and real is not None:
                sys.modules["__main__"] = real
