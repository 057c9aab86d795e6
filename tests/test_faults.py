"""Faults with real processes: SIGKILL mid-import and mid-submit, read-only DB, PG restarts."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path

import orjson
import pytest
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.exc import OperationalError

from db.engine import make_engine, read_session
from db.models import CampaignItem, Label, Lease, Work
from labeling.campaigns import create_campaign
from labeling.labels import submit_label
from labeling.queue import claim_next
from labeling.schema import Schema
from labeling.synth import write_synthetic_frame
from tests.factories import add_user, add_works, answers_for

ROOT = Path(__file__).parents[1]
FRAME_RECORDS = 20_000  # ~60 MB: above PARALLEL_MIN_BYTES, so indexes are deferred
BATCH = 1_000


def _cli(url: str, *args: str) -> list[str]:
    """The command line of `labeling --db url args...` run by this interpreter."""
    return [sys.executable, "-c", "from labeling.cli import main; main()", "--db", url, *args]


def _python(code: str, *args: str) -> list[str]:
    """The command line running `code` (dedented) with this interpreter."""
    return [sys.executable, "-c", textwrap.dedent(code), *args]


def _works(path: Path) -> int:
    """Works committed so far, read without taking any write lock (0 before the table)."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    except sqlite3.OperationalError:
        return 0
    try:
        return conn.execute("SELECT count(*) FROM works").fetchone()[0]
    except sqlite3.OperationalError:  # not created (or not visible) yet
        return 0
    finally:
        conn.close()


def _work_indexes(path: Path) -> set[str]:
    """Names of the explicit indexes on the works table."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'works' "
            "AND sql IS NOT NULL"
        ).fetchall()
    return {r[0] for r in rows}


@pytest.mark.slow
def test_sigkill_during_import_then_rerun_completes(tmp_path: Path) -> None:
    """Kill -9 a large import after some batches; the rerun imports every id exactly once."""
    frame = tmp_path / "frame.jsonl"
    write_synthetic_frame(frame, FRAME_RECORDS, workers=1)
    db = tmp_path / "labeling.db"
    url = f"sqlite:///{db}"
    args = _cli(url, "import-frame", str(frame), "--batch-size", str(BATCH))
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 120
    seen = 0
    while time.monotonic() < deadline and proc.poll() is None:
        seen = _works(db)
        if seen >= 3 * BATCH:
            break
        time.sleep(0.01)
    assert proc.poll() is None, f"import ended before it could be killed: {proc.stderr.read()}"
    os.killpg(proc.pid, signal.SIGKILL)  # the CLI and its parsing workers, all at once
    proc.wait(timeout=30)
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    killed_at = _works(db)
    assert 3 * BATCH <= killed_at < FRAME_RECORDS
    assert killed_at % BATCH == 0  # whole batches only
    expected = {idx.name for idx in Work.__table__.indexes}
    assert not expected & _work_indexes(db)  # the bulk load had dropped them

    rerun = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert f"{FRAME_RECORDS - killed_at} inserted" in rerun.stdout
    assert f"{killed_at} unchanged" in rerun.stdout

    ids = [orjson.loads(line)["id"] for line in frame.read_bytes().splitlines() if line.strip()]
    with sqlite3.connect(db) as conn:
        stored = [r[0] for r in conn.execute("SELECT id FROM works")]
        half = conn.execute(
            "SELECT count(*) FROM works WHERE record IS NULL OR record_hash IS NULL "
            "OR length(record_hash) != 64 OR NOT json_valid(record) "
            "OR json_extract(record, '$.id') IS NOT id"
        ).fetchone()[0]
        ok = conn.execute("PRAGMA integrity_check").fetchone()[0]
    assert len(stored) == len(set(stored)) == FRAME_RECORDS
    assert set(stored) == set(ids)
    assert half == 0
    assert ok == "ok"
    assert _work_indexes(db) == expected  # rebuilt at the start of the rerun


_SLOW_SUBMIT = """
    import sys, time
    import labeling.labels as labels
    from db.engine import make_engine
    from labeling.schema import load_schema
    from labeling.settings import DEFAULT_SCHEMA
    from tests.factories import answers_for

    def stall(*args, **kwargs):
        # the Label row is inserted and the lease dropped, but nothing is committed yet
        print("IN-TRANSACTION", flush=True)
        time.sleep(600)

    labels.reevaluate_work = stall
    url, cid, wid, uid = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    schema = load_schema(DEFAULT_SCHEMA)
    labels.submit_label(
        make_engine(url), campaign_id=cid, work_id=wid, user_id=uid,
        answers=answers_for(schema), schema_hash=schema.hash, scores_visible=True,
        model_version="m", time_on_item_ms=1, submission_id="killed-1", schema=schema,
    )
"""

_SUBMIT = """
    import sys
    from db.engine import make_engine
    from labeling.labels import submit_label
    from labeling.schema import load_schema
    from labeling.settings import DEFAULT_SCHEMA
    from tests.factories import answers_for

    url, cid, wid, uid = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    schema = load_schema(DEFAULT_SCHEMA)
    res = submit_label(
        make_engine(url, busy_timeout_ms=5000), campaign_id=cid, work_id=wid, user_id=uid,
        answers=answers_for(schema, 1), schema_hash=schema.hash, scores_visible=True,
        model_version="m", time_on_item_ms=1, submission_id="after-1", schema=schema,
    )
    print(res.label_id, res.created)
"""


def test_sigkill_during_submit_leaves_no_label_and_the_lease_returns(sqlite_url: str) -> None:
    """A submit killed inside its transaction writes nothing; the lease expires and is reused."""
    engine = make_engine(sqlite_url, busy_timeout_ms=5000)
    (wid,) = add_works(engine, 1)
    camp = create_campaign(engine, name="kill", overlap=1, lease_seconds=600)
    ann1, ann2 = add_user(engine, "ann1"), add_user(engine, "ann2")
    claim = claim_next(engine, camp.id, ann1)
    assert claim is not None and claim.work_id == wid

    child = subprocess.Popen(
        _python(_SLOW_SUBMIT, sqlite_url, str(camp.id), wid, str(ann1)),
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        line = child.stdout.readline()
        assert line.strip() == "IN-TRANSACTION", child.stderr.read()
        with sqlite3.connect(f"file:{engine.url.database}?mode=ro", uri=True) as conn:
            assert conn.execute("SELECT count(*) FROM labels").fetchone()[0] == 0  # not yet
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        child.stdout.close()
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL

    with read_session(engine) as session:
        assert session.execute(select(func.count()).select_from(Label)).scalar_one() == 0
        item = session.execute(select(CampaignItem.n_labels, CampaignItem.done)).one()
        assert tuple(item) == (0, False)
        lease = session.execute(select(Lease.user_id, Lease.work_id, Lease.expires_at)).one()
    assert tuple(lease) == (ann1, wid, claim.expires_at)  # the lease was not dropped

    # still ann1's until it expires: ann1 gets it back, ann2 gets nothing
    again = claim_next(engine, camp.id, ann1)
    assert again is not None and again.work_id == wid and again.resumed
    assert claim_next(engine, camp.id, ann2) is None
    with read_session(engine) as session:
        expires = session.execute(select(Lease.expires_at)).scalar_one()
    # after expiry another annotator can claim it, and the database is not locked
    taken = claim_next(engine, camp.id, ann2, now=expires + timedelta(seconds=1))
    assert taken is not None and taken.work_id == wid and taken.user_id == ann2
    # claim_next at a fake future time: move the new lease's expiry into the real future
    with engine.begin() as conn:
        conn.execute(text("UPDATE leases SET expires_at = :e"), {"e": taken.expires_at})
    done = subprocess.run(
        _python(_SUBMIT, sqlite_url, str(camp.id), wid, str(ann2)),
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[1] == "True"
    with read_session(engine) as session:
        rows = session.execute(select(Label.user_id, Label.submission_id)).all()
        assert session.execute(select(CampaignItem.done)).scalar_one() is True
    assert [tuple(r) for r in rows] == [(ann2, "after-1")]
    engine.dispose()


def test_read_only_database_on_submit(
    sqlite_url: str, schema: Schema, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Submitting to a read-only database raises a clear error; nothing is recorded."""
    engine = make_engine(sqlite_url)
    (wid,) = add_works(engine, 1)
    camp = create_campaign(engine, name="ro", overlap=1)
    uid = add_user(engine, "ann")
    claim = claim_next(engine, camp.id, uid)
    assert claim is not None
    # make_engine makes the parent directory of the URL's database, which for a URI filename
    # is a relative "file:..." path: keep that out of the repository.
    monkeypatch.chdir(tmp_path)
    ro = make_engine(f"sqlite:///file:{engine.url.database}?mode=ro&uri=true", busy_timeout_ms=2000)
    with pytest.raises(OperationalError, match="readonly"):
        submit_label(
            ro, campaign_id=camp.id, work_id=wid, user_id=uid, answers=answers_for(schema),
            schema_hash=schema.hash, scores_visible=True, model_version="m",
            time_on_item_ms=1, submission_id="ro-1", schema=schema,
        )  # fmt: skip
    ro.dispose()
    with read_session(engine) as session:
        assert session.execute(select(func.count()).select_from(Label)).scalar_one() == 0
        assert session.execute(select(CampaignItem.n_labels)).scalar_one() == 0
        assert session.execute(select(Lease.user_id)).scalar_one() == uid  # still held
    # once writable again the same submission is saved, exactly once
    res = submit_label(
        engine, campaign_id=camp.id, work_id=wid, user_id=uid, answers=answers_for(schema),
        schema_hash=schema.hash, scores_visible=True, model_version="m", time_on_item_ms=1,
        submission_id="ro-1", schema=schema,
    )  # fmt: skip
    assert res.created
    with read_session(engine) as session:
        assert session.execute(select(func.count()).select_from(Label)).scalar_one() == 1
    engine.dispose()


@pytest.mark.pg
def test_postgres_connections_killed_then_submit_reconnects(pg_url: str, schema: Schema) -> None:
    """Server-side connections terminated (as by a restart): the next submit reconnects."""
    engine = make_engine(pg_url)
    (wid,) = add_works(engine, 1)
    camp = create_campaign(engine, name="pg", overlap=1)
    uid = add_user(engine, "ann")
    claim = claim_next(engine, camp.id, uid)
    assert claim is not None
    with read_session(engine) as session:  # the pool now holds an open server connection
        assert session.execute(select(func.count()).select_from(Work)).scalar_one() == 1
    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        killed = conn.execute(text(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )).all()  # fmt: skip
    assert killed and all(r[0] for r in killed)
    res = submit_label(
        engine, campaign_id=camp.id, work_id=wid, user_id=uid, answers=answers_for(schema),
        schema_hash=schema.hash, scores_visible=True, model_version="m", time_on_item_ms=1,
        submission_id="pg-1", schema=schema,
    )  # fmt: skip
    assert res.created
    with admin.connect() as conn:
        n = conn.execute(
            text("SELECT count(*) FROM labels WHERE work_id = :w AND submission_id = 'pg-1'"),
            {"w": wid},
        ).scalar_one()
    assert n == 1
    admin.dispose()
    engine.dispose()
