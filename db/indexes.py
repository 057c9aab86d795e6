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
# rebuilding the deferred indexes of a 1M-work table (11 then; 5 since migration 0015) took
# 17.1 s with 2, 20.3 s without.
SORTER_THREADS = 2
# The page cache while they build, in KiB (PRAGMA cache_size=-N). It also caps the keys the
# sorter holds in memory before it hands them to a thread of its own to sort: with the
# usual 64 MB, a small index's 1M keys fit, and were sorted on the scanning thread after
# the scan. With 8 MB the sorting runs beside the scan: the 11 indexes a 1M-work table had
# then built in 13.0-13.4 s against 18.7-19.5 s (bench/RESULTS.md, issue 16, eleventh pass;
# the five left, measured again in the twelfth: 8 MB still as good as any other size).
BUILD_CACHE_KIB = 8192


def ensure_work_indexes(engine: Engine) -> None:
    """Create any missing index of the works table (one a killed bulk load left dropped)."""
    with write_connection(engine) as conn:
        sqlite = conn.dialect.name == "sqlite"
        if sqlite:
            cache = conn.exec_driver_sql("PRAGMA cache_size").scalar_one()
            conn.exec_driver_sql(f"PRAGMA threads={SORTER_THREADS}")
            conn.exec_driver_sql(f"PRAGMA cache_size=-{BUILD_CACHE_KIB}")
        try:
            for index in work_indexes(conn.dialect.name):
                index.create(conn, checkfirst=True)
        finally:
            if sqlite:  # the pooled connection goes back as it came
                conn.exec_driver_sql("PRAGMA threads=0")
                conn.exec_driver_sql(f"PRAGMA cache_size={int(cache)}")


# The indexes a bulk load builds at its end rather than row by row. Each build scans the
# whole table (3.5 GB at 1M works on SQLite), one to two seconds at 1M. Kept during the load
# instead, year and field cost about as much in the writer (a 1M SQLite import: the index
# builds 10.6-11.3 -> 6.3-6.5 s, the load 56.2-58.3 -> 62.3-63.5 s, with status kept too).
# Status is kept: every new work comes with the same status, so its keys go in at the end of
# the index. Kept, a 1M import's index builds took 0.8-1.0 s less on SQLite and its load
# 0.3-0.5 s more: 0.4-0.5 s less in all, side by side (3 pairs; a fourth, 37.0 -> 32.2 s).
# On PostgreSQL 0.3 s less in the builds, the load about the same. It was no better when
# the load was slower (98.8-100.8 -> 101.0-103.1 s; bench/RESULTS.md, issue 16, fourteenth,
# sixteenth and twentieth passes).
# The gold and export indexes are partial, and no work comes gold or validated: an import
# writes nothing to them.
DEFERRED = frozenset({"ix_works_year", "ix_works_field"})


def defer_indexes(engine: Engine) -> list[Any]:
    """Drop the works table's DEFERRED indexes for a bulk load into an empty table.

    Building such an index once after the load is cheaper than inserting into it row by
    row (several times, for keys in random order); the caller recreates them at the end
    (and ensure_work_indexes does at the next start if this process is killed meanwhile).
    """
    with write_connection(engine) as conn:
        if conn.execute(select(Work.id).limit(1)).first() is not None:
            return []
        indexes = [i for i in work_indexes(conn.dialect.name) if i.name in DEFERRED]
        for index in indexes:
            index.drop(conn)
    return indexes
