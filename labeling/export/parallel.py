"""The gold set built by a pool of worker processes that share one database snapshot.

Building chunks (SQLite reads and Arrow compute) takes nearly all of an export's time and
holds one core, so a large export splits the matching works into id ranges, computed in
SQL inside the snapshot, and maps them over a ProcessPoolExecutor. Every worker opens the
snapshot of the parent (db.engine.shared_snapshot), builds its ranges with iter_tables and
returns each chunk as Arrow IPC bytes; the parent yields the ranges in id order, exactly
the chunks a single process would have built, so the files stay byte-identical.

Workers start through a "forkserver" (never a plain fork: the Streamlit server runs
threads) that has this module and its imports loaded already: the first export of a
process pays for starting that server (about half a second, mostly imports), later ones a
few milliseconds per worker.
"""

from __future__ import annotations

import functools
import multiprocessing as mp
import os
import signal
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor
from concurrent.futures import wait as wait_futures
from concurrent.futures.process import BrokenProcessPool
from contextlib import ExitStack
from dataclasses import dataclass, field
from multiprocessing.synchronize import Barrier
from typing import Any, TypeVar

import pyarrow as pa
from sqlalchemy import Connection, Engine, func, select

from db.engine import EngineSpec, engine_spec, shared_snapshot, snapshot_connection
from db.models import Work
from labeling.errors import StorageError
from labeling.export.plan import RANGE_SIZE, THRESHOLD, ExportPlan
from labeling.export.table import GoldChunk, iter_tables
from labeling.processes import plain_main

__all__ = ["RANGE_SIZE", "THRESHOLD", "WORKER_HOOK", "WorkerError", "iter_tables_parallel"]

START_TIMEOUT = 120.0  # seconds for workers to start (the first one starts the forkserver)
JOIN_TIMEOUT = 10.0  # seconds for workers to open the snapshot (SQLite writers wait as long)
WORKER_HOOK: Callable[[int], None] | None = None  # tests: called in a worker before each range
_T = TypeVar("_T")


class WorkerError(StorageError):
    """A worker process failed; the message carries the worker's own error."""


class _Failed(Exception):
    """A worker task's failure as plain text (any exception, picklable or not, gets home)."""


@dataclass
class _Worker:
    """What a worker process keeps between its tasks (module state: one per process)."""

    spec: EngineSpec | None = None
    plan: ExportPlan | None = None
    hook: Callable[[int], None] | None = None
    barrier: Barrier | None = None
    engine: Engine | None = None
    conn: Connection | None = None
    held: ExitStack = field(default_factory=ExitStack)


_worker = _Worker()


def iter_tables_parallel(engine: Engine, plan: ExportPlan) -> Generator[GoldChunk, None, None]:
    """The chunks of iter_tables over one snapshot, built by plan.processes workers.

    A generator: close it (or exhaust it) and its workers are gone; errors of a worker are
    raised here as WorkerError. Fewer than plan.threshold matching works, or processes <= 1,
    build in this process.
    """
    per_range = max(1, plan.range_size // plan.chunk_size) * plan.chunk_size
    with snapshot_connection(engine, scan=True) as conn:
        if plan.processes <= 1 or _at_least(conn, plan, plan.threshold) < plan.threshold:
            yield from iter_tables(conn, plan)
            return
    ctx = mp.get_context("forkserver")
    # Applies when the server starts: every worker then begins with these imported.
    ctx.set_forkserver_preload(["labeling.export.preload"])
    n = plan.processes
    args = (engine_spec(engine), plan, WORKER_HOOK, ctx.Barrier(n))
    pool = _Pool(ProcessPoolExecutor(n, mp_context=ctx, initializer=_init, initargs=args))
    done = False
    try:
        with plain_main():  # the executor starts its processes in submit: all n here
            started = [pool.executor.submit(_connect) for _ in range(n)]
        pool.note_processes()
        pool.results(started, START_TIMEOUT, "start")
        with shared_snapshot(engine, lambda token: pool.share(n, token)) as conn:
            # Whole chunks per range: the same chunks as one process, in the same order.
            for chunks in pool.ordered(_ranges(conn, plan, per_range), window=n + 2):
                yield from chunks
        done = True
    finally:
        pool.stop(graceful=done)


def _at_least(conn: Connection, plan: ExportPlan, limit: int) -> int:
    """How many works match, counted up to `limit` only (a cheap size probe)."""
    some = select(Work.id).where(*plan.conditions()).limit(limit).subquery()
    return int(conn.execute(select(func.count()).select_from(some)).scalar_one())


def _ranges(conn: Connection, plan: ExportPlan, size: int) -> Iterator[tuple[Any, Any]]:
    """(lo, hi) id bounds of successive runs of `size` matching works, each found when needed.

    A bound is the id `size` rows further on along the index, read in the snapshot: a few
    milliseconds each, while numbering every work up front (row_number) costs a second per
    million works before any worker could start.
    """
    query = select(Work.id).where(*plan.conditions()).order_by(Work.id).offset(size).limit(1)
    lo = None
    while True:
        hi = conn.execute(query if lo is None else query.where(Work.id >= lo)).scalar()
        yield lo, hi
        if hi is None:
            return
        lo = hi


# ---------------------------------------------------------------- parent side


@dataclass
class _Pool:
    """The executor and its processes, as started (it forgets those that have ended)."""

    executor: ProcessPoolExecutor
    procs: list[Any] = field(default_factory=list)

    def note_processes(self) -> None:
        """Keep the started processes, named as their errors will name them."""
        # The executor keeps them in a private dict (no public API lists them).
        self.procs = list(getattr(self.executor, "_processes", {}).values())
        for proc in self.procs:
            proc.name = f"gold-export-{proc.pid}"

    def share(self, n: int, token: str) -> None:
        """Hand every worker the snapshot token; return once each of them is inside it."""
        # The barrier holds each worker in its task until all n are in: one task per worker.
        self.results([self.submit(_join, token) for _ in range(n)], JOIN_TIMEOUT,
                     "open the snapshot")  # fmt: skip

    def submit(self, fn: Callable[..., _T], *args: Any) -> Future[_T]:
        """A task; the death of a worker before it, as WorkerError (as result() says it)."""
        try:
            return self.executor.submit(fn, *args)
        except BrokenProcessPool:  # a worker died while the ranges were being handed out
            raise WorkerError(self._death()) from None

    def results(self, futures: list[Future[Any]], timeout: float, what: str) -> list[Any]:
        """The results of `futures`; WorkerError if one fails or they take over `timeout` s."""
        finished, late = wait_futures(futures, timeout, return_when=FIRST_EXCEPTION)
        for future in finished:
            self.result(future)
        if late:
            raise WorkerError(f"export workers did not {what} within {timeout:.0f} s")
        return [self.result(f) for f in futures]

    def result(self, future: Future[_T]) -> _T:
        """A task's result; its failure, or the death of a worker, as WorkerError."""
        try:
            return future.result()
        except _Failed as exc:
            raise WorkerError(str(exc)) from None
        except BrokenProcessPool:
            raise WorkerError(self._death()) from None

    def _death(self) -> str:
        """Which worker exited, and how (its exit code shows once it is reaped)."""
        return death_message(self.procs)

    def ordered(self, ranges: Iterator[tuple[Any, Any]], window: int) -> Iterator[list[GoldChunk]]:
        """Map _build over the ranges, yielding their chunks in range order.

        At most `window` ranges are out at once (submitted and not yet yielded): memory
        stays flat whichever worker is slow, and a worker finds its next range queued.
        """
        out: deque[Future[list[Any]]] = deque()
        for idx, (lo, hi) in enumerate(ranges):
            out.append(self.submit(_build, idx, lo, hi))
            if len(out) >= window:
                yield _decode(self.result(out.popleft()))
        while out:
            yield _decode(self.result(out.popleft()))

    def stop(self, *, graceful: bool) -> None:
        """End every worker: asked to stop after a complete export, terminated otherwise."""
        if graceful:
            self.executor.shutdown(wait=True)
            return
        self.executor.shutdown(wait=False, cancel_futures=True)
        for proc in self.procs:
            if proc.is_alive():
                proc.terminate()  # read-only: its transaction simply ends with it
        for proc in self.procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()
        self.executor.shutdown(wait=True)  # its thread sees the workers gone and ends


def _decode(chunks: list[tuple[Any, list[dict[str, Any]], Any]]) -> list[GoldChunk]:
    """The chunks of a range from their Arrow IPC streams."""
    return [GoldChunk(_table(t), labels, None if s is None else _table(s))
            for t, labels, s in chunks]  # fmt: skip


def _table(data: Any) -> pa.Table:
    """A table from an Arrow IPC stream (read in place)."""
    return pa.ipc.open_stream(data).read_all()


# What a forkserver child's exit code reads as when its status cannot be read (the
# forkserver ends with the pool): multiprocessing.popen_forkserver. It says nothing of why.
_UNKNOWN_EXIT = 255
_NOT_THE_CAUSE = (None, 0, -signal.SIGTERM, _UNKNOWN_EXIT)


def death_message(procs: list[Any], wait_s: float = 5.0) -> str:
    """The worker that died, by its own exit code: not one the executor terminated after it,
    nor one whose status the forkserver could not give (both came first by list order)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and all(p.exitcode in _NOT_THE_CAUSE for p in procs):
        time.sleep(0.01)
    dead = (
        [p for p in procs if p.exitcode not in _NOT_THE_CAUSE]
        or [p for p in procs if p.exitcode == _UNKNOWN_EXIT]  # not one the executor ended
        or [p for p in procs if p.exitcode]
        or procs
    )
    name, code = (dead[0].name, dead[0].exitcode) if dead else ("?", None)
    return f"export worker {name} exited unexpectedly (exit code {code})"


# ---------------------------------------------------------------- worker side


def _init(
    spec: EngineSpec, plan: ExportPlan, hook: Callable[[int], None] | None, barrier: Barrier
) -> None:
    """Worker initializer: keep the export's settings (nothing here may fail: the pool would
    break without a word of why; the first task does the work)."""
    _worker.spec, _worker.plan, _worker.hook, _worker.barrier = spec, plan, hook, barrier
    # Its parent is the forkserver, which ends with the exporting process: so does this one.
    parent = os.getppid()
    threading.Thread(target=_orphaned, args=(parent,), daemon=True).start()


def _orphaned(parent: int) -> None:
    """Exit once the forkserver (this worker's parent) has gone."""
    while os.getppid() == parent:
        time.sleep(1)
    os._exit(1)


def _reported(fn: Callable[..., _T]) -> Callable[..., _T]:
    """A worker task whose failure reaches the parent as _Failed, with its traceback."""

    @functools.wraps(fn)
    def task(*args: Any) -> _T:
        try:
            return fn(*args)
        except BaseException:  # noqa: BLE001 - whatever it is, the parent must hear of it
            name = f"gold-export-{os.getpid()}"
            raise _Failed(f"export worker {name} failed:\n{traceback.format_exc()}") from None

    return task


@_reported
def _connect() -> None:
    """Build this worker's engine from the parent's spec and connect (the dialect sets
    itself up now, not inside the snapshot); wait at the barrier: one task per worker."""
    assert _worker.spec is not None and _worker.barrier is not None
    _worker.engine = _worker.spec.build()
    with _worker.engine.connect() as conn:
        conn.exec_driver_sql("SELECT 1").all()
    _worker.barrier.wait(START_TIMEOUT)


@_reported
def _join(token: str) -> None:
    """Open the parent's snapshot and keep it for the ranges to come."""
    assert _worker.engine is not None and _worker.barrier is not None
    _worker.conn = _worker.held.enter_context(shared_snapshot(_worker.engine, join=token))
    _worker.barrier.wait(JOIN_TIMEOUT)


@_reported
def _build(idx: int, lo: str | None, hi: str | None) -> list[tuple[Any, Any, Any]]:
    """Build one range in the snapshot: each chunk's table, labels and stale summaries."""
    assert _worker.conn is not None and _worker.plan is not None
    if _worker.hook is not None:
        _worker.hook(idx)
    return [(_ipc(c.table), c.labels, None if c.stale is None else _ipc(c.stale))
            for c in iter_tables(_worker.conn, _worker.plan, id_range=(lo, hi))]  # fmt: skip


def _ipc(table: pa.Table) -> pa.Buffer:
    """The table as an Arrow IPC stream."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()
