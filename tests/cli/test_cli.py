"""The `labeling` CLI as a lead would use it: commands, flags, exit codes, messages."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from labeling.cli.main import main
from tests.conftest import make_record, write_jsonl


def run(url: str, *args: str, input: str | None = None):
    """Invoke the CLI against `url` and return click's result."""
    return CliRunner().invoke(main, ["--db", url, *args], input=input, catch_exceptions=False)


def test_init_migrates_a_new_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/new.db"
    result = run(url, "init")
    assert result.exit_code == 0
    from alembic.script import ScriptDirectory

    from db.engine import alembic_config

    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    assert head and head in result.output


def test_import_frame_exit_codes_and_summary(sqlite_url, seed_record, tmp_path) -> None:
    good = write_jsonl(tmp_path / "good.jsonl", [seed_record])
    result = run(sqlite_url, "import-frame", str(good))
    assert result.exit_code == 0
    assert "1 inserted" in result.output and "1 warnings" in result.output
    assert "warning: line 1 (W4413411773): genre" in result.output

    again = run(sqlite_url, "import-frame", str(good), "--json")
    assert again.exit_code == 0
    assert json.loads(again.stdout)["unchanged"] == 1

    bad = write_jsonl(tmp_path / "bad.jsonl", [make_record(seed_record, "W2"), "{oops"])
    report = tmp_path / "report.jsonl"
    result = run(sqlite_url, "import-frame", str(bad), "--report", str(report))
    assert result.exit_code == 3
    assert "rejected: line 2: invalid JSON" in result.output
    kinds = [json.loads(x)["kind"] for x in report.read_text().splitlines()]
    assert kinds.count("rejected") == 1


def test_import_frame_strict_writes_nothing(sqlite_url, seed_record, tmp_path) -> None:
    bad = write_jsonl(tmp_path / "bad.jsonl", [make_record(seed_record, "W2"), '{"id": 1}'])
    result = run(sqlite_url, "import-frame", str(bad), "--strict", "--json")
    assert result.exit_code == 3
    assert json.loads(result.stdout)["inserted"] == 0
    check = run(
        sqlite_url,
        "import-frame",
        str(write_jsonl(tmp_path / "g.jsonl", [make_record(seed_record, "W2")])),
    )
    assert "1 inserted" in check.output  # W2 was not written by the aborted run


def test_import_frame_gz(sqlite_url, seed_record, tmp_path) -> None:
    path = tmp_path / "f.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        for i in range(3):
            fh.write(json.dumps(make_record(seed_record, f"W{i + 1}")) + "\n")
    result = run(sqlite_url, "import-frame", str(path))
    assert result.exit_code == 0 and "3 inserted" in result.output


@pytest.mark.parametrize("kind", ["missing", "directory", "bad-gzip"])
def test_unreadable_frame_exits_2(sqlite_url, tmp_path, kind) -> None:
    if kind == "missing":
        path = tmp_path / "nope.jsonl"
    elif kind == "directory":
        path = tmp_path
    else:
        path = tmp_path / "x.jsonl.gz"
        data = gzip.compress(os.urandom(50_000))
        path.write_bytes(data[:1000])
    result = CliRunner().invoke(main, ["--db", sqlite_url, "import-frame", str(path)])
    assert result.exit_code == 2
    assert "error:" in result.output or "Error:" in result.output


def test_malformed_schema_exits_2_naming_the_file(sqlite_url, seed_record, tmp_path) -> None:
    schema = tmp_path / "schema.toml"
    schema.write_text('[[question]]\nname = "q"\nkind = "nope"\nlabels = ["a"]\n')
    frame = write_jsonl(tmp_path / "f.jsonl", [seed_record])
    result = run(sqlite_url, "import-frame", str(frame), "--schema", str(schema))
    assert result.exit_code == 2
    assert str(schema) in result.output and "question 'q'" in result.output


def test_users_add_with_password_from_stdin(sqlite_url) -> None:
    result = run(sqlite_url, "users", "add", "alice", "--role", "lead", "--password-stdin",
                 input="s3cret\n")  # fmt: skip
    assert result.exit_code == 0 and "added alice (lead)" in result.output
    dup = run(sqlite_url, "users", "add", "alice", "--role", "lead")
    assert dup.exit_code == 2
    listed = run(sqlite_url, "users", "list")
    assert "alice\tlead\tactive" in listed.output
    bad_role = CliRunner().invoke(main, ["--db", sqlite_url, "users", "add", "bob", "--role",
                                         "boss"])  # fmt: skip
    assert bad_role.exit_code == 2

    from labeling.auth.users import authenticate
    from labeling.database import get_engine

    assert authenticate(get_engine(sqlite_url), "alice", "s3cret").role == "lead"


def test_synth_is_deterministic(tmp_path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    url = f"sqlite:///{tmp_path}/s.db"
    assert run(url, "synth", "--n", "50", "--out", str(a), "--seed", "3").exit_code == 0
    assert run(url, "synth", "--n", "50", "--out", str(b), "--seed", "3").exit_code == 0
    assert a.read_bytes() == b.read_bytes()
    assert len(a.read_text().splitlines()) == 50
    imported = run(url, "import-frame", str(a), "--json")
    assert json.loads(imported.stdout)["inserted"] == 50


def test_demo_builds_an_offline_database(tmp_path) -> None:
    url = f"sqlite:///{tmp_path}/demo.db"
    result = run(url, "demo")
    assert result.exit_code == 0, result.output
    again = run(url, "demo")
    assert again.exit_code == 0, again.output

    from sqlalchemy import func, select

    from db.engine import read_session
    from db.models import AbstractCache, Campaign, User, Work
    from labeling.database import get_engine

    with read_session(get_engine(url)) as s:
        assert s.scalar(select(func.count()).select_from(Work)) >= 150
        assert s.scalar(select(func.count()).select_from(AbstractCache)) >= 150
        assert {u.role for u in s.scalars(select(User))} == {
            "annotator", "lead", "exporter", "admin",
        }  # fmt: skip
        assert s.scalar(select(func.count()).select_from(Campaign)) >= 1
        seed = s.get(Work, "W4413411773")
        assert seed is not None and seed.title.startswith("Cephalo")


def test_console_script_is_installed() -> None:
    exe = Path(sys.executable).with_name("labeling")
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=True)
    assert "import-frame" in out.stdout and "users" in out.stdout
