"""`labeling import-labels`: human labels from a long CSV, JSON Lines or Parquet file."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from labeling.cli.context import Context, echo_json
from labeling.cli.errors import EXIT_BAD_INPUT, EXIT_REJECTED, fail
from labeling.reports.text import wrap_clauses


def register(main: click.Group) -> None:
    """Attach import-labels to the main group."""
    main.add_command(import_labels_cmd)


@click.command("import-labels")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--campaign",
    help="File every label under this campaign (created if missing); "
    "default: each row's campaign column, else 'imported'.",
)
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
    except LabelError:
        raise  # an unreadable file or a bad --campaign: bad input, exit 2 (cli/errors.py)
    except OSError as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    except Exception as exc:  # a database error: one line, and the run recorded as failed
        _labels_failed(obj, path, exc)
    if as_json:
        echo_json(summary.as_dict())
    else:
        problems, done = report_lines(summary)
        for line in problems:
            click.echo(line, err=True)
        click.echo("\n".join(wrap_clauses(done)))
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
