"""Exit codes of the `labeling` command, and the one place that maps errors to them.

A command lets the domain's exceptions (labeling/errors.py) propagate; the group's
`LabelingGroup.invoke` turns each into one line on stderr, `error: <message>`, and the exit
code of its category, never a traceback. Every category exits 2 (the README's "nothing could
be done"), except where a command documents another code (COMMAND_EXITS). Commands still
handle what only they can say: the import commands' 0/2/3 summary and their failed runs,
`export`'s unwritable file.
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import click

from db.backup import BackupError
from labeling.errors import (
    Conflict,
    Denied,
    InputError,
    LabelingError,
    NotFound,
    StorageError,
    category,
)

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_REJECTED = 3

EXIT_CODES: dict[type[LabelingError], int] = {
    InputError: EXIT_BAD_INPUT,
    NotFound: EXIT_BAD_INPUT,
    Conflict: EXIT_BAD_INPUT,
    StorageError: EXIT_BAD_INPUT,
    Denied: EXIT_BAD_INPUT,
}

# command -> category -> (exit code, message prefix), where a command documents its own:
# `export` exits 1 when a worker's (or its own) database or disk write fails.
COMMAND_EXITS: dict[str, dict[type[LabelingError], tuple[int, str]]] = {
    "export": {StorageError: (EXIT_FAILED, "export failed: ")},
}

_DRIVERS = ("sqlite3", "psycopg", "psycopg2")


def fail(message: str, code: int = EXIT_FAILED) -> NoReturn:
    """Print `error: message` to stderr and exit with `code`."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def _category(exc: BaseException) -> type[LabelingError] | None:
    """The domain category of `exc`; db/'s BackupError (a bad path or file) is bad input."""
    kind = category(exc)
    if kind is None and isinstance(exc, BackupError):
        return InputError
    return kind


def _database_error(exc: BaseException) -> bool:
    """Whether `exc` comes from SQLAlchemy or a database driver (an unexpected one)."""
    from sqlalchemy.exc import SQLAlchemyError

    return isinstance(exc, SQLAlchemyError) or type(exc).__module__.split(".")[0] in _DRIVERS


def exit_for(exc: BaseException, command: str | None = None) -> tuple[int, str] | None:
    """The exit code and message for an error escaping `command`; None: not ours to map.

    Args:
        exc: the exception.
        command: the name of the top-level command it escaped from (for COMMAND_EXITS).
    """
    kind = _category(exc)
    if kind is not None:
        code, prefix = COMMAND_EXITS.get(command or "", {}).get(kind, (EXIT_CODES[kind], ""))
        return code, f"{prefix}{exc}"
    if _database_error(exc):
        from labeling.frames.import_runs import describe_error

        return EXIT_BAD_INPUT, describe_error(exc)
    return None


class LabelingGroup(click.Group):
    """The main group: runs a command and maps the errors escaping it (see exit_for)."""

    def invoke(self, ctx: click.Context) -> Any:
        """Invoke the subcommand; a domain or database error becomes one line and its code."""
        try:
            return super().invoke(ctx)
        except click.BadParameter as exc:
            if isinstance(exc, click.MissingParameter):
                raise  # with the usage, as click shows it: what to give is the point
            # A value out of its range (cli/ranges.py) or of the wrong kind: one line, exit 2.
            fail(exc.format_message(), EXIT_BAD_INPUT)
        except Exception as exc:
            mapped = exit_for(exc, ctx.invoked_subcommand)
            if mapped is None:  # click's own exceptions, and bugs: as click handles them
                raise
            fail(mapped[1], mapped[0])
