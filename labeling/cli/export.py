"""The `labeling export` command: a gold set as CSV, JSON Lines or Parquet with a manifest."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import click

from labeling.cli.context import Context
from labeling.cli.errors import EXIT_FAILED, fail
from labeling.cli.ranges import PROCESSES
from labeling.errors import InputError, NotFound


def register(main: click.Group) -> None:
    """Attach the export command to the main group."""
    main.add_command(export)


@click.command()
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["csv", "jsonl", "parquet"]),
    required=True,
    help="File format.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Data file; the manifest goes to PATH.manifest.json.",
)
@click.option(
    "--status",
    type=click.Choice(["validated", "labelled", "all"]),
    default="validated",
    show_default=True,
    help="validated works, works with at least one label, or every work.",
)
@click.option("--campaign", help="Only this campaign's works and labels (name or id).")
@click.option("--questions", help="Comma-separated schema questions (default: all).")
@click.option(
    "--since",
    type=click.DateTime(["%Y-%m-%d"]),
    help="Works with a label made on or after this day (UTC, YYYY-MM-DD).",
)
@click.option(
    "--until",
    type=click.DateTime(["%Y-%m-%d"]),
    help="Works with a label made on or before this day (UTC, YYYY-MM-DD).",
)
@click.option(
    "--long",
    "long_",
    is_flag=True,
    help="Also write every current label (one row per question) to PATH.labels.EXT.",
)
@click.option(
    "--pseudonymize", is_flag=True, help="Replace annotator and lead names by stable pseudonyms."
)
@click.option("--user", "user_name", help="Record this user as the exporter.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--processes",
    type=PROCESSES,
    help="Worker processes for a large export (default: LABELING_EXPORT_PROCESSES, "
    "else 2; 1 = none, less memory).",
)
@click.pass_obj
def export(obj: Context, fmt: str, out: Path, status: str, campaign: str | None,
           questions: str | None, since: datetime | None, until: datetime | None, long_: bool,
           pseudonymize: bool, user_name: str | None, as_json: bool,
           processes: int | None) -> None:  # fmt: skip
    """Export a gold set (one row per work) with its manifest; deterministic for a DB state."""
    from sqlalchemy import select

    from db.models import User
    from labeling.export.gold_set import ExportFilters, plan_export, write_gold

    names = tuple(q.strip() for q in questions.split(",") if q.strip()) if questions else None
    if questions is not None and not names:
        raise InputError("--questions is empty: give comma-separated question names")
    filters = ExportFilters(
        status=status, campaign=campaign, questions=names,
        since=since.date() if since else None, until=until.date() if until else None,
    )  # fmt: skip
    schema = obj.schema()
    engine = obj.engine
    if campaign is not None:
        from labeling.review.campaigns import get_campaign

        get_campaign(engine, campaign)  # an unknown name: exit 2, naming the closest one
    user_id = None
    if user_name:
        with engine.connect() as conn:
            user_id = conn.execute(select(User.id).where(User.name == user_name)).scalar()
        if user_id is None:
            raise NotFound(f"no user named {user_name!r}")
    plan = plan_export(engine, schema, fmt=fmt, filters=filters, long=long_,
                       pseudonymize=pseudonymize,
                       processes=processes or obj.settings.export_processes)  # fmt: skip
    try:
        result = write_gold(engine, plan, out, user_id=user_id)
    except OSError as exc:  # ExportError (exit 2), WorkerError (1): cli/errors.py
        # The file that failed (say, the labels file), named by write_gold; else --out.
        fail(f"cannot write {exc.filename or out}: {exc.strerror or exc}", EXIT_FAILED)
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2, ensure_ascii=False))
        return
    counts = ", ".join(f"{k}: {v}" for k, v in result.counts.items()) or "no works"
    click.echo(f"wrote {result.row_count} rows to {result.path} ({counts})")
    if result.long_path:
        click.echo(f"wrote {result.long_rows} label rows to {result.long_path}")
    click.echo(f"manifest {result.manifest_path}  sha256 {result.sha256}")
