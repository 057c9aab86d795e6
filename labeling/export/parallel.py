"""The gold set built by worker processes that share one database snapshot.

Building chunks (SQLite reads and Arrow compute) takes nearly all of an export's time and
holds one core, so a large export splits the matching works into id ranges, computed in
SQL inside the snapshot, and hands them to a few worker processes. Every worker opens the
snapshot of the parent (db.engine.shared_snapshot), builds its ranges with iter_tables and
sends each chunk back as Arrow IPC bytes; the parent yields the chunks in id order, exactly
the chunks a single process would have built, so the files stay byte-identical.

Workers start through a "forkserver" (never a plain fork: the Streamlit server runs
threads) that has this module and its imports loaded already: the first export of a
process pays for starting that server (about half a second, mostly imports), later ones a
few milliseconds per worker.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import sys
import threading
import traceback
import types
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

try:  # Linux: larger pipes mean fewer wake-ups per chunk
    from fcntl import F_SETPIPE_SZ, fcntl
except ImportError:  # pragma: no cover
    F_SETPIPE_SZ = None

import pyarrow as pa
from sqlalchemy import Engine, func, select

from db.engine import make_engine, shared_snapshot, snapshot_connection
from db.models import Work
from labeling.errors import StorageError
from labeling.export.definitions import ExportFilters, resolve_campaign, work_conditions
from labeling.export.table import CHUNK, GoldChunk, iter_tables
from labeling.schema import Schema

__all__ = ["RANGE_SIZE", "THRESHOLD", "WorkerError", "iter_tables_parallel"]

THRESHOLD = 100_000  # fewer matching works: one process (starting workers costs more)
RANGE_SIZE = 5_000  # works per range a worker builds at a time (whole chunks, at least one)
PIPE_BYTES = 1 << 20  # the most an unprivileged process may ask for by default
START_TIMEOUT = 120.0  # seconds for workers to start (the first one starts the forkserver)
JOIN_TIMEOUT = 10.0  # seconds for workers to open the snapshot (SQLite writers wait as long)
WORKER_HOOK: Callable[[int], None] | None = None  # tests: called in a worker before each range
_STARTING = threading.Lock()  # one export at a time swaps __main__ (see _plain_main)


class WorkerError(StorageError):
    """A worker process failed; the message carries the worker's own error."""


@dataclass(frozen=True)
class _Job:
    """What every worker needs to build ranges (sent once, at its start)."""

    url: str
    schema: Schema
    filters: ExportFilters
    pseudonymize: bool
    with_labels: bool
    chunk_size: int
    hook: Callable[[int], None] | None


@dataclass
class _Worker:
    """A worker process and the parent's ends of its two pipes."""

    process: Any
    tasks: Connection  # parent -> worker: the snapshot token, ranges, None to stop
    results: Connection  # worker -> parent: ready, joined, chunks, done, error
    queued: list[int] = field(default_factory=list)  # ranges sent and not yet done


def iter_tables_parallel(
    engine: Engine,
    schema: Schema,
    filters: ExportFilters,
    *,
    pseudonymize: bool = False,
    with_labels: bool = False,
    processes: int | None = None,
    chunk_size: int = CHUNK,
    threshold: int | None = None,
    range_size: int | None = None,
) -> Iterator[GoldChunk]:
    """The chunks of iter_tables over one snapshot, built by `processes` worker processes.

    A generator: close it (or exhaust it) and its workers are gone; errors of a worker are
    raised here as WorkerError. Fewer than `threshold` matching works, or processes <= 1,
    build in this process. processes None: min(2, CPU count). range_size: works per range.
    """
    processes = min(2, os.cpu_count() or 1) if processes is None else processes
    threshold = THRESHOLD if threshold is None else threshold
    per_range = max(1, (RANGE_SIZE if range_size is None else range_size) // chunk_size)
    opts = {"pseudonymize": pseudonymize, "chunk_size": chunk_size, "with_labels": with_labels}
    with snapshot_connection(engine, scan=True) as conn:
        if processes <= 1 or _at_least(conn, filters, threshold) < threshold:
            yield from iter_tables(conn, schema, filters, **opts)
            return
    url = engine.url.render_as_string(hide_password=False)
    job = _Job(url, schema, filters, pseudonymize, with_labels, chunk_size, WORKER_HOOK)
    workers: list[_Worker] = []
    done = False
    try:
        _start(job, processes, workers)
        _expect(workers, "ready", START_TIMEOUT)
        with shared_snapshot(engine, lambda token: _share(workers, token)) as conn:
            # Whole chunks per range: the same chunks as one process, in the same order.
            ranges = _ranges(conn, filters, per_range * chunk_size)
            yield from _collect(workers, ranges, in_flight=len(workers) + 2)
        done = True
    finally:
        _stop(workers, graceful=done)


def _at_least(conn: Any, filters: ExportFilters, limit: int) -> int:
    """How many works match, counted up to `limit` only (a cheap size probe)."""
    camp = resolve_campaign(conn, filters.campaign)
    some = select(Work.id).where(*work_conditions(filters, camp.id if camp else None))
    return conn.execute(select(func.count()).select_from(some.limit(limit).subquery())).scalar()


def _ranges(conn: Any, filters: ExportFilters, size: int) -> Iterator[tuple[Any, Any]]:
    """(lo, hi) id bounds of successive runs of `size` matching works, each found when needed.

    A bound is the id `size` rows further on along the index, read in the snapshot: a few
    milliseconds each, while numbering every work up front (row_number) costs a second per
    million works before any worker could start.
    """
    camp = resolve_campaign(conn, filters.campaign)
    conds = work_conditions(filters, camp.id if camp else None)
    query = select(Work.id).where(*conds).order_by(Work.id).offset(size).limit(1)
    lo = None
    while True:
        hi = conn.execute(query if lo is None else query.where(Work.id >= lo)).scalar()
        yield lo, hi
        if hi is None:
            return
        lo = hi


# ---------------------------------------------------------------- parent side


@contextmanager
def _plain_main() -> Iterator[None]:
    """Hide __main__ from the workers while they start.

    A started process re-runs the parent's main script unless told otherwise, and inside
    Streamlit that is the page being run (it installs each page as __main__): a worker would
    run the export page again. A bare module gives the workers nothing to re-run.
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


def _start(job: _Job, processes: int, workers: list[_Worker]) -> None:
    """Start the worker processes into `workers` (they warm up, then report "ready")."""
    ctx = mp.get_context("forkserver")
    # Applies when the server starts: every worker then begins with these imported.
    ctx.set_forkserver_preload(["labeling.export.preload"])
    with _plain_main():
        for k in range(processes):
            task_r, task_w = ctx.Pipe(duplex=False)
            result_r, result_w = ctx.Pipe(duplex=False)
            if F_SETPIPE_SZ is not None:
                try:
                    fcntl(result_r.fileno(), F_SETPIPE_SZ, PIPE_BYTES)
                except OSError:  # over the system's limit: the default size works too
                    pass
            proc = ctx.Process(target=_work, args=(job, task_r, result_w),
                               name=f"gold-export-{k}", daemon=True)  # fmt: skip
            proc.start()
            workers.append(_Worker(proc, task_w, result_r))
            # The worker holds its own ends now; closing ours lets a death show as EOF.
            task_r.close()
            result_w.close()


def _receive(worker: _Worker) -> tuple[Any, ...]:
    """The next message of a worker (a chunk comes with its table); WorkerError on its death."""
    try:
        msg = worker.results.recv()
        if msg[0] == "chunk":
            data = _read_exact(worker.results.fileno(), msg[-1])
            return (*msg[:-1], pa.ipc.open_stream(data).read_all())
    except (EOFError, OSError):
        worker.process.join(timeout=5)
        raise WorkerError(f"export worker {worker.process.name} exited unexpectedly "
                          f"(exit code {worker.process.exitcode})") from None  # fmt: skip
    if msg[0] == "error":
        raise WorkerError(f"export worker {worker.process.name} failed:\n{msg[1]}")
    return msg


def _send(worker: _Worker, msg: Any) -> None:
    """Send a worker a task; if it has died, raise what it said last (see _receive)."""
    try:
        worker.tasks.send(msg)
    except OSError:  # its end is closed: read on to its error message or to the pipe's end
        while True:
            _receive(worker)


def _ready(workers: list[_Worker], timeout: float | None) -> list[_Worker]:
    """The workers with a message waiting (or that died), after up to `timeout` seconds."""
    waiting = wait([w.results for w in workers] + [w.process.sentinel for w in workers],
                   timeout)  # fmt: skip
    return [w for w in workers if w.results in waiting or w.process.sentinel in waiting]


def _expect(workers: list[_Worker], what: str, timeout: float) -> None:
    """Wait until every worker has reported `what` (WorkerError after `timeout` seconds)."""
    missing = list(workers)
    while missing:
        ready = _ready(missing, timeout)
        if not ready:
            raise WorkerError(f"export workers did not report {what!r} within {timeout:.0f} s")
        for w in ready:
            msg = _receive(w)
            if msg[0] != what:
                raise WorkerError(f"export worker sent {msg[0]!r} before {what!r}")
            missing.remove(w)


def _share(workers: list[_Worker], token: str) -> None:
    """Send the snapshot token and return once every worker has opened the snapshot."""
    for w in workers:
        _send(w, ("snapshot", token))
    _expect(workers, "joined", JOIN_TIMEOUT)


def _collect(
    workers: list[_Worker], ranges: Iterator[tuple[Any, Any]], in_flight: int
) -> Iterator[GoldChunk]:
    """Hand out ranges and yield their chunks in range order.

    At most `in_flight` ranges are out (sent and not yet yielded in full) and at most two per
    worker, so one is queued while it builds the other: memory stays bounded whichever
    worker is slow, and no worker waits for the parent between ranges.
    """
    chunks: dict[int, deque[GoldChunk]] = {}
    finished: set[int] = set()
    sent = want = 0  # ranges handed out; the range being yielded
    pending = next(ranges, None)
    while pending is not None or want < sent:
        while pending is not None and sent - want < in_flight:
            idle = min(workers, key=lambda w: len(w.queued))
            if len(idle.queued) >= 2:
                break
            _send(idle, ("range", sent, *pending))
            idle.queued.append(sent)
            chunks[sent] = deque()
            sent += 1
            pending = next(ranges, None)
        while chunks[want]:
            yield chunks[want].popleft()
        if want in finished:
            del chunks[want]
            want += 1
            continue
        for w in _ready(workers, None):
            msg = _receive(w)
            if msg[0] == "chunk":
                _, idx, labels, stale, table = msg
                chunks[idx].append(GoldChunk(table, labels, stale))
            elif msg[0] == "done":
                w.queued.remove(msg[1])
                finished.add(msg[1])


def _stop(workers: list[_Worker], *, graceful: bool) -> None:
    """End every worker: asked to stop after a complete export, terminated otherwise."""
    for w in workers:
        if graceful:
            try:
                w.tasks.send(None)
            except OSError:  # already gone
                pass
        elif w.process.is_alive():
            w.process.terminate()  # read-only: its transaction simply ends with it
    for w in workers:
        w.process.join(timeout=10)
        if w.process.is_alive():
            w.process.kill()
            w.process.join()
        w.tasks.close()
        w.results.close()


# ---------------------------------------------------------------- worker side


def _work(job: _Job, tasks: Connection, results: Connection) -> None:
    """A worker: open the shared snapshot, then build each range it is sent."""
    # Two chunks ready to go at most: a slow parent holds the worker back, not its memory.
    outbox: queue.Queue[Any] = queue.Queue(maxsize=2)
    # Sends run in their own thread, so that building goes on while the parent is busy.
    sender = threading.Thread(target=_send_all, args=(results, outbox), daemon=True)
    sender.start()
    engine = None
    try:
        engine = make_engine(job.url)
        with engine.connect() as conn:  # connect and let the dialect set itself up now
            conn.exec_driver_sql("SELECT 1").all()
        outbox.put(("ready",))
        msg = tasks.recv()
        if msg is not None:
            with shared_snapshot(engine, join=msg[1]) as conn:
                outbox.put(("joined",))
                while (msg := tasks.recv()) is not None:
                    _build(conn, job, msg[1], (msg[2], msg[3]), outbox)
    except EOFError:  # the parent is gone: nobody to report to
        pass
    except BaseException:  # noqa: BLE001 - whatever it is, the parent must hear of it
        outbox.put(("error", traceback.format_exc()))
    finally:
        outbox.put(None)
        sender.join()
        if engine is not None:
            engine.dispose()


def _build(
    conn: Any, job: _Job, idx: int, id_range: tuple[str | None, str | None], outbox: Any
) -> None:
    """Build one range and queue its chunks, then "done"."""
    if job.hook is not None:
        job.hook(idx)
    for chunk in iter_tables(conn, job.schema, job.filters, pseudonymize=job.pseudonymize,
                             chunk_size=job.chunk_size, with_labels=job.with_labels,
                             id_range=id_range):  # fmt: skip
        outbox.put(("chunk", idx, chunk.labels, chunk.stale, _ipc(chunk.table)))
    outbox.put(("done", idx))


def _ipc(table: pa.Table) -> pa.Buffer:
    """The table as an Arrow IPC stream, in a buffer of exactly its size (one copy)."""
    size = pa.MockOutputStream()
    with pa.ipc.new_stream(size, table.schema) as writer:
        writer.write_table(table)
    buf = pa.allocate_buffer(size.size())
    with pa.ipc.new_stream(pa.FixedSizeBufferWriter(buf), table.schema) as writer:
        writer.write_table(table)
    return buf


def _send_all(results: Connection, outbox: queue.Queue[Any]) -> None:
    """Send queued messages to the parent until None (a chunk's table as raw bytes)."""
    gone = False
    while (msg := outbox.get()) is not None:
        if gone:  # keep draining, so that the builder never blocks on a full outbox
            continue
        try:
            if msg[0] == "chunk":
                # The header says how many raw bytes follow; the parent reads them in place.
                results.send((*msg[:-1], msg[-1].size))
                _write_all(results.fileno(), memoryview(msg[-1]))
            else:
                results.send(msg)
        except OSError:  # the parent is gone (broken pipe): the worker ends on its next read
            gone = True


def _write_all(fd: int, data: memoryview) -> None:
    """Write every byte to a blocking pipe."""
    while data:
        data = data[os.write(fd, data) :]


def _read_exact(fd: int, size: int) -> pa.Buffer:
    """`size` bytes from a pipe, read straight into an Arrow buffer (no copy after the read)."""
    buf = pa.allocate_buffer(size)
    view, got = memoryview(buf), 0
    while got < size:
        n = os.readv(fd, [view[got:]])
        if not n:
            raise EOFError
        got += n
    return buf
