"""The import_runs table: a row per frame or labels import, and how each one ended."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, insert, update
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from db.engine import write_connection
from db.models import ImportRun, utcnow
from labeling.vocabulary import RUN_DONE, RUN_FAILED, RUN_RUNNING

# Bulk loads use the drivers directly (db/bulk.py): their errors are not wrapped.
_DRIVERS = ("sqlite3", "psycopg", "psycopg2")


def describe_error(exc: BaseException) -> str:
    """One line for an unexpected error: the driver's own first line for a database error."""
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        detail = str(exc.orig).strip().splitlines()
        return f"database error ({type(exc.orig).__name__}): {detail[0] if detail else ''}"
    if isinstance(exc, SQLAlchemyError) or type(exc).__module__.split(".")[0] in _DRIVERS:
        first = str(exc).strip().splitlines()
        return f"database error ({type(exc).__name__}): {first[0] if first else ''}"
    text = str(exc).strip().splitlines()
    return f"unexpected error ({type(exc).__name__}): {text[0] if text else ''}"


def start_run(engine: Engine, kind: str, path: Path) -> int:
    """Insert a running import's row and return its id."""
    with write_connection(engine) as conn:
        return conn.execute(
            insert(ImportRun).values(kind=kind, path=str(path), status=RUN_RUNNING,
                                     started_at=utcnow()).returning(ImportRun.id)
        ).scalar_one()  # fmt: skip


def finish_run(
    engine: Engine, run_id: int, summary: dict[str, Any], error: str | None = None
) -> None:
    """Close a run: done with its summary, or failed with the counts reached and the error."""
    with write_connection(engine) as conn:
        conn.execute(
            update(ImportRun).where(ImportRun.id == run_id).values(
                summary=summary, finished_at=utcnow(),
                status=RUN_FAILED if error else RUN_DONE, error=error,
            )
        )  # fmt: skip


def record_failed_run(engine: Engine, kind: str, path: Path, error: str) -> str | None:
    """Record a run that failed before it could record itself; why not, if that fails too."""
    try:
        with write_connection(engine) as conn:
            now = utcnow()
            conn.execute(insert(ImportRun).values(
                kind=kind, path=str(path), status=RUN_FAILED, error=error,
                started_at=now, finished_at=now,
            ))  # fmt: skip
    except Exception as exc:  # the database itself may be what failed
        return describe_error(exc)
    return None
