"""One root for the domain's exceptions, and the CLI and the pages mapping its categories."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy.exc import OperationalError

from db import faults
from db.backup import BackupError
from labeling import errors
from labeling.auth.access import AccessDenied
from labeling.auth.sso import MappingNotFound, SSOError, SSORefused, SSOStale
from labeling.auth.users import AuthError, UserError, UserNotFound
from labeling.cli.errors import exit_for
from labeling.cli.main import main
from labeling.errors import (
    CampaignError,
    Conflict,
    Denied,
    InputError,
    LabelingError,
    NotFound,
    StorageError,
    StorageFull,
    StorageReadOnly,
    category,
    storage_errors,
)
from labeling.export.definitions import ExportError
from labeling.export.parallel import WorkerError
from labeling.frames.importer import FrameReadError, ImportFailed
from labeling.review import campaigns, filters, sampling
from labeling.review.label_read import CellError
from labeling.review.label_screen import ActionError
from labeling.review.labels import LabelError, LeaseError
from labeling.review.queue import QueueError
from labeling.review.validation import AnswerError, ValidationError
from labeling.schema import SchemaError
from pages._errors import error_flash, error_level

DOMAIN = [
    (FrameReadError, InputError), (ImportFailed, InputError), (SchemaError, InputError),
    (UserError, InputError), (UserNotFound, NotFound), (AuthError, Denied),
    (SSOError, InputError), (MappingNotFound, NotFound), (SSORefused, Denied),
    (SSOStale, Denied), (AccessDenied, Denied), (ActionError, InputError),
    (CampaignError, InputError), (QueueError, Conflict), (CellError, InputError),
    (AnswerError, InputError), (ValidationError, InputError), (LabelError, InputError),
    (LeaseError, Conflict), (ExportError, InputError), (WorkerError, StorageError),
    (StorageError, StorageError), (StorageFull, StorageError), (StorageReadOnly, StorageError),
]  # fmt: skip


@pytest.mark.parametrize(("cls", "expected"), DOMAIN, ids=[c.__name__ for c, _ in DOMAIN])
def test_every_domain_exception_has_one_category(cls: type, expected: type) -> None:
    """Each class derives from LabelingError; its first category in the MRO is the expected."""
    assert issubclass(cls, LabelingError) and issubclass(cls, expected)
    exc = ImportFailed("x", None) if cls is ImportFailed else cls("x")  # type: ignore[arg-type]
    assert category(exc) is expected


def test_compatibility_bases_are_kept() -> None:
    """Input errors stay ValueErrors, a lost lease a LabelError, a denial a PermissionError."""
    for cls, expected in DOMAIN:
        if expected is InputError:
            assert issubclass(cls, ValueError), cls
    assert issubclass(LeaseError, LabelError) and issubclass(UserNotFound, UserError)
    assert issubclass(MappingNotFound, SSOError) and issubclass(AccessDenied, PermissionError)
    assert issubclass(StorageFull, faults.StorageFull) and issubclass(StorageError, RuntimeError)


def test_campaign_error_is_one_class_wherever_it_is_imported_from() -> None:
    """Raised by filters and sampling as well as campaigns: one class, re-exported."""
    assert campaigns.CampaignError is filters.CampaignError is sampling.CampaignError
    assert CampaignError is errors.CampaignError


def _wrapped(message: str) -> OperationalError:
    """A SQLite error as SQLAlchemy raises it."""
    return OperationalError("INSERT INTO labels ...", {}, sqlite3.OperationalError(message))


@pytest.mark.parametrize(
    ("message", "cls", "text"),
    [
        ("database or disk is full", StorageFull,
         "Not saved: the database's disk is full (database or disk is full)"),
        ("attempt to write a readonly database", StorageReadOnly,
         "Not saved: the database is read-only (attempt to write a readonly database)"),
        ("disk I/O error", StorageError,
         "Not saved: the database could not write to its disk (disk I/O error)"),
    ],
)  # fmt: skip
def test_storage_errors_raises_the_domain_class(message: str, cls: type, text: str) -> None:
    """db.faults classifies; labeling.errors re-raises as its own class, same words, same cause."""
    cause = _wrapped(message)
    with pytest.raises(cls) as caught, storage_errors("Not saved"):
        raise cause
    assert type(caught.value) is cls and str(caught.value) == text
    assert caught.value.__cause__ is cause
    assert isinstance(caught.value, faults.StorageError)  # `except db.faults...` still catches


def test_storage_errors_lets_other_errors_through() -> None:
    """A locked database is no storage fault: the driver's error passes unchanged."""
    with pytest.raises(OperationalError), storage_errors("Not saved"):
        raise _wrapped("database is locked")


def test_category_of_foreign_errors() -> None:
    """An unwrapped db fault is storage; anything else has no category."""
    assert category(faults.StorageReadOnly("x")) is StorageError
    assert category(ValueError("x")) is None and category(RuntimeError("x")) is None


# ---------------------------------------------------------------------- the CLI's one mapping


def _run(url: str, *args: str) -> Any:
    """Invoke the CLI against `url`, exceptions caught as click's runner does."""
    return CliRunner().invoke(main, ["--db", url, *args])


def _one_line(result: Any, code: int, message: str) -> None:
    """The command exited `code` with `error: message` as its only output."""
    assert result.exit_code == code, (result.output, result.exception)
    assert result.stderr == f"error: {message}\n"
    assert "Traceback" not in result.output and result.stdout == ""


def test_cli_input_error_exits_2(sqlite_url: str) -> None:
    """Bad input (an InputError raised by the domain) is one line and exit 2."""
    _one_line(_run(sqlite_url, "campaigns", "create", "c", "--strategy", "random"), 2,
              "a random sample needs sample_size")  # fmt: skip


def test_cli_not_found_exits_2(sqlite_url: str) -> None:
    """A user that does not exist (NotFound) is one line and exit 2."""
    _one_line(_run(sqlite_url, "users", "set-role", "nobody", "lead"), 2,
              "no user called 'nobody'")  # fmt: skip
    _one_line(_run(sqlite_url, "sso", "remove", "99"), 2, "no mapping with id 99")


def test_cli_conflict_exits_2(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Contention (a Conflict) is one line and exit 2."""

    def busy(*args: Any, **kwargs: Any) -> Any:
        raise QueueError("could not claim a work after 8 attempts: locked")

    monkeypatch.setattr(campaigns, "list_campaigns", busy)
    _one_line(_run(sqlite_url, "campaigns", "list"), 2,
              "could not claim a work after 8 attempts: locked")  # fmt: skip


def test_cli_storage_error_exits_2(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk is one line and exit 2; so is a db fault that was not wrapped."""
    import labeling.auth.users as users

    def full(*args: Any, **kwargs: Any) -> Any:
        with storage_errors("Not saved"):
            raise _wrapped("database or disk is full")

    monkeypatch.setattr(users, "add_user", full)
    _one_line(_run(sqlite_url, "users", "add", "bob", "--role", "lead"), 2,
              "Not saved: the database's disk is full (database or disk is full)")  # fmt: skip

    def read_only(*args: Any, **kwargs: Any) -> Any:
        raise faults.StorageReadOnly("Not saved: the database is read-only")

    monkeypatch.setattr(users, "set_role", read_only)
    _one_line(_run(sqlite_url, "users", "set-role", "bob", "lead"), 2,
              "Not saved: the database is read-only")  # fmt: skip


def test_cli_export_failure_exits_1(sqlite_url: str, monkeypatch: pytest.MonkeyPatch,
                                    tmp_path: Any) -> None:  # fmt: skip
    """`export` documents exit 1 with "export failed: ..." for a worker's failure."""
    import labeling.export.gold_set as gold_set

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise WorkerError("export worker w1 failed: disk I/O error")

    monkeypatch.setattr(gold_set, "write_gold", broken)
    result = _run(sqlite_url, "export", "--format", "csv", "--out", str(tmp_path / "g.csv"))
    _one_line(result, 1, "export failed: export worker w1 failed: disk I/O error")


def test_cli_database_error_is_one_line(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unexpected database error: the driver's first line, exit 2, never a traceback."""
    import labeling.auth.users as users

    def locked(*args: Any, **kwargs: Any) -> Any:
        raise _wrapped("database is locked\nmore detail")

    monkeypatch.setattr(users, "list_users", locked)
    _one_line(_run(sqlite_url, "users", "list"), 2,
              "database error (OperationalError): database is locked")  # fmt: skip


def test_cli_backup_error_exits_2(sqlite_url: str, tmp_path: Any) -> None:
    """db/'s BackupError (which cannot derive from labeling) is bad input: exit 2."""
    target = tmp_path / "exists.db"
    target.write_bytes(b"")
    _one_line(_run(sqlite_url, "backup", str(target)), 2,
              f"{target} exists; use --force to overwrite it")  # fmt: skip


def test_cli_bugs_are_not_swallowed(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An error outside the categories is not dressed up as a user error."""
    import labeling.auth.users as users

    def bug(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("bug")

    monkeypatch.setattr(users, "list_users", bug)
    result = _run(sqlite_url, "users", "list")
    assert result.exit_code == 1 and isinstance(result.exception, KeyError)
    assert exit_for(KeyError("bug")) is None
    assert exit_for(BackupError("x")) == (2, "x")


# ------------------------------------------------------------------------ the pages' mapping


def test_pages_show_a_conflict_as_a_warning_and_the_rest_as_errors() -> None:
    """One level per category; the message is the exception's own, after the prefix."""
    assert error_level(QueueError("busy")) == "warning"
    assert error_level(LeaseError("taken")) == "warning"
    for exc in (UserError("x"), UserNotFound("x"), StorageFull("x"), AuthError("x"),
                ValueError("x")):  # fmt: skip
        assert error_level(exc) == "error"
    assert error_flash(CampaignError("no name"), "Not created: ") == (
        "error", "Not created: no name")  # fmt: skip
