"""Engine and sessions built from a URL; SQLite gets WAL, a busy timeout and FKs."""

from __future__ import annotations

import os
import re
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import orjson
from sqlalchemy import Connection, CursorResult, Engine, Result, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from db.sqlite_files import is_sqlite_path
from db.staging import detach_all
from db.wal import in_rollback

try:  # POSIX only; elsewhere SQLite's own busy handler is the only queue
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


class RawJSON(str):
    """JSON text that is already serialised: stored as it is, never re-encoded."""


def json_text(obj: Any) -> str:
    """A value as JSON text (orjson); RawJSON is text already and is kept as it is."""
    if isinstance(obj, RawJSON):
        return str(obj)
    return orjson.dumps(obj).decode()


@dataclass(frozen=True)
class EngineSpec:
    """How an engine was built: what another process needs to build the same one."""

    url: str
    busy_timeout_ms: int = 30_000
    echo: bool = False

    def build(self) -> Engine:
        """A new engine of this spec (see make_engine)."""
        return make_engine(self.url, busy_timeout_ms=self.busy_timeout_ms, echo=self.echo)


# The spec of every engine make_engine built, for engine_spec (weak: engines come and go).
_specs: weakref.WeakKeyDictionary[Engine, EngineSpec] = weakref.WeakKeyDictionary()


def engine_spec(engine: Engine) -> EngineSpec:
    """The spec an engine was built from; an engine built elsewhere gets the default options."""
    spec = _specs.get(engine)
    return spec or EngineSpec(engine.url.render_as_string(hide_password=False))


def make_engine(url: str, *, busy_timeout_ms: int = 30_000, echo: bool = False) -> Engine:
    """Build an engine for `url`; SQLite files get their directory, WAL and pragmas."""
    engine = _create(url, busy_timeout_ms, echo)
    _specs[engine] = EngineSpec(url, busy_timeout_ms, echo)
    return engine


def _create(url: str, busy_timeout_ms: int, echo: bool) -> Engine:
    """The engine of make_engine."""
    parsed = make_url(url)
    kwargs: dict[str, Any] = {
        "echo": echo,
        # orjson is several times faster than json for the large record columns.
        "json_serializer": json_text,
        "json_deserializer": orjson.loads,
    }
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        # "file:..." names are SQLite URIs (e.g. read-only mode): not a path to create.
        if is_sqlite_path(database):
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        # Transactions are begun by our own listener (BEGIN / BEGIN IMMEDIATE), so
        # pysqlite's implicit transaction handling must stay out of the way.
        kwargs["connect_args"] = {"timeout": busy_timeout_ms / 1000, "isolation_level": None}
        engine = create_engine(url, **kwargs)
        _configure_sqlite(engine, busy_timeout_ms)
        return engine
    kwargs["pool_pre_ping"] = True
    kwargs["pool_size"] = 5
    kwargs["max_overflow"] = 10
    return create_engine(url, **kwargs)


# The page size of new SQLite files (existing files keep theirs). A works row is about
# 4 KB (its record is 3 KB), so with 4 KB pages almost every row spilled onto overflow
# pages, and a bulk import paid a system call per page: writing the WAL, checkpointing it,
# each index build reading the table back. With 16 KB pages a row fits, 3-4 to a page
# (bench/RESULTS.md, issue 16, third pass: where a 1M import's time goes now).
SQLITE_PAGE_SIZE = 16384


def _configure_sqlite(engine: Engine, busy_timeout_ms: int) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        # Before WAL: a page size takes effect only while the file is still empty.
        cur.execute(f"PRAGMA page_size={SQLITE_PAGE_SIZE}")
        # A bulk load of this process may hold the file in rollback-journal mode: its
        # connections keep that mode, and sync fully (db/wal.py, rollback_journal).
        rollback = in_rollback(engine.url.database)
        if not rollback:
            cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA synchronous={'FULL' if rollback else 'NORMAL'}")
        # 64 MB of page cache keeps the queue's indexes in memory during bulk imports.
        cur.execute("PRAGMA cache_size=-65536")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # A writer that starts as a reader and upgrades later can deadlock with another
        # writer and fail at once with "database is locked"; callers that will write ask
        # for an immediate transaction with execution_options(sqlite_immediate=True).
        mode = "IMMEDIATE" if conn.get_execution_options().get("sqlite_immediate") else ""
        conn.exec_driver_sql(f"BEGIN {mode}".strip())


def is_sqlite(engine: Engine) -> bool:
    """True when the engine is SQLite (the embedded default)."""
    return engine.dialect.name == "sqlite"


def is_memory_sqlite(engine: Engine) -> bool:
    """True when the engine is an in-memory SQLite database, which is private to the
    connection (and so to the thread) that opened it."""
    database = engine.url.database
    memory = not database or ":memory:" in database or "mode=memory" in database
    return is_sqlite(engine) and memory


_lock_files = threading.local()
if hasattr(os, "register_at_fork"):  # a forked child must not share its parent's lock file
    os.register_at_fork(after_in_child=lambda: _lock_files.__dict__.clear())


class _LockFile:
    """An open lock file, closed when its thread's storage is collected."""

    def __init__(self, path: str) -> None:
        """Open (or create) the lock file."""
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o664)

    def __del__(self) -> None:
        """Close the descriptor (which also drops any lock it holds)."""
        os.close(self.fd)


def _writer_lock_fd(engine: Engine) -> int | None:
    """This thread's descriptor of the SQLite writers' lock file, or None when not used."""
    database = engine.url.database if is_sqlite(engine) else None
    if fcntl is None or not is_sqlite_path(database):
        return None
    path = f"{database}-writelock"
    files = _lock_files.__dict__.setdefault("files", {})
    if path not in files:
        files[path] = _LockFile(path)
    return files[path].fd


# SQLite's default: a commit that leaves more WAL pages than this copies them into the file.
WAL_AUTOCHECKPOINT = 1000
# During a bulk load (a frame import): 25,600 pages of WAL between checkpoints, not 1000:
# 100 MB with 4 KB pages, 400 MB with the 16 KB pages of new files (measured with both).
BULK_WAL_AUTOCHECKPOINT = 25_600


@contextmanager
def write_connection(engine: Engine, *, bulk: bool = False) -> Iterator[Connection]:
    """A Core connection in one write transaction (immediate on SQLite).

    On a SQLite file, writers first queue on an OS lock next to the file: SQLite's busy
    handler makes a waiting writer sleep and poll (up to 100 ms at a time), so under
    contention one process can starve for seconds, while a blocking flock wakes the next
    writer as soon as the lock is free. The pooled connection is taken before queueing, so
    the lock is held only for the transaction itself.

    bulk: on SQLite, the commit checkpoints the WAL only once it holds 25,600 pages (100 or
    400 MB, see BULK_WAL_AUTOCHECKPOINT; then the default again): a frame import writes
    gigabytes in 15 MB batches, and a checkpoint (copy into the file, fsync) after each
    batch cost more than the inserts. Durability is unchanged (synchronous=NORMAL: a
    checkpoint is not a commit). A frame import also copies the WAL in a thread of its own
    as it goes (db/wal.py), so that this bound is mostly not reached.
    """
    sqlite = is_sqlite(engine)
    conn_opts = {"sqlite_immediate": True} if sqlite else {}
    fd = _writer_lock_fd(engine)
    with engine.connect().execution_options(**conn_opts) as conn:
        if bulk and sqlite:
            _wal_autocheckpoint(conn, BULK_WAL_AUTOCHECKPOINT)
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            with conn.begin():
                yield conn
        finally:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
            if bulk and sqlite:
                _wal_autocheckpoint(conn, WAL_AUTOCHECKPOINT)
                _detach_staging(conn)


def _detach_staging(conn: Connection) -> None:
    """Detach the staging files a bulk transaction read (db/staging.py), once it ended."""
    dbapi = conn.connection.driver_connection
    if dbapi is not None:
        detach_all(dbapi)


def _wal_autocheckpoint(conn: Connection, pages: int) -> None:
    """Set a SQLite connection's checkpoint threshold outside any transaction (no BEGIN)."""
    dbapi = conn.connection.driver_connection
    if dbapi is not None:  # None: the connection was invalidated (it will not be reused)
        dbapi.execute(f"PRAGMA wal_autocheckpoint={int(pages)}")


@contextmanager
def write_session(engine: Engine) -> Iterator[Session]:
    """One write transaction as an ORM session (see write_connection)."""
    with write_connection(engine) as conn:
        with Session(bind=conn, expire_on_commit=False) as session:
            yield session
            session.flush()


@contextmanager
def snapshot_connection(engine: Engine, *, scan: bool = False) -> Iterator[Connection]:
    """A connection in one read transaction that sees a single database state throughout.

    SQLite (WAL) fixes a reader's snapshot at its first read, which this does at once;
    PostgreSQL needs REPEATABLE READ, as READ COMMITTED takes a new snapshot per statement.
    scan: the reader reads each page once, in order (an export): on SQLite it gets an 8 MB
    page cache instead of the usual 64 MB, which would only add to its memory.
    """
    sqlite = is_sqlite(engine)
    options = {} if sqlite else {"isolation_level": "REPEATABLE READ"}
    with engine.connect().execution_options(**options) as conn, conn.begin():
        # The first read fixes the snapshot (SQLite must read a page of the file for it).
        conn.exec_driver_sql("SELECT count(*) FROM sqlite_master" if sqlite else "SELECT 1").all()
        with _scan_cache(conn, sqlite and scan):
            yield conn


@contextmanager
def _scan_cache(conn: Connection, small: bool) -> Iterator[None]:
    """An 8 MB SQLite page cache for a reader that reads each page once (small=True)."""
    if not small:
        yield
        return
    before = conn.exec_driver_sql("PRAGMA cache_size").scalar_one()
    conn.exec_driver_sql("PRAGMA cache_size=-8192")
    try:
        yield
    finally:  # the pooled connection goes back with its usual cache
        conn.exec_driver_sql(f"PRAGMA cache_size={int(before)}")


def affected_rows(result: Result[Any]) -> int:
    """Rows an UPDATE or DELETE matched.

    Session.execute is typed as returning a plain Result, though a DML statement's result
    is always a CursorResult, which has the count.
    """
    return int(cast(CursorResult[Any], result).rowcount or 0)


_SNAPSHOT_ID = re.compile(r"^[0-9A-Fa-f]+(-[0-9A-Fa-f]+)+$")


@contextmanager
def shared_snapshot(
    engine: Engine,
    share: Callable[[str], None] | None = None,
    *,
    join: str | None = None,
    scan: bool = True,
) -> Iterator[Connection]:
    """A read transaction whose snapshot other processes open too (a parallel export).

    Exporting side (`share` given): opens the snapshot, then calls share(token), which must
    hand the token to every worker and return only once each of them is inside the snapshot,
    i.e. has entered shared_snapshot(engine, join=token). PostgreSQL exports its snapshot
    (pg_export_snapshot) and workers import it; this transaction is open throughout share.
    SQLite cannot export a snapshot, but a WAL reader's snapshot is the last commit before its
    first read: a write lock (BEGIN IMMEDIATE, queued like any writer) held from before this
    connection's first read until share returns lets no commit in between, so every reader
    sees the same state. Start the workers beforehand, so that writers wait only milliseconds.
    Joining side (`join`): a connection in the snapshot of that token.
    scan: an 8 MB SQLite page cache, as in snapshot_connection.
    """
    if (share is None) == (join is None):
        raise ValueError("shared_snapshot needs exactly one of share and join")
    sqlite = is_sqlite(engine)
    options = {} if sqlite else {"isolation_level": "REPEATABLE READ"}
    with ExitStack() as lock, engine.connect().execution_options(**options) as conn:
        with conn.begin():
            if join is not None and not sqlite:
                if not _SNAPSHOT_ID.match(join):  # spliced into SQL below: a literal only
                    raise ValueError(f"not a snapshot id: {join!r}")
                # Must be the first statement of the (REPEATABLE READ) transaction.
                conn.exec_driver_sql(f"SET TRANSACTION SNAPSHOT '{join}'")
            elif join is None and sqlite:
                lock.enter_context(write_connection(engine))
            # The first read fixes this connection's snapshot (see snapshot_connection).
            first = "SELECT pg_export_snapshot()" if join is None else "SELECT 1"
            if sqlite:
                first = "SELECT count(*) FROM sqlite_master"
            token = conn.exec_driver_sql(first).scalar()
            if share is not None:
                share("" if sqlite else str(token))
                lock.close()  # every worker holds the snapshot: writers may commit again
            with _scan_cache(conn, sqlite and scan):
                yield conn


@contextmanager
def read_session(engine: Engine) -> Iterator[Session]:
    """A read-only session (rolled back at the end)."""
    with Session(bind=engine, expire_on_commit=False) as session:
        try:
            yield session
        finally:
            session.rollback()


def alembic_config(url: str) -> Any:
    """An Alembic Config pointing at our migrations and `url`."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(engine: Engine) -> None:
    """Apply every migration up to head on the engine's database."""
    from alembic import command

    cfg = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


def current_revision(engine: Engine) -> str | None:
    """The Alembic revision the database is at (None before any migration)."""
    with engine.connect() as conn:
        try:
            row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
        except Exception:
            return None
    return row[0] if row else None
