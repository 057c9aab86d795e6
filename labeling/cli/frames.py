"""Frame commands: `labeling import-frame`, `labeling demo`, `labeling synth`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from labeling.cli.context import Context, echo_json
from labeling.cli.errors import EXIT_BAD_INPUT, fail
from labeling.cli.ranges import MAX_PROCESSES, SEED, count_range
from labeling.errors import InputError


def register(main: click.Group) -> None:
    """Attach the frame commands to the main group."""
    main.add_command(import_frame_cmd)
    main.add_command(demo)
    main.add_command(synth)


@click.command("import-frame")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--schema", "schema_path", help="Schema file to check the frame against.")
@click.option("--strict", is_flag=True, help="Abort on the first bad line; write nothing.")
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write every rejected line and warning to this JSON Lines file.",
)
@click.option(
    "--batch-size",
    type=count_range(),
    default=None,
    help="Records per transaction (default: LABELING_IMPORT_BATCH_SIZE).",
)
@click.option(
    "--workers",
    type=count_range(0, MAX_PROCESSES),
    default=None,
    help="Parsing processes (default: 2 for large files).",
)
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
    except FrameReadError:
        raise  # the file cannot be read: bad input, one line and exit 2 (cli/errors.py)
    except Exception as exc:  # before the run started: the database, the report file
        fail(describe_error(exc), EXIT_BAD_INPUT)
    if as_json:
        echo_json(summary.as_dict())
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
            + _same_version_note(summary.content_changed_same_version)
        )
    sys.exit(summary.exit_code)


@click.command()
@click.option(
    "--reset",
    is_flag=True,
    help="Delete the SQLite database first; refused (exit 2) when it holds anything the demo "
    "did not write.",
)
@click.option("--force", is_flag=True, help="With --reset: delete it whatever it holds.")
@click.pass_obj
def demo(obj: Context, reset: bool, force: bool) -> None:
    """Build a demo database: a real sample frame, cached abstracts, one user per role."""
    from labeling.frames.demo import DEMO_PASSWORD, build_demo

    if force and not reset:
        raise InputError("--force only goes with --reset")
    if reset:
        from labeling.frames.demo import reset_sqlite

        # Before obj.engine, which would migrate (and so change) the file being judged.
        reset_sqlite(obj.settings.database_url, force=force)
    report = build_demo(obj.engine, obj.schema())
    click.echo(report)
    click.echo(f"demo users (password '{DEMO_PASSWORD}'): annotator, annotator2, lead, "
               "exporter, admin")  # fmt: skip


@click.command()
@click.option("--n", "n", type=count_range(), required=True, help="Number of records.")
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The frame file to write (JSON Lines; .gz compresses it).",
)
@click.option(
    "--seed", type=SEED, default=0, show_default=True, help="The same seed writes the same frame."
)
@click.pass_obj
def synth(obj: Context, n: int, out: Path, seed: int) -> None:
    """Write a synthetic seed-shaped frame (deterministic for a seed), for benchmarks."""
    from labeling.frames.synth import write_synthetic_frame

    written = write_synthetic_frame(out, n, seed=seed, schema=obj.schema())
    click.echo(f"wrote {written} records to {out}")


def _same_version_note(n: int) -> str:
    """The closing line's note on works whose content changed under the same model_version."""
    if not n:
        return ""
    works = "work" if n == 1 else "works"
    return (f"; {n} {works} changed content under an unchanged model_version "
            "(the earlier revision kept in predictions)")  # fmt: skip
