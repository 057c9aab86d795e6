"""An export's files (data, labels, manifest) put in place all together or not at all.

Each file is written to a temporary beside its target, named `.labeling-export-PID-TOKEN.new.
NAME`. Once all are complete, they are synced, the previous files are kept as backups
(`...old.NAME`, a hard link; `...none.NAME`, an empty marker, where there was none), and the
targets are replaced in order, manifest last. A failure at any step (or of the caller's step
after it, such as recording the export) puts the previous files back and removes every
temporary, so the folder holds the old set or the new one, never a mix. Three renames cannot
be one system call: a process killed between them leaves its backups, and the next export in
that folder (remove_stale) restores the old set from them, as the names alone say what is
left to undo. Errors name the target whose file failed, not its temporary.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import secrets
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

from db.sqlite_files import SIDE_SUFFIXES, is_sqlite_path
from db.staging import process_alive
from labeling.export.definitions import ExportError

try:
    import fcntl
except ImportError:  # not on Windows: exports to one folder are then not serialised
    fcntl = None  # type: ignore[assignment]

__all__ = ["PREFIX", "FileSet", "open_temporary", "refuse_database", "remove_stale"]

log = logging.getLogger(__name__)
PREFIX = ".labeling-export-"
_NAME = re.compile(rf"^{re.escape(PREFIX)}(\d+)-([0-9a-f]+)\.(new|old|none)\.(.+)$")
# Beside a SQLite file: its side files, and the lock file that queues the app's writers
# (db/engine.py); replacing that one would let two writers in at once.
_DATABASE_FILES = {"": "the database file", **{s: f"the database's {s} file"
                   for s in (*SIDE_SUFFIXES, "-writelock")}}  # fmt: skip


def open_temporary(path: Path) -> IO[bytes]:
    """Create a temporary for writing (exclusively: never another export's file)."""
    return path.open("xb")


def refuse_database(database: str | None, targets: Sequence[Path]) -> None:
    """ExportError when a target is the SQLite database file `database` or one of its side
    files (by real path, or the same file through a hard link); None: not a SQLite file."""
    if not is_sqlite_path(database):
        return
    # SQLite puts its side files beside the real file; the name given counts too.
    files = [(candidate, what) for suffix, what in _DATABASE_FILES.items()
             for candidate in dict.fromkeys((database + suffix,
                                             os.path.realpath(database) + suffix))]  # fmt: skip
    for target in targets:
        real, exists = os.path.realpath(target), os.path.exists(target)
        for candidate, what in files:
            same = real == os.path.realpath(candidate)
            if not same and exists and os.path.exists(candidate):
                same = os.path.samefile(target, candidate)  # a hard link
            if same:
                raise ExportError(f"refusing to write {target}: it is {what} ({candidate})")


def _renamed(exc: OSError, target: Path) -> OSError:
    """The same error naming `target` (a write error names no file, pyarrow's none either)."""
    return OSError(exc.errno, exc.strerror or str(exc), str(target))


@contextmanager
def naming(target: Path) -> Iterator[None]:
    """Re-raise an OSError inside as one that names `target`."""
    try:
        yield
    except OSError as exc:
        if exc.filename == str(target):
            raise
        raise _renamed(exc, target) from exc


@contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on the folder itself (no lock file to leave behind), so that
    exports replacing files there, and their clean-up, take turns."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # drops the lock


def _sync_folder(folder: Path) -> None:
    """Make the renames in `folder` durable (not every system can sync a directory)."""
    with suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class FileSet:
    """The files of one export in one folder, staged as temporaries and put in place together.

    Removes the leftovers of killed exports in the folder when created (remove_stale).
    """

    def __init__(self, folder: Path, targets: Sequence[Path] = ()) -> None:
        """Stage into `folder` (created if missing); `targets`: the files the set will hold
        (their temporaries of older versions are removed too when their process is gone)."""
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.group = f"{os.getpid()}-{secrets.token_hex(4)}"
        self.targets: dict[Path, Path] = {}  # target -> its temporary, in replacing order
        remove_stale(folder, targets)

    def temporary(self, target: Path) -> Path:
        """The temporary of `target` (the order of these calls is the order of replacing)."""
        if target.parent.resolve() != self.folder.resolve():
            raise ValueError(f"{target} is not in {self.folder}")
        self.targets[target] = self._path("new", target)
        return self.targets[target]

    def open(self, target: Path) -> IO[bytes]:
        """The temporary of `target` (see temporary), created and open for writing."""
        tmp = self.targets.get(target) or self.temporary(target)
        with naming(target):
            return open_temporary(tmp)

    def write_bytes(self, target: Path, data: bytes) -> None:
        """Stage `data` as the whole new content of `target`."""
        with naming(target), self.open(target) as fh:
            fh.write(data)

    def _path(self, role: str, target: Path) -> Path:
        return self.folder / f"{PREFIX}{self.group}.{role}.{target.name}"

    @contextmanager
    def replacing(self) -> Iterator[None]:
        """Put every staged file in place, run the body (say, recording the export), and keep
        the new files only if it succeeds: on any failure the previous ones are put back."""
        with _folder_lock(self.folder):
            try:
                for target, tmp in self.targets.items():
                    with naming(target):
                        fd = os.open(tmp, os.O_RDONLY)
                        try:
                            os.fsync(fd)  # the content is on disk before a name points at it
                        finally:
                            os.close(fd)
                        self._back_up(target)
                _sync_folder(self.folder)
                for target, tmp in self.targets.items():
                    with naming(target):
                        os.replace(tmp, target)
                yield
                _sync_folder(self.folder)
            except BaseException:
                try:
                    _undo(self.folder, self.group, undo=True)
                except OSError as exc:  # the backups stay: the next export restores them
                    log.error("could not put back the previous files in %s: %s", self.folder, exc)
                raise
            _undo(self.folder, self.group, undo=False)

    def _back_up(self, target: Path) -> None:
        """Keep the previous file of `target` (a hard link, else a copy), or mark its absence."""
        if not os.path.lexists(target):
            self._path("none", target).touch(exist_ok=False)
            return
        old = self._path("old", target)
        try:
            os.link(target, old, follow_symlinks=False)
        except OSError as exc:  # a file system without hard links: a copy
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                raise
            shutil.copy2(target, old, follow_symlinks=False)

    def discard(self) -> None:
        """Remove every temporary of this set after a failure (the previous files stay)."""
        try:
            _undo(self.folder, self.group, undo=True)
        except OSError as exc:  # already failing: that error is the one to report
            log.error("could not remove the temporaries in %s: %s", self.folder, exc)


def _undo(folder: Path, group: str, *, undo: bool) -> None:
    """End a set's replacing: with `undo`, put the previous files back (a target without
    one, already replaced, is removed); then remove every file of the set's group."""
    mine = [e for e in os.scandir(folder) if (m := _NAME.match(e.name)) and
            f"{m[1]}-{m[2]}" == group]  # fmt: skip
    roles = {(m[3], m[4]) for e in mine if (m := _NAME.match(e.name))}
    if undo and any(role != "new" for role, _ in roles):  # the replacing had begun
        for role, name in sorted(roles):
            target, staged = folder / name, ("new", name) in roles
            if role == "old":
                os.replace(folder / f"{PREFIX}{group}.old.{name}", target)
            elif role == "none" and not staged:  # ours, and no previous file
                with suppress(FileNotFoundError):
                    os.unlink(target)
        _sync_folder(folder)  # the previous files are back before their backups go
    for entry in mine:
        with suppress(FileNotFoundError):
            os.unlink(entry.path)


def remove_stale(folder: Path, targets: Sequence[Path] = ()) -> list[str]:
    """Settle the exports in `folder` whose process is gone (killed): a set caught between
    replacing its files gets its previous files back (or keeps the new ones when all were
    replaced), and their temporaries go; returns the groups settled.

    targets: files whose temporaries of older versions (`.NAME.tmp-PID`) go too.
    """
    settled = []
    legacy = re.compile(r"^\.(.+)\.tmp-(\d+)$")
    names = {t.name for t in targets}
    with _folder_lock(folder):
        groups: dict[str, set[str]] = {}
        for entry in os.scandir(folder):
            if (m := _NAME.match(entry.name)) and not process_alive(int(m[1])):
                groups.setdefault(f"{m[1]}-{m[2]}", set()).add(m[3])
            elif (m := legacy.match(entry.name)) and m[1] in names and not process_alive(int(m[2])):
                with suppress(FileNotFoundError):
                    os.unlink(entry.path)
        for group, roles in groups.items():
            # Files still staged: the replacing did not finish, so the old set is restored.
            _undo(folder, group, undo="new" in roles)
            settled.append(group)
    return settled
