"""Engine and session factory built from a URL; SQLite gets WAL, a busy timeout and FKs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


class RawJSON(str):
    """JSON text that is already serialised: stored as it is, never re-encoded."""


def _json_serializer(obj: Any) -> str:
    if isinstance(obj, RawJSON):
        return str(obj)
    return orjson.dumps(obj).decode()


def make_engine(url: str, *, busy_timeout_ms: int = 30_000, echo: bool = False) -> Engine:
    """Build an engine for `url`; SQLite files get their directory, WAL and pragmas."""
    parsed = make_url(url)
    kwargs: dict[str, Any] = {
        "echo": echo,
        # orjson is several times faster than json for the large record columns.
        "json_serializer": _json_serializer,
        "json_deserializer": orjson.loads,
    }
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        if database and database != ":memory:":
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


def _configure_sqlite(engine: Engine, busy_timeout_ms: int) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA synchronous=NORMAL")
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


def session_factory(engine: Engine) -> sessionmaker[Session]:
    """A sessionmaker bound to `engine` that keeps objects usable after commit."""
    return sessionmaker(bind=engine, expire_on_commit=False)


@contextmanager
def write_session(engine: Engine) -> Iterator[Session]:
    """One write transaction: immediate on SQLite, committed on success, rolled back on error."""
    conn_opts = {"sqlite_immediate": True} if is_sqlite(engine) else {}
    with engine.connect().execution_options(**conn_opts) as conn:
        with Session(bind=conn, expire_on_commit=False) as session:
            with conn.begin():
                yield session
                session.flush()


@contextmanager
def write_connection(engine: Engine) -> Iterator[Connection]:
    """A Core connection in one write transaction (immediate on SQLite)."""
    conn_opts = {"sqlite_immediate": True} if is_sqlite(engine) else {}
    with engine.connect().execution_options(**conn_opts) as conn:
        with conn.begin():
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
