"""The `labeling` command: the click group, `init`, and every command group registered.

One module per command group, named by the group: frames (import-frame, demo, synth), labels
(import-labels), users, sso, campaigns, abstracts, stats (agreement, estimates, machines),
export, backup (backup, restore). Errors are mapped to exit codes in errors.py.
"""

from __future__ import annotations

import click

from labeling.cli import (
    abstracts,
    aggregate,
    backup,
    campaigns,
    export,
    frames,
    history,
    labels,
    sso,
    stats,
    users,
)
from labeling.cli.context import Context
from labeling.cli.errors import LabelingGroup


@click.group(cls=LabelingGroup)
@click.option("--db", "db_url", envvar=None, help="Database URL (default: LABELING_DB_URL).")
@click.option("--schema", "schema_path", help="Schema file (default: LABELING_SCHEMA).")
@click.version_option(package_name="labeling")
@click.pass_context
def main(ctx: click.Context, db_url: str | None, schema_path: str | None) -> None:
    """Human validation of machine-classified scholarly works."""
    ctx.obj = Context(db_url, schema_path)


@main.command()
@click.pass_obj
def init(obj: Context) -> None:
    """Create or upgrade the database (Alembic migrations to head)."""
    from db.engine import current_revision

    engine = obj.engine
    url = engine.url.render_as_string(hide_password=True)
    click.echo(f"database {url} at revision {current_revision(engine)}")


for _group in (
    frames,
    labels,
    users,
    campaigns,
    abstracts,
    stats,
    aggregate,
    export,
    backup,
    sso,
    history,
):
    _group.register(main)
