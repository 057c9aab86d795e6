"""Starting worker processes without re-running the parent's main script."""

from __future__ import annotations

import multiprocessing
import sys
import threading
import types
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any

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


def spawned_pool(
    workers: int, initializer: Callable[..., None], initargs: tuple[Any, ...]
) -> ProcessPoolExecutor:
    """A pool of `workers` spawned processes, all started now, under plain_main.

    The executor spawns a worker per task submitted until all are there: one started later,
    outside plain_main, would re-run the parent's main script.
    """
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(workers, context, initializer, initargs)
    with plain_main():
        for _ in range(workers):
            pool.submit(int)
    return pool
