"""`labeling demo --reset` deletes a demo database only, unless --force."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from db.engine import make_engine, read_session, write_session
from db.models import Campaign, Label, User, Work
from labeling.cli.main import main
from labeling.database import dispose_all


def run(url: str, *args: str):
    """Invoke the CLI against `url`."""
    result = CliRunner().invoke(main, ["--db", url, *args], catch_exceptions=False)
    dispose_all()  # let go of the file, as a separate process would
    return result


def add_label(url: str, user: str, campaign: str) -> None:
    """A label by `user` on the first work of `campaign`, stored as the app would."""
    engine = make_engine(url)
    with write_session(engine) as session:
        user_id = session.scalar(select(User.id).where(User.name == user))
        campaign_id = session.scalar(select(Campaign.id).where(Campaign.name == campaign))
        work_id = session.scalar(select(Work.id).order_by(Work.id))
        session.add(Label(campaign_id=campaign_id, work_id=work_id, user_id=user_id,
                          version=1, answers={"genre": "article"}, source="app"))  # fmt: skip
    engine.dispose()


def users(url: str) -> set[str]:
    """The user names in the database."""
    engine = make_engine(url)
    with read_session(engine) as session:
        names = set(session.scalars(select(User.name)))
    engine.dispose()
    return names


@pytest.fixture(scope="module")
def demo_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo database built once; each test copies it."""
    path = tmp_path_factory.mktemp("demo") / "demo.db"
    assert run(f"sqlite:///{path}", "demo").exit_code == 0
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


@pytest.fixture
def demo_url(demo_template: Path, tmp_path: Path) -> str:
    """URL of a fresh copy of the demo database."""
    path = tmp_path / "demo.db"
    path.write_bytes(demo_template.read_bytes())
    return f"sqlite:///{path}"


def test_a_database_with_work_of_its_own_is_refused_and_kept(demo_url: str) -> None:
    assert run(demo_url, "users", "add", "alice", "--role", "annotator").exit_code == 0
    assert run(demo_url, "campaigns", "create", "g1").exit_code == 0
    add_label(demo_url, "alice", "g1")
    add_label(demo_url, "alice", "demo-top")
    add_label(demo_url, "annotator", "g1")
    result = run(demo_url, "demo", "--reset")
    assert result.exit_code == 2, result.output
    path = demo_url.removeprefix("sqlite:///")
    assert result.output == (
        f"error: refusing to reset {path}: 2 labels by users the demo did not create (alice); "
        "1 label in campaigns the demo did not create; 1 user the demo did not create (alice); "
        "1 campaign the demo did not create (g1); --force deletes it anyway\n"
    )
    assert "alice" in users(demo_url)  # nothing deleted


def test_an_imported_frame_is_found(demo_url: str, seed_record, tmp_path: Path) -> None:
    from tests.conftest import make_record, write_jsonl

    frame = write_jsonl(tmp_path / "mine.jsonl", [make_record(seed_record, "W1")])
    assert run(demo_url, "import-frame", str(frame)).exit_code == 0
    result = run(demo_url, "demo", "--reset")
    assert result.exit_code == 2
    assert "1 work not in the demo frame (W1)" in result.output
    assert f"1 import run of files other than the demo frame ({frame})" in result.output


def test_a_demo_database_with_labels_of_demo_users_resets(demo_url: str) -> None:
    add_label(demo_url, "annotator", "demo-top")
    add_label(demo_url, "annotator2", "demo-sample")
    result = run(demo_url, "demo", "--reset")
    assert result.exit_code == 0, result.output
    engine = make_engine(demo_url)
    with read_session(engine) as session:
        assert session.scalars(select(Label.id)).first() is None  # built afresh
    engine.dispose()


def test_force_resets_anyway(demo_url: str) -> None:
    assert run(demo_url, "users", "add", "alice", "--role", "annotator").exit_code == 0
    result = run(demo_url, "demo", "--reset", "--force")
    assert result.exit_code == 0, result.output
    assert "alice" not in users(demo_url)
    assert run(demo_url, "demo", "--force").exit_code == 2  # --force alone resets nothing


def test_a_database_that_is_not_the_tools_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "notes.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.execute("INSERT INTO notes VALUES ('keep me')")
    result = run(f"sqlite:///{other}", "demo", "--reset")
    assert result.exit_code == 2
    assert "it is not a database of this tool" in result.output
    with sqlite3.connect(other) as conn:
        assert conn.execute("SELECT body FROM notes").fetchall() == [("keep me",)]
    text = tmp_path / "thesis.txt"
    text.write_text("chapter one")
    result = run(f"sqlite:///{text}", "demo", "--reset")
    assert result.exit_code == 2
    assert result.output == (
        f"error: refusing to reset {text}: it is not a SQLite database; --force deletes it anyway\n"
    )
    assert text.read_text() == "chapter one"


def test_a_missing_file_and_postgresql(tmp_path: Path) -> None:
    new = tmp_path / "new.db"
    assert run(f"sqlite:///{new}", "demo", "--reset").exit_code == 0
    result = run("postgresql+psycopg://nobody@127.0.0.1:1/none", "demo", "--reset")
    assert result.exit_code == 2
    assert result.output.startswith("error: --reset only deletes SQLite files")
