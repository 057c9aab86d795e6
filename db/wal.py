"""A SQLite file's journal during a bulk load: the WAL copied in a thread of its own, or the
rollback journal instead."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from db.sqlite_files import is_sqlite_path


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


# SQLite files a bulk load holds in rollback-journal mode (rollback_journal): a new
# connection to one leaves its journal mode as it is rather than turn the WAL back on.
_ROLLBACK: set[str] = set()
_ROLLBACK_LOCK = threading.Lock()
# How long the switch waits for a writer of another process to finish, in ms.
SWITCH_WAIT_MS = 1000


def in_rollback(database: str | None) -> bool:
    """Whether a bulk load holds this SQLite file in rollback-journal mode (this process)."""
    with _ROLLBACK_LOCK:
        return database in _ROLLBACK


@contextmanager
def rollback_journal(engine: Engine) -> Iterator[bool]:
    """A SQLite file in rollback-journal mode (TRUNCATE) for a bulk load; whether it switched.

    In WAL mode every page a load writes goes into the WAL, and a checkpoint then copies it
    into the file: each page is written twice. A rollback journal keeps only the pages that
    existed before a transaction, so the pages a load appends to the file are written once:
    a 1M import into an empty table used 1.5-3.1 core-seconds less in the importing process,
    0-2.7 s less in all (bench/RESULTS.md, issue 16, twenty-fourth pass). The price: a reader
    waits (its busy timeout) while a batch writes its pages, where in WAL mode it never does.
    So only for a load into an empty works table (the frame importer's deferred-index case),
    when there is nothing yet to read. Its commits sync fully (synchronous=FULL, make_engine's
    listener): NORMAL is crash-safe only with the WAL.

    The switch needs the file to itself: the pool's idle connections are closed first, and
    if another connection has the file open (another process, a page's session), SQLite
    keeps the WAL and the load runs in it as before (False). At the end the WAL is turned
    back on (by the next connection if it cannot be at once). A process killed meanwhile
    leaves the file in rollback mode with the unfinished batch in its journal: the next
    read-write connection rolls that batch back, and make_engine's listener turns the WAL on.
    """
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not is_sqlite_path(database):
        yield False
        return
    engine.dispose()  # idle pooled connections keep the WAL open: the switch would fail
    with _ROLLBACK_LOCK:
        _ROLLBACK.add(database)
    switched = False
    try:
        with engine.connect() as conn:
            dbapi = conn.connection.driver_connection
            assert dbapi is not None
            wait = dbapi.execute("PRAGMA busy_timeout").fetchone()[0]
            dbapi.execute(f"PRAGMA busy_timeout={SWITCH_WAIT_MS}")  # not a writer's 30 s
            try:
                mode = dbapi.execute("PRAGMA journal_mode=TRUNCATE").fetchone()[0]
                switched = mode == "truncate"
            except sqlite3.OperationalError:  # "database is locked": another has it open
                switched = False
            finally:
                dbapi.execute(f"PRAGMA busy_timeout={int(wait)}")
        if not switched:
            with _ROLLBACK_LOCK:
                _ROLLBACK.discard(database)
            engine.dispose()  # the connection that tried was set up for rollback mode
        yield switched
    finally:
        with _ROLLBACK_LOCK:
            _ROLLBACK.discard(database)
        if switched:
            engine.dispose()  # the pool's connections are in rollback mode: new ones follow
            try:
                with engine.connect():  # make_engine's listener turns the WAL back on
                    pass
            except DBAPIError:  # busy: the next connection turns it on
                pass
