"""The works table's secondary indexes: which exist on a dialect, dropped, rebuilt."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, select

from db.engine import write_connection
from db.models import Work, index_applies


def work_indexes(dialect: str) -> list[Any]:
    """The works table's secondary indexes that exist on a dialect."""
    return sorted((i for i in Work.__table__.indexes if index_applies(i, dialect)),
                  key=lambda i: i.name)  # fmt: skip


# SQLite sorts a new index's keys on this many threads besides its own (PRAGMA threads):
# rebuilding the 11 deferred indexes of a 1M-work table took 17.1 s with 2, 20.3 s without.
SORTER_THREADS = 2


def ensure_work_indexes(engine: Engine) -> None:
    """Create any missing index of the works table (one a killed bulk load left dropped)."""
    with write_connection(engine) as conn:
        sqlite = conn.dialect.name == "sqlite"
        if sqlite:
            conn.exec_driver_sql(f"PRAGMA threads={SORTER_THREADS}")
        try:
            for index in work_indexes(conn.dialect.name):
                index.create(conn, checkfirst=True)
        finally:
            if sqlite:  # the pooled connection goes back as it came
                conn.exec_driver_sql("PRAGMA threads=0")


def defer_indexes(engine: Engine) -> list[Any]:
    """Drop the works table's secondary indexes for a bulk load into an empty table.

    Building an index once after the load is several times cheaper than updating nine
    B-trees in random order for every row; the caller recreates them at the end (and
    ensure_work_indexes does at the next start if this process is killed meanwhile).
    """
    with write_connection(engine) as conn:
        if conn.execute(select(Work.id).limit(1)).first() is not None:
            return []
        indexes = work_indexes(conn.dialect.name)
        for index in indexes:
            index.drop(conn)
    return indexes
