"""Storage faults: a full disk or a read-only database, told apart from other database errors.

A write that fails this way was rolled back as a whole, so callers can say plainly that it
was not saved and keep what the user typed. storage_errors() is the one place that
classifies the driver's error (sqlite3 result codes, PostgreSQL SQLSTATEs).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.exc import DBAPIError

# SQLite primary result codes (an extended code keeps the primary one in its low byte).
SQLITE_READONLY, SQLITE_IOERR, SQLITE_FULL = 8, 10, 13
# PostgreSQL SQLSTATEs: disk_full, read_only_sql_transaction.
PG_DISK_FULL, PG_READ_ONLY = "53100", "25006"


class StorageError(RuntimeError):
    """The database could not store a write; nothing of that write was recorded."""

    reason = "the database could not write to its disk"


class StorageFull(StorageError):
    """The database's disk (or its size limit) is full."""

    reason = "the database's disk is full"


class StorageReadOnly(StorageError):
    """The database is read-only (file permissions, a read-only mount or a standby server)."""

    reason = "the database is read-only"


def storage_fault(exc: BaseException) -> type[StorageError] | None:
    """The StorageError class for a driver error, or None when it is not a storage fault.

    Args:
        exc: a SQLAlchemy DBAPIError (its .orig is the driver's error) or a driver error.
    """
    orig = getattr(exc, "orig", None) or exc
    if isinstance(orig, sqlite3.Error):
        code = getattr(orig, "sqlite_errorcode", None)
        primary = code & 0xFF if isinstance(code, int) else None
        text = str(orig).lower()
        if primary == SQLITE_FULL or "database or disk is full" in text:
            return StorageFull
        if primary == SQLITE_READONLY or "readonly database" in text:
            return StorageReadOnly
        if primary == SQLITE_IOERR or "disk i/o error" in text:
            return StorageError
        return None
    sqlstate = getattr(orig, "sqlstate", None)
    if sqlstate == PG_DISK_FULL:
        return StorageFull
    if sqlstate == PG_READ_ONLY:
        return StorageReadOnly
    return None


@contextmanager
def storage_errors(what: str) -> Iterator[None]:
    """Re-raise a full-disk, read-only or disk I/O database error as a StorageError.

    Args:
        what: the start of the message, e.g. "Not saved"; the reason and the driver's own
            words follow ("Not saved: the database's disk is full (database or disk is full)").
    """
    try:
        yield
    except DBAPIError as exc:
        kind = storage_fault(exc)
        if kind is None:
            raise
        orig = getattr(exc, "orig", None) or exc
        lines = str(orig).strip().splitlines()
        detail = (lines or ["no detail"])[0][:200]
        name = getattr(orig, "sqlite_errorname", None)  # e.g. SQLITE_IOERR_WRITE: says which
        detail += f", {name}" if name and name not in ("SQLITE_FULL", "SQLITE_READONLY") else ""
        raise kind(f"{what}: {kind.reason} ({detail})") from exc
