"""Online backup and restore of the SQLite database (PostgreSQL uses pg_dump/pg_restore)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import URL, make_url

from db.sqlite_files import is_sqlite_path

try:  # POSIX only: the same writers' lock file as db.engine.write_connection
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

SQLITE_MAGIC = b"SQLite format 3\x00"
DATA_TABLES = ("works", "users", "campaigns", "labels")


def libpq_url(url: str) -> str:
    """The libpq form of a SQLAlchemy PostgreSQL URL (no `+driver`), without its password."""
    p = make_url(url)
    bare = URL.create(p.get_backend_name(), p.username, None, p.host, p.port, p.database, p.query)
    return bare.render_as_string(hide_password=False)


def pg_dump_hint(url: str) -> str:
    """How to back up and restore this PostgreSQL database with the PostgreSQL tools."""
    target = libpq_url(url)
    password = "; give the password in PGPASSWORD or ~/.pgpass" if make_url(url).password else ""
    return (
        "this database is PostgreSQL: back it up with "
        f'`pg_dump --format=custom --file=labeling.dump "{target}"` and restore with '
        f'`pg_restore --clean --if-exists --no-owner --dbname="{target}" labeling.dump`'
        f"{password} (see docs/backup.md)"
    )


class BackupError(Exception):
    """A backup or restore that cannot be done; the message says why.

    Not a labeling.errors class (db never imports labeling): the CLI counts it as bad input.
    """


@dataclass
class BackupResult:
    """What a backup or restore copied."""

    source: str
    target: str
    pages: int
    revision: str | None
    counts: dict[str, int]


def sqlite_path(url: str) -> Path:
    """The file of a SQLite URL.

    Args:
        url: a database URL.

    Raises:
        BackupError: the URL is not a SQLite file (PostgreSQL, or in memory).
    """
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        raise BackupError(pg_dump_hint(url))
    if not is_sqlite_path(parsed.database):
        raise BackupError(f"cannot back up or restore the SQLite database {parsed.database!r}")
    return Path(parsed.database)


@contextmanager
def _writers_lock(db: Path) -> Iterator[None]:
    """Hold the app's SQLite writers' lock (`<db>-writelock`) so writers queue meanwhile."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    fd = os.open(f"{db}-writelock", os.O_RDWR | os.O_CREAT, 0o664)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _connect_ro(path: Path, timeout: float) -> sqlite3.Connection:
    """A read-only connection to an existing SQLite file."""
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=timeout)


def _tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {r[0] for r in rows}


def _summary(conn: sqlite3.Connection) -> tuple[str | None, dict[str, int]]:
    """The alembic revision and the row counts of the main tables."""
    tables = _tables(conn)
    revision = None
    if "alembic_version" in tables:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        revision = row[0] if row else None
    counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # noqa: S608
              for t in DATA_TABLES if t in tables}  # fmt: skip
    return revision, counts


def check_backup_file(path: str | Path, *, timeout: float = 30.0) -> tuple[str, dict[str, int]]:
    """Check that a file is an intact SQLite database of this tool; return (revision, counts).

    Args:
        path: the backup file.
        timeout: seconds to wait for a lock.

    Raises:
        BackupError: not a file, not SQLite, damaged, or without our alembic_version table.
    """
    path = Path(path)
    if not path.is_file():
        raise BackupError(f"{path}: no such file")
    with path.open("rb") as fh:
        if fh.read(16) != SQLITE_MAGIC:
            raise BackupError(f"{path}: not a SQLite database")
    conn = _connect_ro(path, timeout)
    try:
        ok = conn.execute("PRAGMA quick_check").fetchone()[0]
        if ok != "ok":
            raise BackupError(f"{path}: the database is damaged ({ok})")
        revision, counts = _summary(conn)
    except sqlite3.DatabaseError as exc:
        raise BackupError(f"{path}: cannot read the database ({exc})") from exc
    finally:
        conn.close()
    if revision is None:
        raise BackupError(f"{path}: not a labeling database (no alembic_version revision)")
    return revision, counts


def backup_sqlite(
    url: str, dest: str | Path, *, force: bool = False, timeout: float = 30.0
) -> BackupResult:
    """Copy a live SQLite database to `dest` with SQLite's online backup API.

    The copy is taken in one step under a read transaction, so it is a consistent snapshot
    even while the app writes (WAL readers do not block writers). It is written to a
    temporary file next to `dest`, switched to rollback-journal mode so it is one
    self-contained file, checked, and only then renamed into place.

    Args:
        url: the SQLite database URL to back up.
        dest: the backup file to write.
        force: overwrite `dest` if it exists.
        timeout: seconds to wait for a lock.

    Raises:
        BackupError: PostgreSQL or in-memory URL, missing source, existing dest without
            force, or a failed copy.
    """
    src_path = sqlite_path(url)
    dest = Path(dest)
    if not src_path.is_file():
        raise BackupError(f"{src_path}: the database does not exist")
    if dest.exists() and not force:
        raise BackupError(f"{dest} exists; use --force to overwrite it")
    if dest.exists() and dest.is_dir():
        raise BackupError(f"{dest} is a directory")
    if dest.resolve() == src_path.resolve():
        raise BackupError("the backup cannot be the database itself")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    # Not read-only: a reader of a WAL database may need to create the -shm file.
    src = sqlite3.connect(str(src_path), timeout=timeout)
    try:
        dst = sqlite3.connect(str(tmp))
        try:
            src.backup(dst, pages=-1)  # one step: a single consistent snapshot
            dst.execute("PRAGMA journal_mode=DELETE")
            ok = dst.execute("PRAGMA integrity_check").fetchone()[0]
            if ok != "ok":
                raise BackupError(f"the copy failed its integrity check: {ok}")
            revision, counts = _summary(dst)
            pages = dst.execute("PRAGMA page_count").fetchone()[0]
        finally:
            dst.close()
        os.replace(tmp, dest)
    except sqlite3.Error as exc:
        raise BackupError(f"backup failed: {exc}") from exc
    finally:
        src.close()
        for leftover in (tmp, Path(f"{tmp}-journal")):
            leftover.unlink(missing_ok=True)
    return BackupResult(str(src_path), str(dest), pages, revision, counts)


def target_has_data(path: Path, *, timeout: float = 30.0) -> bool:
    """True when a SQLite file holds any works, users, campaigns or labels."""
    if not path.is_file() or path.stat().st_size == 0:
        return False
    conn = sqlite3.connect(str(path), timeout=timeout)
    try:
        _, counts = _summary(conn)
    except sqlite3.DatabaseError as exc:
        raise BackupError(f"{path}: cannot read the current database ({exc})") from exc
    finally:
        conn.close()
    return any(counts.values())


def restore_sqlite(
    src: str | Path, url: str, *, force: bool = False, timeout: float = 30.0
) -> BackupResult:
    """Bring a backup back into the SQLite database of `url` with the online backup API.

    The restore holds the app's writers' lock and writes the whole database in one SQLite
    transaction: other connections see either the old or the restored database. Run
    migrations afterwards (the CLI does) if the backup is from an older version.

    Args:
        src: the backup file (checked with check_backup_file).
        url: the SQLite database URL to restore into.
        force: replace a database that already holds data.
        timeout: seconds to wait for a lock.

    Raises:
        BackupError: PostgreSQL URL, bad backup file, or a target with data without force.
    """
    target = sqlite_path(url)
    src = Path(src)
    revision, counts = check_backup_file(src, timeout=timeout)
    if src.resolve() == target.resolve():
        raise BackupError("the backup file is the database itself")
    if target_has_data(target, timeout=timeout) and not force:
        raise BackupError(f"{target} already holds data; use --force to replace it")
    target.parent.mkdir(parents=True, exist_ok=True)
    source = _connect_ro(src, timeout)
    converted: Path | None = None
    try:
        with _writers_lock(target):
            dst = sqlite3.connect(str(target), timeout=timeout)
            try:
                converted = _page_size_for(source, dst, target)
                if converted is not None:  # a copy of the backup with the target's page size
                    source.close()
                    source = _connect_ro(converted, timeout)
                source.backup(dst, pages=-1)
                dst.execute("PRAGMA journal_mode=WAL")
                pages = dst.execute("PRAGMA page_count").fetchone()[0]
            finally:
                dst.close()
    except sqlite3.Error as exc:
        raise BackupError(f"restore failed: {exc}") from exc
    finally:
        source.close()
        if converted is not None:
            converted.unlink(missing_ok=True)
    return BackupResult(str(src), str(target), pages, revision, counts)


def _page_size_for(
    source: sqlite3.Connection, dst: sqlite3.Connection, target: Path
) -> Path | None:
    """A copy of the backup rebuilt with the target's page size, when the target needs one.

    The backup API cannot write into a WAL database of another page size (new files have
    16 KB pages since issue 16, older ones 4 KB), so the backup is first copied to a
    temporary file next to the target and vacuumed to the target's page size.
    """
    size = dst.execute("PRAGMA page_size").fetchone()[0]
    wal = dst.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    if not wal or source.execute("PRAGMA page_size").fetchone()[0] == size:
        return None
    tmp = target.with_name(f".{target.name}.{os.getpid()}.restore")
    tmp.unlink(missing_ok=True)
    conn = sqlite3.connect(str(tmp))
    try:
        source.backup(conn, pages=-1)
        conn.execute("PRAGMA journal_mode=DELETE")  # a page size cannot change in WAL mode
        conn.execute(f"PRAGMA page_size={int(size)}")
        conn.execute("VACUUM")
    finally:
        conn.close()
    return tmp
