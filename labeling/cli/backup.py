"""Backup commands: `labeling backup` and `labeling restore` (SQLite; PostgreSQL: pg_dump)."""

from __future__ import annotations

from pathlib import Path

import click

from labeling.cli.context import Context
from labeling.reports.text import wrap_clauses


def register(main: click.Group) -> None:
    """Attach the commands of this module to the main group."""
    main.add_command(backup)
    main.add_command(restore)


def _timeout(obj: Context) -> float:
    """SQLite's busy timeout in seconds (the settings hold milliseconds)."""
    return getattr(obj.settings, "sqlite_busy_timeout_ms", 30_000) / 1000


def _counts(counts: dict[str, int]) -> str:
    """Row counts per table, e.g. "3 works, 1 users"."""
    return ", ".join(f"{n} {t}" for t, n in counts.items())


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Overwrite PATH if it exists.")
@click.pass_obj
def backup(obj: Context, path: Path, force: bool) -> None:
    """Copy the live SQLite database to PATH (online backup; PostgreSQL: use pg_dump)."""
    from db.backup import backup_sqlite

    # A BackupError (a path or database that cannot be used) exits 2: cli/errors.py.
    res = backup_sqlite(obj.settings.database_url, path, force=force, timeout=_timeout(obj))
    done = (
        f"backed up {res.source} to {res.target}: {res.pages} pages, revision "
        f"{res.revision}, {_counts(res.counts)}"
    )
    click.echo("\n".join(wrap_clauses(done)))


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Replace a database that already holds data.")
@click.pass_obj
def restore(obj: Context, path: Path, force: bool) -> None:
    """Restore the SQLite database from a backup made by `labeling backup`."""
    from db.backup import restore_sqlite

    res = restore_sqlite(path, obj.settings.database_url, force=force, timeout=_timeout(obj))
    from db.engine import current_revision

    engine = obj.engine  # migrates a backup from an older version and rebuilds indexes
    done = (
        f"restored {res.source} into {res.target}: revision {res.revision} -> "
        f"{current_revision(engine)}, {_counts(res.counts)}"
    )
    click.echo("\n".join(wrap_clauses(done)))
