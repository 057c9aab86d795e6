"""The `labeling` command: a thin click group over the labeling package."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from labeling.settings import Settings, get_settings

EXIT_BAD_INPUT = 2
EXIT_REJECTED = 3


class Context:
    """What every command needs: settings, an engine (migrated on demand), the schema."""

    def __init__(self, db_url: str | None, schema_path: str | None) -> None:
        settings = get_settings()
        updates: dict[str, Any] = {}
        if db_url:
            updates["db_url"] = db_url
        if schema_path:
            updates["schema_path"] = Path(schema_path)
        self.settings: Settings = settings.model_copy(update=updates) if updates else settings
        self._engine = None

    @property
    def engine(self) -> Any:
        """The database engine, migrated to the latest revision on first use."""
        if self._engine is None:
            from labeling.database import init_db

            self._engine = init_db(self.settings.database_url, settings=self.settings)
        return self._engine

    def schema(self, path: str | None = None) -> Any:
        """The label schema (exit 2 with the loader's message when it is malformed)."""
        from labeling.schema import SchemaError, load_schema

        try:
            return load_schema(path or self.settings.schema_path)
        except SchemaError as exc:
            fail(str(exc), EXIT_BAD_INPUT)


def fail(message: str, code: int = 1) -> None:
    """Print an error to stderr and exit with `code`."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False, default=str))


@click.group()
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


@main.command("import-frame")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--schema", "schema_path", help="Schema file to check the frame against.")
@click.option("--strict", is_flag=True, help="Abort on the first bad line; write nothing.")
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write every rejected line and warning to this JSON Lines file.")
@click.option("--batch-size", type=click.IntRange(1), default=None,
              help="Records per transaction (default: LABELING_IMPORT_BATCH_SIZE).")
@click.option("--workers", type=click.IntRange(0), default=None,
              help="Parsing processes (default: 2 for large files).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.pass_obj
def import_frame_cmd(obj: Context, path: Path, schema_path: str | None, strict: bool,
                     report_path: Path | None, batch_size: int | None, workers: int | None,
                     as_json: bool) -> None:  # fmt: skip
    """Import a frame (JSON Lines, plain or .gz): exit 0 all imported, 3 lines rejected.

    Exit 2: the file or schema cannot be read, or the import failed part-way (what it stored
    stays; the message says how far it got; re-running the repaired file continues).
    """
    from labeling.frames.import_runs import describe_error
    from labeling.frames.importer import FrameReadError, ImportFailed, import_frame

    schema = obj.schema(schema_path)
    failure = None
    try:
        summary = import_frame(
            obj.engine, path, schema, strict=strict, report_path=report_path,
            batch_size=batch_size or obj.settings.import_batch_size, workers=workers,
        )  # fmt: skip
    except ImportFailed as exc:
        summary, failure = exc.summary, str(exc)
    except FrameReadError as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    except Exception as exc:  # before the run started: the database, the report file
        fail(describe_error(exc), EXIT_BAD_INPUT)
    if as_json:
        _echo_json(summary.as_dict())
    else:
        for p in summary.problems[:50]:
            where = f"line {p.line}" + (f" ({p.work_id})" if p.work_id else "")
            click.echo(f"{p.kind}: {where}: {p.reason}", err=True)
        shown = min(50, len(summary.problems))
        total = summary.rejected + summary.warnings
        if total > shown:
            hint = f"; see {report_path}" if report_path else "; use --report FILE for all"
            click.echo(f"... {total - shown} more problems{hint}", err=True)
    if failure is not None:
        fail(failure, EXIT_BAD_INPUT)
    if summary.stored + summary.rejected == 0:
        click.echo(f"{path}: 0 records (the file is empty or has only blank lines)", err=True)
    if not as_json:
        verdict = "aborted (--strict), nothing written" if summary.aborted else "done"
        click.echo(
            f"{verdict}: {summary.lines} lines, {summary.inserted} inserted, "
            f"{summary.updated} updated, {summary.unchanged} unchanged, "
            f"{summary.rejected} rejected, {summary.warnings} warnings"
        )
    sys.exit(summary.exit_code)


@main.command("import-labels")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--campaign", help="File every label under this campaign (created if missing); "
              "default: each row's campaign column, else 'imported'.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.pass_obj
def import_labels_cmd(obj: Context, path: Path, campaign: str | None, as_json: bool) -> None:
    """Import human labels (long CSV, JSONL or Parquet: work_id, annotator, question, value;
    an export's --long file as is): exit 0 all imported, 3 lines rejected, 2 unreadable."""
    from labeling.review.label_import import import_labels, report_lines
    from labeling.review.labels import LabelError

    schema = obj.schema()
    try:
        summary = import_labels(obj.engine, path, schema, campaign=campaign)
    except (LabelError, OSError) as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    except Exception as exc:  # a database error: one line, and the run recorded as failed
        _labels_failed(obj, path, exc)
    if as_json:
        _echo_json(summary.as_dict())
    else:
        problems, done = report_lines(summary)
        for line in problems:
            click.echo(line, err=True)
        click.echo(done)
    sys.exit(EXIT_REJECTED if summary.rejected else 0)


def _labels_failed(obj: Context, path: Path, exc: Exception) -> None:
    """End a labels import that failed unexpectedly: record the run, print one line, exit 2."""
    from labeling.frames.import_runs import describe_error, record_failed_run

    message = f"{path}: {describe_error(exc)}"
    try:
        engine = obj.engine
    except Exception as again:  # the database cannot even be opened
        not_recorded: str | None = describe_error(again)
    else:
        not_recorded = record_failed_run(engine, "labels", path, message)
    if not_recorded:
        message += f"; the run could not be recorded ({not_recorded})"
    fail(message, EXIT_BAD_INPUT)


@main.group()
def users() -> None:
    """Local accounts and roles."""


@users.command("add")
@click.argument("name")
@click.option("--role", type=click.Choice(["annotator", "lead", "exporter", "admin"]),
              required=True)
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
@click.pass_obj
def users_add(obj: Context, name: str, role: str, password_stdin: bool) -> None:
    """Add a user with a role (and a password read from stdin)."""
    from labeling.auth.users import UserError, add_user

    password = None
    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
        if not password:
            fail("empty password on standard input", EXIT_BAD_INPUT)
    try:
        user = add_user(obj.engine, name, role, password)
    except UserError as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    click.echo(f"added {user.name} ({user.role})")


@users.command("list")
@click.pass_obj
def users_list(obj: Context) -> None:
    """List users with role and state."""
    from labeling.auth.users import list_users

    for u in list_users(obj.engine):
        click.echo(f"{u.name}\t{u.role}\t{'active' if u.active else 'inactive'}")


@users.command("set-role")
@click.argument("name")
@click.argument("role", type=click.Choice(["annotator", "lead", "exporter", "admin"]))
@click.pass_obj
def users_set_role(obj: Context, name: str, role: str) -> None:
    """Change a user's role."""
    from labeling.auth.users import UserError, set_role

    try:
        set_role(obj.engine, name, role)
    except UserError as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    click.echo(f"{name} is now {role}")


@users.command("deactivate")
@click.argument("name")
@click.pass_obj
def users_deactivate(obj: Context, name: str) -> None:
    """Deactivate a user (their labels are kept)."""
    from labeling.auth.users import UserError, set_active

    try:
        set_active(obj.engine, name, False)
    except UserError as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    click.echo(f"{name} deactivated")


@main.command()
@click.option("--reset", is_flag=True, help="Delete the SQLite database first.")
@click.pass_obj
def demo(obj: Context, reset: bool) -> None:
    """Build a demo database: a real sample frame, cached abstracts, one user per role."""
    from labeling.frames.demo import DEMO_PASSWORD, build_demo

    if reset:
        from labeling.frames.demo import reset_sqlite

        reset_sqlite(obj.settings.database_url)
    report = build_demo(obj.engine, obj.schema())
    click.echo(report)
    click.echo(f"demo users (password '{DEMO_PASSWORD}'): annotator, annotator2, lead, "
               "exporter, admin")  # fmt: skip


@main.command()
@click.option("--n", "n", type=click.IntRange(1), required=True, help="Number of records.")
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.pass_obj
def synth(obj: Context, n: int, out: Path, seed: int) -> None:
    """Write a synthetic seed-shaped frame (deterministic for a seed), for benchmarks."""
    from labeling.frames.synth import write_synthetic_frame

    written = write_synthetic_frame(out, n, seed=seed, schema=obj.schema())
    click.echo(f"wrote {written} records to {out}")


from labeling.cli.aggregate import register as register_aggregate  # noqa: E402
from labeling.cli.backup import register as register_trust  # noqa: E402
from labeling.cli.export import register as register_export  # noqa: E402
from labeling.cli.review import register  # noqa: E402  (commands of the later issues)
from labeling.cli.sso import register as register_sso  # noqa: E402

register(main)
register_export(main)
register_trust(main)
register_sso(main)
register_aggregate(main)
