"""Starting worker processes without re-running the parent's main script."""

from __future__ import annotations

import ctypes
import multiprocessing
import sys
import threading
import types
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # not on Windows
    fcntl = None  # type: ignore[assignment]

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


# glibc's malloc parameters (malloc.h): M_TRIM_THRESHOLD, M_MMAP_THRESHOLD.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
# Each chunk a worker parses takes a few MB (its lines, their records, the pickled result)
# and frees them all before the next. By default glibc hands the heap's free top back to
# the kernel once it passes a threshold that it moves with the blocks freed, and serves a
# large block with an mmap of its own: a 200k import's processes called brk 3,210 times, and
# its workers took 1.9 page faults a line for fresh zeroed pages (system time 1.0-1.2 s of
# their 11-13 s of CPU; 0.3-0.5 s, 0.14 faults a line, with this).
# Here blocks under 4 MB come from the heap (larger ones, as a pickle's growing output
# buffer, are still mapped: mremap resizes them without a copy), and the heap keeps what it
# reached, which is a worker's working set: about 85 MB (bench/RESULTS.md, issue 16,
# fifteenth pass).
_MMAP_MAX_BYTES = 4 << 20
_TRIM_BYTES = 1 << 30


def keep_heap() -> bool:
    """Make this process keep the memory it frees for its next allocations (glibc only).

    For a worker that allocates and frees the same few MB again and again; not for a
    long-lived process whose peak should go back to the system. False where the C
    library has no mallopt (not glibc) or refuses a value.
    """
    try:
        mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    except (OSError, TypeError):  # no C library to open by None (Windows)
        return False
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    mapped_from = mallopt(_M_MMAP_THRESHOLD, _MMAP_MAX_BYTES)
    trimmed_from = mallopt(_M_TRIM_THRESHOLD, _TRIM_BYTES)
    return bool(mapped_from and trimmed_from)


def _start_worker(initializer: Callable[..., None], initargs: tuple[Any, ...]) -> None:
    """A spawned_pool worker's start: keep_heap, then the pool's own initializer."""
    keep_heap()
    initializer(*initargs)


def spawned_pool(
    workers: int, initializer: Callable[..., None], initargs: tuple[Any, ...]
) -> ProcessPoolExecutor:
    """A pool of `workers` spawned processes, all started now, under plain_main.

    The executor spawns a worker per task submitted until all are there: one started later,
    outside plain_main, would re-run the parent's main script. Each worker keeps its heap
    (keep_heap) before `initializer` runs.
    """
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(workers, context, _start_worker, (initializer, initargs))
    with plain_main():
        for _ in range(workers):
            pool.submit(int)
    widen_result_pipe(pool)
    return pool


# What a pool's result pipe should hold: a frame import's result whole. A span of
# frame_file.BLOCK_BYTES parsed comes back as 3.0 MB pickled with its rows (PostgreSQL), 72 KB
# when the rows are staged (SQLite, db/staging.py). A 1M PostgreSQL import with 2 MB spans,
# the pipe at 1 MB then at 4 MB, side by side: 46.3 -> 37.6 s, 41.1 -> 41.3 s, 49.2 -> 44.0 s
# and 44.5 -> 44.1 s (bench/RESULTS.md, issue 16, twentieth pass). /proc/sys/fs/pipe-max-size
# (1 MB by default) caps it for a process without CAP_SYS_RESOURCE.
RESULT_PIPE_BYTES = 1 << 22
_PIPE_MAX = Path("/proc/sys/fs/pipe-max-size")


def widen_result_pipe(pool: ProcessPoolExecutor, size: int = RESULT_PIPE_BYTES) -> int:
    """Let the pipe a pool's results come back through hold `size` bytes (Linux).

    A Linux pipe holds 64 KB. A worker whose result does not fit waits in its write until
    the parent's result thread has read the rest, and that thread needs the GIL, which the
    import's writer and main threads hold most of the time: in a 1M import the workers sat
    blocked in that write for about 6% of their time, a core idle meanwhile (bench/
    RESULTS.md, issue 16, eighteenth pass). Returns the pipe's size after, 0 where it
    cannot be set (no F_SETPIPE_SZ, a pool without that pipe, a refusal): then nothing
    changes but the speed.
    """
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    reader = getattr(getattr(pool, "_result_queue", None), "_reader", None)
    if set_size is None or reader is None:
        return 0
    try:  # an unprivileged process may not go past it
        size = min(size, int(_PIPE_MAX.read_text()))
    except (OSError, ValueError):
        pass
    try:
        return int(fcntl.fcntl(reader.fileno(), set_size, size))
    except OSError:  # over the user's limit of pipe memory (fs.pipe-user-pages-soft)
        return 0
