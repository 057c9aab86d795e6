"""CLI commands of the trust issue: `labeling backup` and `labeling restore`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

EXIT_BAD_INPUT = 2


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def register(main: click.Group) -> None:
    """Attach the commands of this module to the main group."""
    main.add_command(backup)
    main.add_command(restore)


def _timeout(obj: Any) -> float:
    return getattr(obj.settings, "sqlite_busy_timeout_ms", 30_000) / 1000


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {t}" for t, n in counts.items())


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Overwrite PATH if it exists.")
@click.pass_obj
def backup(obj: Any, path: Path, force: bool) -> None:
    """Copy the live SQLite database to PATH (online backup; PostgreSQL: use pg_dump)."""
    from db.backup import BackupError, backup_sqlite

    try:
        res = backup_sqlite(obj.settings.database_url, path, force=force, timeout=_timeout(obj))
    except BackupError as exc:
        _fail(str(exc))
    click.echo(f"backed up {res.source} to {res.target}: {res.pages} pages, revision "
               f"{res.revision}, {_counts(res.counts)}")  # fmt: skip


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Replace a database that already holds data.")
@click.pass_obj
def restore(obj: Any, path: Path, force: bool) -> None:
    """Restore the SQLite database from a backup made by `labeling backup`."""
    from db.backup import BackupError, restore_sqlite

    try:
        res = restore_sqlite(path, obj.settings.database_url, force=force, timeout=_timeout(obj))
    except BackupError as exc:
        _fail(str(exc))
    from db.engine import current_revision

    engine = obj.engine  # migrates a backup from an older version and rebuilds indexes
    click.echo(f"restored {res.source} into {res.target}: revision {res.revision} -> "
               f"{current_revision(engine)}, {_counts(res.counts)}")  # fmt: skip
