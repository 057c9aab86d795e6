"""The import's worker processes start without re-running the parent's main script, and keep
their heap."""

from __future__ import annotations

import json
import platform
import sys
import types

import pytest

from labeling import processes
from labeling.frames.importer import import_frame
from labeling.processes import keep_heap, spawned_pool
from tests.conftest import make_record, write_jsonl
from tests.frames import heap_probe


def test_workers_do_not_run_the_page_that_started_the_import(
    sqlite_engine, schema, seed_record, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Streamlit installs the page it runs as __main__, with the page's file: a spawned
    # worker ran that file again (an upload of a frame over 32 MB started workers).
    ran = tmp_path / "ran"
    page = tmp_path / "upload_page.py"
    page.write_text(f"open({str(ran)!r}, 'w').write('the page ran in a worker')\n")
    main = types.ModuleType("__main__")
    main.__file__ = str(page)
    monkeypatch.setitem(sys.modules, "__main__", main)
    lines = [json.dumps(make_record(seed_record, f"W{i}")) for i in range(1, 300)]
    path = write_jsonl(tmp_path / "frame.jsonl", lines)

    summary = import_frame(sqlite_engine, path, schema, workers=2, batch_size=100)

    assert summary.inserted == 299 and summary.rejected == 0
    assert not ran.exists()
    assert sys.modules["__main__"] is main  # put back once the workers started


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt only")
def test_a_worker_keeps_the_memory_it_frees_for_its_next_chunk() -> None:
    # By default glibc hands a heap's free top back to the kernel past a threshold (128 KB,
    # raised by the blocks freed, at most 64 MB): each chunk a worker parsed took its few MB
    # again as fresh pages, one page fault each.
    pool = spawned_pool(1, heap_probe.nothing, ())
    try:
        grown, kept = pool.submit(heap_probe.heap_after_free).result()
    finally:
        pool.shutdown()
    assert grown >= 150_000_000
    assert kept >= 150_000_000


class _NoMallopt:
    """A C library without mallopt (macOS's)."""

    def __init__(self, name: None) -> None:
        pass


def _no_library(name: None) -> None:
    raise TypeError("no C library to open by None (Windows)")


@pytest.mark.parametrize("library", [_NoMallopt, _no_library], ids=["no mallopt", "no C library"])
def test_keep_heap_is_false_and_harmless_without_glibc(
    library, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(processes.ctypes, "CDLL", library)
    assert keep_heap() is False


@pytest.mark.skipif(not hasattr(processes.fcntl, "F_GETPIPE_SZ"), reason="Linux pipes only")
def test_a_workers_result_fits_in_the_result_pipe_whole() -> None:
    # With the default 64 KB, a worker whose result was larger waited in its write for the
    # importing process to read it, a core idle meanwhile.
    pool = spawned_pool(1, heap_probe.nothing, ())
    try:
        reader = pool._result_queue._reader  # type: ignore[attr-defined]
        size = processes.fcntl.fcntl(reader.fileno(), processes.fcntl.F_GETPIPE_SZ)
        result = pool.submit(bytes, 900_000).result()  # a large result still comes back
    finally:
        pool.shutdown()
    limit = int(processes._PIPE_MAX.read_text())
    assert size == min(processes.RESULT_PIPE_BYTES, limit) > 64 * 1024
    assert result == bytes(900_000)


class _Pool:
    """A pool without the result pipe CPython's ProcessPoolExecutor has."""


def _refuse(*args: object) -> int:
    raise PermissionError(1, "Operation not permitted")


def test_a_pool_without_the_result_pipe_is_left_alone() -> None:
    assert processes.widen_result_pipe(_Pool()) == 0  # type: ignore[arg-type]


@pytest.mark.parametrize("case", ["refused", "no fcntl"])
def test_widening_the_result_pipe_is_harmless_where_it_cannot_be(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if case == "no fcntl":  # Windows
        monkeypatch.setattr(processes, "fcntl", None)
    elif processes.fcntl is None:
        pytest.skip("no fcntl to refuse")
    else:  # over the user's limit of pipe memory (fs.pipe-user-pages-soft)
        monkeypatch.setattr(processes.fcntl, "fcntl", _refuse)
    pool = spawned_pool(1, heap_probe.nothing, ())
    try:
        assert processes.widen_result_pipe(pool) == 0
        assert pool.submit(int, "7").result() == 7
    finally:
        pool.shutdown()
