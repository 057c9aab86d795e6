"""What a worker process does with the memory it frees, run in the worker.

In a module of its own: a worker imports the module of a function it runs, and a process
that had imported test_worker_start (the test modules and all they import) was seen not to
trim its heap by itself, so the test could not fail there.
"""

from __future__ import annotations

import os


def heap_after_free() -> tuple[int, int]:
    """Resident bytes grown by allocating 160 MB in 100 KB blocks, then after freeing them.

    glibc's own trim threshold grows with the blocks a process frees, up to 64 MB: freeing
    more than that gives memory back unless the process keeps its heap.
    """
    page = os.sysconf("SC_PAGE_SIZE")
    statm = os.open("/proc/self/statm", os.O_RDONLY)

    def resident() -> int:
        # A read of 64 bytes: a buffer from malloc above the blocks would pin the heap's top.
        return int(os.pread(statm, 64, 0).split()[1]) * page

    try:
        before = resident()
        blocks = [bytearray(100_000) for _ in range(1600)]  # below 128 KB: from the heap
        grown = resident() - before
        del blocks
        return grown, resident() - before
    finally:
        os.close(statm)


def nothing() -> None:
    """A pool initializer with nothing to set up."""
