"""Committing an import's batches in file order while the next batch fills."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from db.engine import is_memory_sqlite, is_sqlite, write_connection
from db.wal import WalCheckpointer
from labeling.frames.store import StoredCounts, write_batch

if TYPE_CHECKING:
    from labeling.frames.lines import Parsed


class BatchWriter:
    """Writes batches one at a time, each in its own transaction, in a thread of its own.

    While one batch is written (COPY or executemany, then the commit), the importing
    process takes the next batch's lines: the database works while Python does, where
    before each waited for the other (a PostgreSQL server sat idle while the lines were
    taken, and the lines waited for the COPY). At most one batch is in flight, so batches
    commit in file order, memory holds one batch more, and a failed batch stops the
    import at the next submit or at close: no batch after a failed one is written.
    An in-memory SQLite database, which is private to the connection of one thread, is
    written in the caller's thread. On a SQLite file, a WalCheckpointer copies the WAL into
    the file beside the writer (db/wal.py).
    """

    def __init__(
        self, engine: Engine, fresh: bool, committed: Callable[[StoredCounts], None]
    ) -> None:
        self.engine, self.fresh, self.committed = engine, fresh, committed
        threaded = not is_memory_sqlite(engine)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="import-writer") if threaded else None
        self._inflight: Future[StoredCounts] | None = None
        self.checkpointer = WalCheckpointer(engine) if threaded and is_sqlite(engine) else None

    def submit(self, batch: list[Parsed]) -> None:
        """Write a batch once the one before it has committed (its failure raises here)."""
        self.wait()
        if self._pool is None:
            self.committed(self._commit(batch))
        else:
            self._inflight = self._pool.submit(self._commit, batch)

    def wait(self) -> None:
        """Wait for the batch in flight; count it only once committed, or raise its error."""
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
        self.committed(counts)

    def close(self) -> None:
        """Wait for the last batch, then end the thread (also when waiting raises)."""
        try:
            self.wait()
        finally:
            if self._pool is not None:
                self._pool.shutdown()
            if self.checkpointer is not None:
                self.checkpointer.close()

    def _commit(self, batch: list[Parsed]) -> StoredCounts:
        counts = StoredCounts()
        with write_connection(self.engine, bulk=True) as conn:
            write_batch(conn, batch, counts, self.fresh)
        if self.checkpointer is not None:
            self.checkpointer.committed()
        return counts
