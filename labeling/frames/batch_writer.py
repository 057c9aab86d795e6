"""Committing an import's batches in file order while the next batch fills."""

from __future__ import annotations

import sys
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine

from db.engine import is_memory_sqlite, is_sqlite, write_connection
from db.staging import drop_groups, ref_group
from db.wal import WalCheckpointer
from labeling.frames.store import StoredCounts, write_batch

if TYPE_CHECKING:
    from labeling.frames.lines import Parsed


class BatchWriter:
    """Writes batches one at a time, in transactions of `commit_rows`, in a thread of its own.

    While one batch is written (COPY or executemany, then the commit), the importing
    process takes the next batch's lines: the database works while Python does, where
    before each waited for the other (a PostgreSQL server sat idle while the lines were
    taken, and the lines waited for the COPY). At most one batch is in flight, so batches
    commit in file order, memory holds one batch more, and a failed batch stops the
    import at the next submit or at close: no batch after a failed one is written.
    An in-memory SQLite database, which is private to the connection of one thread, is
    written in the caller's thread. On a SQLite file, a WalCheckpointer copies the WAL into
    the file beside the writer (db/wal.py).

    A transaction takes batches until it holds `commit_rows` rows (default: one batch), so
    that the batches handed over stay small (memory) while the commits are few. Each commit
    wrote again every page of the works table's id index that the batch touched (ids come
    in random order): with a commit every 5,000 rows, a 1M SQLite import wrote 8.2 GB of
    WAL for a 3.6 GB table (bench/RESULTS.md, issue 16, seventeenth pass). Rows are counted
    once their transaction commits; a failed batch rolls back the batches of its
    transaction, uncounted, and close() commits the last one.
    """

    def __init__(
        self, engine: Engine, fresh: bool, committed: Callable[[StoredCounts], None],
        commit_rows: int = 0, stage_dir: str | None = None,
    ) -> None:  # fmt: skip
        self.engine, self.fresh, self.committed = engine, fresh, committed
        self.commit_rows, self.stage_dir = commit_rows, stage_dir
        self._group = -1  # the last staging group written so far (db/staging.py)
        threaded = not is_memory_sqlite(engine)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="import-writer") if threaded else None
        self._inflight: Future[StoredCounts | None] | None = None
        self.checkpointer = WalCheckpointer(engine) if threaded and is_sqlite(engine) else None
        # The open transaction, used in the writer's thread only: its context, connection,
        # and what its batches wrote so far.
        self._open: tuple[ExitStack, Connection] | None = None
        self._counts, self._rows = StoredCounts(), 0

    def submit(self, batch: list[Parsed]) -> None:
        """Write a batch once the one before it is written (its failure raises here)."""
        self.wait()
        if self._pool is None:
            self._count(self._write(batch))
        else:
            self._inflight = self._pool.submit(self._write, batch)

    def wait(self) -> None:
        """Wait for the batch in flight; count what committed, or raise its error."""
        future = self._inflight
        if future is None:
            return
        try:
            counts = future.result()
        except BaseException:
            # Its own failure is raised once; an interrupt (Ctrl-C) while it is written
            # leaves it in flight, so that close() still waits for it and counts it.
            if future.done():
                self._inflight = None
            raise
        self._inflight = None
        self._count(counts)

    def close(self) -> None:
        """Wait for the last batch, commit its transaction, then end the thread (also when
        waiting raises: what was written is committed, as each batch was before)."""
        try:
            self.wait()
        finally:
            try:
                if self._pool is None:
                    self._count(self._commit())
                else:
                    self._count(self._pool.submit(self._commit).result())
            finally:
                if self._pool is not None:
                    self._pool.shutdown()
                if self.checkpointer is not None:
                    self.checkpointer.close()

    def _count(self, counts: StoredCounts | None) -> None:
        if counts is not None:
            self.committed(counts)

    def _write(self, batch: list[Parsed]) -> StoredCounts | None:
        """Write a batch into the open transaction; commit it once it holds commit_rows."""
        if self._open is None:
            stack = ExitStack()
            self._open = stack, stack.enter_context(write_connection(self.engine, bulk=True))
        stack, conn = self._open
        try:
            if self.stage_dir is not None:  # before write_batch gives the lines their rows back
                last = next((p.row for p in reversed(batch) if type(p.row) is int), None)
                if last is not None:
                    self._group = max(self._group, ref_group(last))
            write_batch(conn, batch, self._counts, self.fresh, self.stage_dir)
        except BaseException:
            self._open, self._counts, self._rows = None, StoredCounts(), 0
            stack.__exit__(*sys.exc_info())  # rolls the transaction back
            raise
        self._rows += len(batch)
        return self._commit() if self._rows >= self.commit_rows else None

    def _commit(self) -> StoredCounts | None:
        """Commit the open transaction (None: there is none): what its batches wrote."""
        if self._open is None:
            return None
        (stack, _), counts = self._open, self._counts
        self._open, self._counts, self._rows = None, StoredCounts(), 0
        stack.close()
        if self.checkpointer is not None:
            self.checkpointer.committed()
        if self.stage_dir is not None and self._group > 0:
            # The groups before the last one written have all their rows written: no later
            # transaction reads their files.
            drop_groups(self.stage_dir, self._group)
        return counts
