"""`labeling backup` / `labeling restore`: consistent online copies, round trip, refusals."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import func, select

from db.engine import make_engine, read_session
from db.models import Label
from labeling.cli.backup import register
from labeling.cli.main import main
from labeling.review.campaigns import create_campaign
from tests.factories import add_user, add_works

if "backup" not in main.commands:  # until the main group registers this module itself
    register(main)

WORKS = 400


def run(url: str, *args: str) -> Result:
    """Invoke the CLI on a database URL."""
    return CliRunner().invoke(main, ["--db", url, *args], catch_exceptions=False)


def _label_all(url: str, campaign_id: int, user_id: int) -> int:
    """Claim and submit until the queue is empty; return the number of labels written."""
    from labeling.review.labels import LabelSubmission, submit_label
    from labeling.review.queue import claim_next
    from labeling.schema import load_schema
    from labeling.settings import DEFAULT_SCHEMA
    from tests.factories import answers_for

    engine = make_engine(url)
    schema = load_schema(DEFAULT_SCHEMA)
    n = 0
    while (claim := claim_next(engine, campaign_id, user_id)) is not None:
        submit_label(engine, LabelSubmission(
            campaign_id=campaign_id, work_id=claim.work_id, user_id=user_id,
            answers=answers_for(schema, n), schema_hash=schema.hash, scores_visible=True,
            model_version="m", time_on_item_ms=1, submission_id=f"s{claim.work_id}",
        ), schema=schema)  # fmt: skip
        n += 1
    engine.dispose()
    return n


def _coherent(path: Path) -> tuple[int, str]:
    """Open a copy: integrity_check result and label count; counts must agree everywhere."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        ok = conn.execute("PRAGMA integrity_check").fetchone()[0]
        labels = conn.execute("SELECT count(*) FROM labels").fetchone()[0]
        counted = conn.execute("SELECT coalesce(sum(n_labels), 0) FROM campaign_items").fetchone()
        done = conn.execute("SELECT count(*) FROM campaign_items WHERE done").fetchone()[0]
        leases = conn.execute(
            "SELECT count(*) FROM leases l JOIN labels b ON b.work_id = l.work_id "
            "AND b.user_id = l.user_id AND b.campaign_id = l.campaign_id"
        ).fetchone()[0]
        works = conn.execute("SELECT count(*) FROM works").fetchone()[0]
    finally:
        conn.close()
    assert works == WORKS
    assert counted[0] == labels == done  # overlap 1, no skips: one label makes a work done
    assert leases == 0  # a submit drops its lease in the same transaction
    return labels, ok


@pytest.mark.slow
def test_backup_while_another_process_writes_labels(sqlite_url: str, tmp_path: Path) -> None:
    """Backups taken during a labelling run open, pass integrity_check and are coherent."""
    engine = make_engine(sqlite_url)
    add_works(engine, WORKS)
    camp = create_campaign(engine, name="live", overlap=1)
    uid = add_user(engine, "ann")
    engine.dispose()
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        job = pool.apply_async(_label_all, (sqlite_url, camp.id, uid))
        seen: list[int] = []
        deadline = time.monotonic() + 120
        i = 0
        while not job.ready() and time.monotonic() < deadline:
            dest = tmp_path / f"copy{i}.db"
            result = run(sqlite_url, "backup", str(dest))
            assert result.exit_code == 0, result.output
            labels, ok = _coherent(dest)
            assert ok == "ok"
            seen.append(labels)
            i += 1
        written = job.get(timeout=120)
    assert written == WORKS
    assert seen == sorted(seen)  # later copies never have fewer labels
    assert any(0 < n < WORKS for n in seen), f"no backup caught the run in progress: {seen}"
    final = tmp_path / "final.db"
    assert run(sqlite_url, "backup", str(final)).exit_code == 0
    assert _coherent(final) == (WORKS, "ok")


def test_backup_refuses_to_overwrite_without_force(sqlite_url: str, tmp_path: Path) -> None:
    """An existing PATH is kept unless --force; a missing database is an error too."""
    dest = tmp_path / "b.db"
    dest.write_text("precious")
    result = run(sqlite_url, "backup", str(dest))
    assert result.exit_code == 2
    assert "--force" in result.output
    assert dest.read_text() == "precious"
    assert run(sqlite_url, "backup", str(dest), "--force").exit_code == 0
    assert dest.read_bytes().startswith(b"SQLite format 3\x00")
    missing = run(f"sqlite:///{tmp_path / 'nope.db'}", "backup", str(tmp_path / "c.db"))
    assert missing.exit_code == 2
    assert "does not exist" in missing.output
    assert not (tmp_path / "nope.db").exists()


def test_backup_and_restore_on_postgresql_point_to_pg_dump(tmp_path: Path) -> None:
    """On PostgreSQL both commands exit 2 and name pg_dump / pg_restore with a libpq URL."""
    url = "postgresql+psycopg://u:secret@localhost:1/none"
    for cmd in ("backup", "restore"):
        result = run(url, cmd, str(tmp_path / "x.db"))
        assert result.exit_code == 2
        assert ('`pg_dump --format=custom --file=labeling.dump "postgresql://u@localhost:1/none"`'
                in result.output)  # fmt: skip
        assert '--dbname="postgresql://u@localhost:1/none" labeling.dump`' in result.output
        assert "+psycopg" not in result.output and "secret" not in result.output
        assert "PGPASSWORD" in result.output


def test_restore_round_trip(sqlite_url: str, tmp_path: Path) -> None:
    """Back up, lose the data, restore with --force: every label is back, app can write."""
    engine = make_engine(sqlite_url)
    add_works(engine, 20)
    camp = create_campaign(engine, name="rt", overlap=1)
    uid = add_user(engine, "ann")
    assert _label_all(sqlite_url, camp.id, uid) == 20
    dest = tmp_path / "backup.db"
    assert run(sqlite_url, "backup", str(dest)).exit_code == 0
    with sqlite3.connect(dest) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # one file
    # the data is "lost": labels deleted in the live database (engine still open)
    with engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM labels")
    refused = run(sqlite_url, "restore", str(dest))
    assert refused.exit_code == 2
    assert "--force" in refused.output
    result = run(sqlite_url, "restore", str(dest), "--force")
    assert result.exit_code == 0, result.output
    assert "20 labels" in result.output
    with read_session(engine) as session:  # the app's open engine sees the restored data
        assert session.execute(select(func.count()).select_from(Label)).scalar_one() == 20
    path = Path(engine.url.database)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    add_user(engine, "after")  # still writable
    engine.dispose()


def test_restore_a_backup_of_another_page_size(sqlite_url: str, tmp_path: Path) -> None:
    """A backup of a 4 KB-page database (made before issue 16) restores into a 16 KB one."""
    engine = make_engine(sqlite_url)
    add_works(engine, 5)
    old = tmp_path / "old.db"
    with sqlite3.connect(Path(engine.url.database)) as live, sqlite3.connect(old) as conn:
        live.backup(conn)
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.execute("PRAGMA page_size=4096")
        conn.execute("VACUUM")
        assert conn.execute("PRAGMA page_size").fetchone()[0] == 4096
    with engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM works")
    result = run(sqlite_url, "restore", str(old), "--force")
    assert result.exit_code == 0, result.output
    with sqlite3.connect(Path(engine.url.database)) as conn:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == 16384
        assert conn.execute("SELECT count(*) FROM works").fetchone()[0] == 5
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert not list(tmp_path.glob("*.restore"))
    engine.dispose()


def test_restore_into_a_new_database(sqlite_url: str, tmp_path: Path) -> None:
    """A restore into an empty location needs no --force and gives a usable database."""
    engine = make_engine(sqlite_url)
    add_works(engine, 5)
    engine.dispose()
    dest = tmp_path / "b.db"
    assert run(sqlite_url, "backup", str(dest)).exit_code == 0
    new_url = f"sqlite:///{tmp_path / 'new' / 'labeling.db'}"
    result = run(new_url, "restore", str(dest))
    assert result.exit_code == 0, result.output
    assert "5 works" in result.output


def test_restore_refuses_bad_files(sqlite_url: str, tmp_path: Path) -> None:
    """Missing file, non-SQLite file, and a SQLite file that is not ours: exit 2, no change."""
    engine = make_engine(sqlite_url)
    add_works(engine, 3)
    engine.dispose()
    before = Path(make_engine(sqlite_url).url.database).read_bytes()
    text_file = tmp_path / "notes.txt"
    text_file.write_text("not a database at all")
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE t (x)")
    cases = {
        str(tmp_path / "missing.db"): "no such file",
        str(text_file): "not a SQLite database",
        str(foreign): "alembic_version",
    }
    for path, message in cases.items():
        result = run(sqlite_url, "restore", path, "--force")
        assert result.exit_code == 2, path
        assert message in result.output, result.output
    assert Path(make_engine(sqlite_url).url.database).read_bytes() == before
