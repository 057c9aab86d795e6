"""Rows staged by worker processes in SQLite files of their own, copied in by INSERT ... SELECT.

A frame import's workers build each new works row. Sent back pickled, the importing process
unpickled every value and bound it again for its `executemany`: 18.7 us a row, in the one
process every row goes through. Staged, a worker writes its rows into a small SQLite file
of its own, in parallel, and the importing process attaches the file and copies the rows
into works in C, one `INSERT ... SELECT` per run of them: 10.4 us a row, with the unpickling
of what is left of each line (bench/RESULTS.md, issue 16, nineteenth pass).

The files: one per (group, worker slot), `<group>-<slot>.db` in the import's own temporary
directory. A group is a run of consecutive chunks of the frame (about a batch of lines).
The importing process reads a group's files only once every chunk of the group has come
back, so that no worker writes to a file being read: SQLite keeps a file read in a
transaction locked till the transaction ends, and a writer would wait on it. Once a
transaction has committed, the files of the groups before its last one are deleted. A
worker claims a slot as it starts. A staged row is named by one integer (stage_ref): its
group, slot and rowid.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TABLE = "stage"
SLOT_BITS = 6
ROWID_BITS = 34
MAX_SLOTS = 1 << SLOT_BITS
# SQLite attaches at most 10 files to a connection (SQLITE_MAX_ATTACHED, the usual build's
# bound). A transaction reads a file per worker for each group its rows are in, and a batch
# of lines usually spans two groups: with more workers than this, the rows are not staged.
MAX_ATTACHED = 10
MAX_STAGING_WORKERS = MAX_ATTACHED // 2
# The importing process reads a group's files through a memory map, not a read() a page.
_MMAP_BYTES = 1 << 30
_GROUP_FILE = re.compile(r"^(\d+)-(\d+)\.db$")
DIR_PREFIX = "labeling-import-"
_WHERE_TEMPORARY = "the import's temporary files go to TMPDIR"
_DIR = re.compile(rf"^{DIR_PREFIX}(\d+)-")
_PREFIX = "stage_"


Names = dict[tuple[int, int], str]  # (group, slot) -> the attached file's schema name


class StagingError(RuntimeError):
    """Staged rows could not be written or read (say, the disk is full, or the files went)."""


def make_stage_dir(parent: str | None = None) -> str:
    """A new staging directory (in `parent`, default the system's temporary directory) named
    after this process, after removing those of imports whose process is gone (killed)."""
    parent = parent or tempfile.gettempdir()
    remove_stale(parent)
    return tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-", dir=parent)


def remove_stale(parent: str) -> list[str]:
    """Delete the staging directories in `parent` whose import's process is gone; their paths.

    A killed import (SIGKILL, a crash) leaves its directory behind, up to a few hundred MB.
    """
    removed = []
    for entry in os.scandir(parent):
        match = _DIR.match(entry.name)
        if match and entry.is_dir(follow_symlinks=False) and not process_alive(int(match[1])):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
    return removed


def process_alive(pid: int) -> bool:
    """Whether a process with this id exists (one of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stage_ref(group: int, slot: int, rowid: int) -> int:
    """The one integer that names a staged row."""
    return (group << (ROWID_BITS + SLOT_BITS)) | (rowid << SLOT_BITS) | slot


def ref_group(ref: int) -> int:
    """The group of a staged row."""
    return ref >> (ROWID_BITS + SLOT_BITS)


def _split(ref: int) -> tuple[int, int, int]:
    """(group, slot, rowid) of a staged row."""
    return ref_group(ref), ref & (MAX_SLOTS - 1), (ref >> SLOT_BITS) & ((1 << ROWID_BITS) - 1)


def _file(directory: str | Path, group: int, slot: int) -> Path:
    return Path(directory) / f"{group}-{slot}.db"


def _columns(keys: Sequence[str]) -> str:
    return ", ".join(f'"{k}"' for k in keys)


class StageWriter:
    """A worker's side: writes rows into its slot's file of a group and names them."""

    def __init__(self, directory: str | Path, keys: Sequence[str]) -> None:
        """directory: the import's staging directory; keys: the rows' columns, in order."""
        self.directory, self.keys = Path(directory), tuple(keys)
        # Claimed at the first put: a failure then is the chunk's, with its message (in a
        # pool's initializer it would only break the pool).
        self.slot = -1
        self._group = -1
        self._conn: sqlite3.Connection | None = None
        cols = _columns(self.keys)
        self._insert = f"INSERT INTO {TABLE} ({cols}) VALUES ({', '.join('?' * len(keys))})"
        self._create = f"CREATE TABLE {TABLE} (rid INTEGER PRIMARY KEY, {cols})"

    def _claim(self) -> int:
        """The first slot no other worker of this import took (a marker file each)."""
        for slot in range(MAX_SLOTS):
            try:
                os.close(os.open(self.directory / f"slot-{slot}", os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                continue
            except OSError as exc:
                raise StagingError(f"{self.directory}: cannot stage rows ({exc})") from exc
            return slot
        raise StagingError(f"{self.directory}: no staging slot left ({MAX_SLOTS} taken)")

    def put(self, group: int, rows: Sequence[Any]) -> list[int]:
        """Write rows (tuples in `keys` order) into this group's file; their refs, in order."""
        try:
            return self._put(group, rows)
        except sqlite3.Error as exc:
            where = _file(self.directory, group, self.slot)
            raise StagingError(f"{where}: cannot stage rows ({exc}); {_WHERE_TEMPORARY}") from exc

    def _put(self, group: int, rows: Sequence[Any]) -> list[int]:
        if self.slot < 0:
            self.slot = self._claim()
        if group != self._group:
            self.close()  # the group before is whole: the importing process reads it next
            conn = sqlite3.connect(_file(self.directory, group, self.slot), isolation_level=None)
            # Read once and thrown away: no journal, no sync. Large pages: fewer writes.
            for pragma in ("page_size=65536", "journal_mode=OFF", "synchronous=OFF"):
                conn.execute(f"PRAGMA {pragma}")
            conn.execute(self._create)
            self._conn, self._group = conn, group
        assert self._conn is not None
        conn = self._conn
        if not rows:
            return []
        conn.execute("BEGIN")
        try:
            conn.executemany(self._insert, rows)
            (last,) = conn.execute(f"SELECT max(rid) FROM {TABLE}").fetchone()
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        # One writer, appending: the rows took the rowids up to the largest, in order.
        return [stage_ref(group, self.slot, r) for r in range(last - len(rows) + 1, last + 1)]

    def close(self) -> None:
        """Close the current group's file (the importing process reads it, then deletes it)."""
        if self._conn is not None:
            self._conn.close()
            self._conn, self._group = None, -1


def attach_files(dbapi_conn: Any, directory: str | Path, refs: Sequence[int]) -> Names:
    """Attach the files the refs are in, unless attached: (group, slot) -> schema name.

    A bulk write_connection detaches them once its transaction has ended (detach_all):
    SQLite refuses to detach a file read in the open transaction.
    """
    attached = {name for _, name, _ in dbapi_conn.execute("PRAGMA database_list")}
    names: Names = {}
    for ref in refs:
        group, slot, _ = _split(ref)
        if (group, slot) in names:
            continue
        names[group, slot] = name = f"{_PREFIX}{group}_{slot}"
        if name not in attached:
            where = _file(directory, group, slot)
            try:
                dbapi_conn.execute(f"ATTACH DATABASE ? AS {name}", (str(where),))
            except sqlite3.Error as exc:  # the file is gone: not the database's fault
                reason = f"cannot read the rows the workers staged there ({exc})"
                raise StagingError(f"{where}: {reason}; {_WHERE_TEMPORARY}") from exc
            dbapi_conn.execute(f"PRAGMA {name}.mmap_size={_MMAP_BYTES}")
    return names


def detach_all(dbapi_conn: Any) -> None:
    """Detach every staging file from a SQLite connection (outside a transaction)."""
    for _, name, _ in dbapi_conn.execute("PRAGMA database_list").fetchall():
        if name.startswith(_PREFIX):
            dbapi_conn.execute(f"DETACH DATABASE {name}")


def runs(refs: Sequence[int]) -> list[tuple[tuple[int, int], int, int]]:
    """The refs, in their order, as runs of consecutive rows of one file:
    ((group, slot), first rowid, last rowid)."""
    out: list[tuple[tuple[int, int], int, int]] = []
    for ref in refs:
        group, slot, rowid = _split(ref)
        if out and out[-1][0] == (group, slot) and out[-1][2] == rowid - 1:
            out[-1] = (out[-1][0], out[-1][1], rowid)
        else:
            out.append(((group, slot), rowid, rowid))
    return out


def insert_staged(dbapi_conn: Any, table: str, keys: Sequence[str], names: Names,
                  refs: Sequence[int], tail: str = "") -> int:  # fmt: skip
    """INSERT INTO table the staged rows, in the refs' order (each statement ends with
    `tail`, say an ON CONFLICT clause); the number of rows inserted."""
    cols = _columns(keys)
    total = 0
    for file, first, last in runs(refs):
        cur = dbapi_conn.execute(
            f'INSERT INTO "{table}" ({cols}) SELECT {cols} FROM {names[file]}.{TABLE} '
            f"WHERE rid BETWEEN ? AND ?{tail}", (first, last))  # fmt: skip
        total += cur.rowcount
    return total


def fetch_staged(dbapi_conn: Any, keys: Sequence[str], names: Names,
                 refs: Sequence[int]) -> list[tuple[Any, ...]]:  # fmt: skip
    """The staged rows themselves (tuples in `keys` order), in the refs' order."""
    cols = _columns(keys)
    out: list[tuple[Any, ...]] = []
    for file, first, last in runs(refs):
        out += dbapi_conn.execute(
            f"SELECT {cols} FROM {names[file]}.{TABLE} WHERE rid BETWEEN ? AND ? ORDER BY rid",
            (first, last)).fetchall()  # fmt: skip
    if len(out) != len(refs):  # a file lost rows: never write a row that is not the line's
        raise StagingError(f"{len(refs)} staged rows asked for, {len(out)} found")
    return out


def drop_groups(directory: str | Path, before: int) -> None:
    """Delete the files of the groups before `before` (their rows are written into works)."""
    for name in os.listdir(directory):
        match = _GROUP_FILE.match(name)
        if match and int(match[1]) < before:
            (Path(directory) / name).unlink(missing_ok=True)
