"""Which SQLite databases are files on disk, and the files SQLite keeps beside one."""

from __future__ import annotations

from typing import TypeGuard

# What SQLite may keep beside a database file: the WAL and its index, or the rollback journal.
SIDE_SUFFIXES = ("-wal", "-shm", "-journal")


def is_sqlite_path(database: str | None) -> TypeGuard[str]:
    """Whether a SQLite URL's database is a path to a file (not in memory, not a file: URI)."""
    return (database is not None and database not in ("", ":memory:")
            and not database.startswith("file:"))  # fmt: skip
