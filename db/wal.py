"""Copying a SQLite WAL into its database file in a thread of its own during a bulk load."""

from __future__ import annotations

import sqlite3
from concurrent.futures import Future, ThreadPoolExecutor

from sqlalchemy import Engine


class WalCheckpointer:
    """Runs passive WAL checkpoints beside a bulk writer, one pass at a time.

    A frame import commits gigabytes through one writer. Left to the commits, each
    checkpoint (copying committed pages from the WAL into the file, then fsync) runs on the
    writer's thread and the import waits for it: about 17 s of a million-record import. A
    pass started after each commit copies them while the writer goes on; SQLite starts the
    WAL afresh at the next write transaction once a pass has copied all of it, and the
    writer's own autocheckpoint (write_connection(bulk=True)) still bounds the WAL when the
    passes fall behind. A passive pass never waits for readers or writers.

    The passes run on a connection of their own, outside the engine's pool, opened at the
    first pass and closed by close(). With a pooled one, which stays in the pool afterwards,
    the importing process's peak memory at 1M records went from 410 to 489 MB, near the end
    of the import; with this one it was 404 MB (why the pooled one cost more was not
    measured).

    A pass that fails (say, the disk is full) is ignored, as SQLite ignores a failed
    autocheckpoint: it copies committed data and changes nothing a reader sees; the next
    pass, or a later commit, checkpoints again. `passes` and `failures` count them.
    """

    def __init__(self, engine: Engine) -> None:
        database = engine.url.database
        assert database and database != ":memory:"  # a file: only a file has a WAL
        self.database = database
        self.passes = self.failures = 0
        self._conn: sqlite3.Connection | None = None  # used in the pool's thread only
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="wal-checkpoint")
        self._running: Future[None] | None = None

    def committed(self) -> None:
        """After a commit: start a pass unless one is running (that one copies what it can)."""
        if self._running is None or self._running.done():
            self._running = self._pool.submit(self._pass)

    def close(self) -> None:
        """Wait for the pass in flight, close the connection, then end the thread."""
        try:
            self._pool.submit(self._close).result()
        finally:
            self._pool.shutdown(wait=True)

    def _pass(self) -> None:
        try:
            if self._conn is None:
                uri = self.database.startswith("file:")
                self._conn = sqlite3.connect(self.database, uri=uri, isolation_level=None)
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.passes += 1
        except sqlite3.Error:
            self.failures += 1

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
