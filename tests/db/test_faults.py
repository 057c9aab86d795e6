"""Faults with real processes: SIGKILL mid-import and mid-submit, read-only DB, PG restarts."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import Engine, create_engine, event, func, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from db.engine import make_engine, read_session
from db.faults import StorageFull, StorageReadOnly
from db.indexes import DEFERRED
from db.models import CampaignItem, Label, Lease, StatusEvent, Work
from db.types import unpack_json
from labeling.frames.synth import write_synthetic_frame
from labeling.review.campaigns import create_campaign
from labeling.review.labels import LabelResult, LabelSubmission, submit_label
from labeling.review.queue import claim_next
from labeling.schema import Schema
from tests.factories import add_user, add_works, answers_for

ROOT = Path(__file__).parents[2]
FRAME_RECORDS = 20_000  # ~60 MB: above PARALLEL_MIN_BYTES, so indexes are deferred
BATCH = 1_000


def _cli(url: str, *args: str) -> list[str]:
    """The command line of `labeling --db url args...` run by this interpreter."""
    return [sys.executable, "-c", "from labeling.cli.main import main; main()", "--db", url, *args]


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


def _ours(tmp: Path) -> list[Path]:
    """What the tool left in a temporary directory, SQLite's own temporary files aside.

    SQLite names them etilqs_* and unlinks each right after opening it; one was found left
    behind once in CI after the SIGKILL (most likely killed between the two), which is
    neither the tool's file nor the tool's to remove.
    """
    return [p for p in tmp.iterdir() if not p.name.startswith("etilqs_")]


@pytest.mark.slow
def test_sigkill_during_import_then_rerun_completes(tmp_path: Path) -> None:
    """Kill -9 a large import after some batches; the rerun imports every id exactly once."""
    frame = tmp_path / "frame.jsonl"
    write_synthetic_frame(frame, FRAME_RECORDS, workers=1)
    db = tmp_path / "labeling.db"
    url = f"sqlite:///{db}"
    args = _cli(url, "import-frame", str(frame), "--batch-size", str(BATCH))
    staging = tmp_path / "tmp"  # where the workers stage their rows (db/staging.py)
    staging.mkdir()
    env = {**os.environ, "TMPDIR": str(staging)}
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, env=env)  # fmt: skip
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
    # The bulk load ran in the rollback journal (db/wal.py), or in the WAL when this test's
    # polling had the file open as it switched. Either way a read-write connection finds
    # the file whole, rolling any unfinished batch back first.
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    killed_at = _works(db)
    assert 3 * BATCH <= killed_at < FRAME_RECORDS
    assert killed_at % BATCH == 0  # whole batches only
    expected = {idx.name for idx in Work.__table__.indexes}
    assert _work_indexes(db) == expected - DEFERRED  # the bulk load had dropped those

    assert [p.name[:16] for p in _ours(staging)] == ["labeling-import-"]  # left behind
    rerun = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert _ours(staging) == []  # the killed import's removed, the rerun's too
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert f"{FRAME_RECORDS - killed_at} inserted" in rerun.stdout
    assert f"{killed_at} unchanged" in rerun.stdout

    ids = [orjson.loads(line)["id"] for line in frame.read_bytes().splitlines() if line.strip()]
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT id, record, record_hash FROM works").fetchall()
        ok = conn.execute("PRAGMA integrity_check").fetchone()[0]
    stored = [r[0] for r in rows]
    # Each record whole (packed, db/types.py) and its own line: the one whose id it has.
    half = sum(
        1 for work_id, record, digest in rows
        if record is None or digest is None or len(digest) != 64
        or orjson.loads(unpack_json(record))["id"] != work_id
    )  # fmt: skip
    assert len(stored) == len(set(stored)) == FRAME_RECORDS
    assert set(stored) == set(ids)
    assert half == 0
    assert ok == "ok"
    assert _work_indexes(db) == expected  # rebuilt at the start of the rerun
    with closing(sqlite3.connect(db)) as conn:  # the rerun's engine turned the WAL back on
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


_STALLED_BULK_LOAD = """
    import sys, time
    import labeling.frames.batch_writer as batch_writer
    import labeling.frames.importer as importer
    from db.engine import make_engine
    from labeling.schema import load_schema
    from labeling.settings import DEFAULT_SCHEMA
    url, frame, marker = sys.argv[1:4]
    importer.PARALLEL_MIN_BYTES = 0  # a bulk load (rollback journal) whatever the file's size
    write, calls = batch_writer.write_batch, []
    def stall(conn, *args, **kwargs):
        written = write(conn, *args, **kwargs)
        calls.append(1)
        if len(calls) == 3:  # the third batch written, not committed: wait to be killed
            open(marker, "w").close()
            time.sleep(120)
        return written
    batch_writer.write_batch = stall
    importer.import_frame(make_engine(url), frame, load_schema(DEFAULT_SCHEMA),
                          batch_size=1000, progress=False, workers=0)
"""


@pytest.mark.slow
def test_sigkill_during_a_bulk_load_in_the_rollback_journal(tmp_path: Path) -> None:
    """Killed with a batch written but not committed, in the rollback journal (nothing else
    has the file open): the file stays in rollback mode; a read-write connection rolls the
    batch back; the next engine turns the WAL on again, and the committed batches stay."""
    frame = tmp_path / "frame.jsonl"
    write_synthetic_frame(frame, 5_000, workers=1)
    db = tmp_path / "labeling.db"
    url = f"sqlite:///{db}"
    subprocess.run(_cli(url, "init"), cwd=ROOT, check=True, capture_output=True, timeout=120)
    marker = tmp_path / "stalled"
    proc = subprocess.Popen(_python(_STALLED_BULK_LOAD, url, str(frame), str(marker)), cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.exists(), f"the load did not stall: {proc.stderr.read()}"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stderr.close()

    with closing(sqlite3.connect(db)) as conn:  # no engine: the file as the kill left it
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal"
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT count(*) FROM works").fetchone()[0] == 2_000
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar_one() == "wal"
            assert conn.exec_driver_sql("SELECT count(*) FROM works").scalar_one() == 2_000
    finally:
        engine.dispose()


_SLOW_SUBMIT = """
    import sys, time
    import labeling.review.labels as labels
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
    labels.submit_label(make_engine(url), labels.LabelSubmission(
        campaign_id=cid, work_id=wid, user_id=uid,
        answers=answers_for(schema), schema_hash=schema.hash, scores_visible=True,
        model_version="m", time_on_item_ms=1, submission_id="killed-1",
    ), schema=schema)
"""

_SUBMIT = """
    import sys
    from db.engine import make_engine
    from labeling.review.labels import LabelSubmission, submit_label
    from labeling.schema import load_schema
    from labeling.settings import DEFAULT_SCHEMA
    from tests.factories import answers_for

    url, cid, wid, uid = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    schema = load_schema(DEFAULT_SCHEMA)
    res = submit_label(make_engine(url, busy_timeout_ms=5000), LabelSubmission(
        campaign_id=cid, work_id=wid, user_id=uid,
        answers=answers_for(schema, 1), schema_hash=schema.hash, scores_visible=True,
        model_version="m", time_on_item_ms=1, submission_id="after-1",
    ), schema=schema)
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
    with pytest.raises(StorageReadOnly, match="^Not saved: the database is read-only .*readonly"):
        submit_label(ro, LabelSubmission(
            campaign_id=camp.id, work_id=wid, user_id=uid, answers=answers_for(schema),
            schema_hash=schema.hash, scores_visible=True, model_version="m", time_on_item_ms=1,
            submission_id="ro-1",
        ), schema=schema)  # fmt: skip
    ro.dispose()
    with read_session(engine) as session:
        assert session.execute(select(func.count()).select_from(Label)).scalar_one() == 0
        assert session.execute(select(CampaignItem.n_labels)).scalar_one() == 0
        assert session.execute(select(Lease.user_id)).scalar_one() == uid  # still held
    # once writable again the same submission is saved, exactly once
    res = submit_label(engine, LabelSubmission(
        campaign_id=camp.id, work_id=wid, user_id=uid, answers=answers_for(schema),
        schema_hash=schema.hash, scores_visible=True, model_version="m", time_on_item_ms=1,
        submission_id="ro-1",
    ), schema=schema)  # fmt: skip
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
    res = submit_label(engine, LabelSubmission(
        campaign_id=camp.id, work_id=wid, user_id=uid, answers=answers_for(schema),
        schema_hash=schema.hash, scores_visible=True, model_version="m", time_on_item_ms=1,
        submission_id="pg-1",
    ), schema=schema)  # fmt: skip
    assert res.created
    with admin.connect() as conn:
        n = conn.execute(
            text("SELECT count(*) FROM labels WHERE work_id = :w AND submission_id = 'pg-1'"),
            {"w": wid},
        ).scalar_one()
    assert n == 1
    admin.dispose()
    engine.dispose()


# ------------------------------------------------------------------ full disk, read-only storage


def _submit(engine: Engine, schema: Schema, camp: int, wid: str, uid: int, sid: str,
            note: str | None = None) -> LabelResult:  # fmt: skip
    """submit_label with complete answers and an optional (large) note."""
    return submit_label(engine, LabelSubmission(
        campaign_id=camp, work_id=wid, user_id=uid, answers=answers_for(schema),
        schema_hash=schema.hash, scores_visible=True, model_version="m", time_on_item_ms=1,
        submission_id=sid, note=note,
    ), schema=schema)  # fmt: skip


def _trace(engine: Engine, wid: str) -> dict[str, Any]:
    """Everything a submit on `wid` writes: its labels, counts, status, events and lease."""
    with read_session(engine) as session:
        item = session.execute(
            select(CampaignItem.n_labels, CampaignItem.done).where(CampaignItem.work_id == wid)
        ).one()
        return {
            "labels": session.execute(
                select(func.count()).select_from(Label).where(Label.work_id == wid)
            ).scalar_one(),
            "item": tuple(item),
            "status": session.execute(select(Work.status).where(Work.id == wid)).scalar_one(),
            "events": session.execute(
                select(func.count()).select_from(StatusEvent).where(StatusEvent.work_id == wid)
            ).scalar_one(),
            "lease": session.execute(
                select(Lease.user_id).where(Lease.work_id == wid)
            ).scalar_one_or_none(),
        }


def _integrity(path: str | Path) -> str:
    with sqlite3.connect(path) as conn:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]


class ConnectPragma:
    """Runs a PRAGMA on every new connection of an engine, until lifted.

    "max_page_count = N" makes SQLite fail a write that needs more pages with SQLITE_FULL
    ("database or disk is full"), exactly as on a full disk; "query_only = ON" fails every
    write with SQLITE_READONLY. The engine's pool is emptied so the pragma applies at once.
    """

    def __init__(self, engine: Engine, pragma: str) -> None:
        self.engine, self.pragma = engine, pragma
        event.listen(engine, "connect", self._apply)
        engine.dispose()

    def _apply(self, dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.execute(f"PRAGMA {self.pragma}")

    def lift(self) -> None:
        """Remove the pragma (as when an admin frees disk space or remounts read-write)."""
        event.remove(self.engine, "connect", self._apply)
        self.engine.dispose()


def cap_pages(engine: Engine, extra_pages: int) -> ConnectPragma:
    """Cap a SQLite database at its current size plus `extra_pages` pages."""
    with engine.connect() as conn:
        pages = conn.exec_driver_sql("PRAGMA page_count").scalar_one() + extra_pages
    return ConnectPragma(engine, f"max_page_count = {int(pages)}")


def test_disk_full_on_submit_records_nothing_then_the_retry_saves_once(
    sqlite_url: str, schema: Schema
) -> None:
    """SQLITE_FULL mid-submit: a clear StorageFull, no trace of the label, the lease kept."""
    engine = make_engine(sqlite_url, busy_timeout_ms=5000)
    wids = add_works(engine, 60)
    camp = create_campaign(engine, name="full", overlap=1)
    uid = add_user(engine, "ann")
    cap = cap_pages(engine, extra_pages=12)
    note = "a long note that needs overflow pages. " * 150  # ~6 KB: about two new pages
    saved: list[str] = []
    failure: tuple[str, StorageFull] | None = None
    for i in range(len(wids)):  # label until the database is full
        claim = claim_next(engine, camp.id, uid)
        assert claim is not None
        before = _trace(engine, claim.work_id)
        try:
            _submit(engine, schema, camp.id, claim.work_id, uid, f"full-{i}", note)
        except StorageFull as exc:
            failure = (claim.work_id, exc)
            break
        saved.append(claim.work_id)
    assert failure is not None, "the page cap never filled the database"
    wid, exc = failure
    assert 1 <= len(saved) < len(wids)  # some labels fitted before the disk filled up
    assert str(exc).startswith("Not saved: the database's disk is full (database or disk is full")
    assert isinstance(exc.__cause__, OperationalError)
    after = _trace(engine, wid)
    assert after == before  # no label, counts, status or event; the lease is still held
    assert after["labels"] == 0 and after["lease"] == uid
    assert _trace(engine, saved[-1])["labels"] == 1
    with pytest.raises(StorageFull):  # still full: still refused, still nothing written
        _submit(engine, schema, camp.id, wid, uid, f"full-{len(saved)}", note)
    assert _trace(engine, wid) == before

    cap.lift()
    res = _submit(engine, schema, camp.id, wid, uid, f"full-{len(saved)}", note)
    assert res.created and res.version == 1
    again = _submit(engine, schema, camp.id, wid, uid, f"full-{len(saved)}", note)
    assert not again.created and again.label_id == res.label_id  # a double click adds nothing
    done = _trace(engine, wid)
    assert done["labels"] == 1 and done["item"] == (1, True) and done["lease"] is None
    with read_session(engine) as session:
        total = session.execute(select(func.count()).select_from(Label)).scalar_one()
    assert total == len(saved) + 1
    assert _integrity(engine.url.database) == "ok"
    engine.dispose()


_FULL_SUBMIT = """
    import os, resource, signal, sys
    from db.engine import make_engine
    from labeling.review.labels import LabelSubmission, submit_label
    from labeling.schema import load_schema
    from labeling.settings import DEFAULT_SCHEMA
    from db.faults import StorageError
    from tests.factories import answers_for

    url, cid, wid, uid, limit = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), \\
        int(sys.argv[5])
    schema = load_schema(DEFAULT_SCHEMA)
    engine = make_engine(url, busy_timeout_ms=5000)
    if limit:  # no file of this process may grow past `limit` bytes: writes get EFBIG/short
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        submit_label(engine, LabelSubmission(
            campaign_id=cid, work_id=wid, user_id=uid, answers=answers_for(schema),
            schema_hash=schema.hash, scores_visible=True, model_version="m", time_on_item_ms=1,
            submission_id="nospace-1", note="x" * 200_000,
        ), schema=schema)
    except StorageError as exc:
        print(type(exc).__name__, exc, flush=True)
        sys.exit(3)
    print("SAVED", flush=True)
"""
FSIZE_LIMIT = 40_000  # above the 32 KB -shm file, below the WAL that a 200 KB note needs


@contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tiny tmpfs mounted at `path` (skips the test where mounting is not permitted)."""
    path.mkdir()
    if os.geteuid() != 0:
        pytest.skip("a real full filesystem needs a tmpfs mount, which needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(directory: Path) -> Path:
    """Fill the filesystem of `directory` to the last byte with one file; return its path."""
    filler = directory / "filler"
    with filler.open("wb", buffering=0) as fh:
        for size in (1 << 16, 512, 1):
            try:
                while True:
                    fh.write(b"\0" * size)
            except OSError as exc:
                assert exc.errno in (errno.ENOSPC, errno.EFBIG), exc
    return filler


@pytest.mark.parametrize("how", ["rlimit", "tmpfs"])
def test_out_of_space_in_a_real_process(
    how: str, sqlite_template: Path, tmp_path: Path, schema: Schema
) -> None:
    """A submit that runs out of space for real: StorageFull, intact database, then saved once.

    rlimit: RLIMIT_FSIZE in the child (any user); tmpfs: a filesystem with no byte left.
    """
    with ExitStack() as stack:
        base = stack.enter_context(_tmpfs(tmp_path / "disk", "4m")) if how == "tmpfs" else tmp_path
        db = base / "labeling.db"
        shutil.copyfile(sqlite_template, db)
        url = f"sqlite:///{db}"
        engine = make_engine(url, busy_timeout_ms=5000)
        (wid,) = add_works(engine, 1)
        camp = create_campaign(engine, name="nospace", overlap=1)
        uid = add_user(engine, "ann")
        assert claim_next(engine, camp.id, uid) is not None
        before = _trace(engine, wid)
        # An open connection keeps the -shm file; an empty WAL makes the submit's own
        # pages the only thing that needs new space.
        keeper = stack.enter_context(closing(sqlite3.connect(db)))
        keeper.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        filler = _fill(base) if how == "tmpfs" else None
        limit = FSIZE_LIMIT if how == "rlimit" else 0

        args = _python(_FULL_SUBMIT, url, str(camp.id), wid, str(uid), str(limit))
        child = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert child.returncode == 3, (child.stdout, child.stderr[-2000:])
        # ENOSPC is SQLITE_FULL; EFBIG (a file size limit) only reaches SQLite as a write error.
        expected = {
            "tmpfs": "StorageFull Not saved: the database's disk is full "
            "(database or disk is full)",
            "rlimit": "StorageError Not saved: the database could not write to its disk "
            "(disk I/O error, SQLITE_IOERR_WRITE)",
        }[how]
        assert child.stdout.strip() == expected
        assert "Traceback" not in child.stderr
        assert _integrity(db) == "ok"
        assert _trace(engine, wid) == before  # nothing half-written; the lease still held

        if filler is not None:
            filler.unlink()  # space freed: the same submission goes through, once
        again = subprocess.run(
            _python(_FULL_SUBMIT, url, str(camp.id), wid, str(uid), "0"),
            cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert again.returncode == 0 and again.stdout.strip() == "SAVED", again.stderr[-2000:]
        after = _trace(engine, wid)
        assert after["labels"] == 1 and after["item"] == (1, True) and after["lease"] is None
        assert _integrity(db) == "ok"
        engine.dispose()


@pytest.mark.pg
def test_postgres_read_only_database_on_submit(pg_url: str, schema: Schema) -> None:
    """A read-only PostgreSQL database (SQLSTATE 25006): StorageReadOnly, nothing recorded."""
    engine = make_engine(pg_url)
    (wid,) = add_works(engine, 1)
    camp = create_campaign(engine, name="pg-ro", overlap=1)
    uid = add_user(engine, "ann")
    assert claim_next(engine, camp.id, uid) is not None
    before = _trace(engine, wid)
    name = make_url(pg_url).database
    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:  # as on a standby, or a database an admin froze
        conn.execute(text(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on'))
    engine.dispose()  # new sessions pick the setting up
    with pytest.raises(StorageReadOnly, match="^Not saved: the database is read-only .*read-only"):
        _submit(engine, schema, camp.id, wid, uid, "pg-ro-1")
    assert _trace(engine, wid) == before
    with admin.connect() as conn:
        conn.execute(text(f'ALTER DATABASE "{name}" RESET default_transaction_read_only'))
    engine.dispose()
    assert _submit(engine, schema, camp.id, wid, uid, "pg-ro-1").created
    assert not _submit(engine, schema, camp.id, wid, uid, "pg-ro-1").created
    assert _trace(engine, wid)["labels"] == 1
    admin.dispose()
    engine.dispose()


def test_storage_faults_are_told_apart_from_other_errors() -> None:
    """The one classifier: SQLite result codes and PostgreSQL SQLSTATEs; other errors pass."""
    import psycopg.errors

    from db.faults import StorageError, storage_errors, storage_fault

    def wrapped(orig: Exception) -> OperationalError:
        return OperationalError("INSERT INTO labels ...", {}, orig)

    full = sqlite3.OperationalError("database or disk is full")
    assert storage_fault(wrapped(full)) is StorageFull
    assert storage_fault(sqlite3.OperationalError("attempt to write a readonly database")) is (
        StorageReadOnly
    )
    assert storage_fault(wrapped(psycopg.errors.DiskFull("could not extend file"))) is StorageFull
    assert storage_fault(wrapped(psycopg.errors.ReadOnlySqlTransaction("read-only"))) is (
        StorageReadOnly
    )
    for other in (sqlite3.OperationalError("database is locked"),
                  psycopg.errors.SerializationFailure("could not serialize"),
                  psycopg.errors.QueryCanceled("statement timeout")):  # fmt: skip
        assert storage_fault(wrapped(other)) is None
        with pytest.raises(OperationalError), storage_errors("Not saved"):
            raise wrapped(other)
    with pytest.raises(StorageFull) as caught, storage_errors("Not saved"):
        raise wrapped(psycopg.errors.DiskFull('could not extend file "base/1/2"\nDETAIL: x'))
    assert str(caught.value) == (
        'Not saved: the database\'s disk is full (could not extend file "base/1/2")'
    )
    assert isinstance(caught.value, StorageError)


# ------------------------------------------------------------------ the label page on bad storage


@pytest.fixture
def label_page_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The app on a fresh label database (offline abstracts), clicks as fast as AppTest likes."""
    import streamlit as st

    from labeling.database import dispose_all
    from labeling.review import flow as session
    from labeling.settings import get_settings
    from tests.pages.test_label_page import build_label_db

    url = f"sqlite:///{tmp_path / 'label.db'}"
    monkeypatch.setenv("LABELING_DB_URL", url)
    monkeypatch.setenv("LABELING_OPENALEX_OFFLINE", "true")
    monkeypatch.setattr(session, "MIN_DWELL", 0.0)
    get_settings.cache_clear()
    st.cache_resource.clear()
    session.forget_progress()
    build_label_db(url, tmp_path)
    yield url
    st.cache_resource.clear()
    get_settings.cache_clear()
    dispose_all()


@pytest.mark.parametrize("fault", ["disk full", "read-only"])
def test_label_page_says_not_saved_and_keeps_the_answers(
    label_page_db: str, fault: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A submit on a full disk or a read-only database: a plain error, the form as it was."""
    from labeling.database import get_engine
    from tests.label_page import Browser, first_answers, form
    from tests.pages.test_label_page import labels, login

    browser = Browser(monkeypatch)
    at = login("annotator")
    shown = form(at)
    typed = dict(first_answers(shown), categories=["Metaresearch", "Bibliometrics"])
    note = "Checked the venue and the funder list; " * 500  # ~19.5 KB: more than a page
    engine = get_engine(label_page_db)
    with closing(sqlite3.connect(engine.url.database, isolation_level=None)) as conn:
        conn.execute("VACUUM")  # no free pages left: the note must grow the file
    storage = cap_pages(engine, 0) if fault == "disk full" else ConnectPragma(
        engine, "query_only = ON")  # fmt: skip

    browser.submit(at, typed, confidence=3, flagged=True, note=note)
    data = form(at)
    reason = "the database's disk is full" if fault == "disk full" else "the database is read-only"
    assert data["message"]["kind"] == "error" and data["ack_ok"] is False
    assert f"Not saved: {reason}" in data["message"]["text"]
    assert "Nothing was recorded and your answers are kept here" in data["message"]["text"]
    assert "Traceback" not in data["message"]["text"]
    assert labels(label_page_db) == []
    assert data["work_id"] == shown["work_id"]  # the same work, the answers as sent
    draft = data["draft"]
    assert (draft["answers"], draft["confidence"], draft["flagged"], draft["note"]) == (
        typed,
        3,
        True,
        note,
    )

    storage.lift()
    browser.submit(at, typed, confidence=3, flagged=True, note=note)
    (label,) = labels(label_page_db)
    assert (label.work_id, label.note, label.confidence, label.flagged) == (
        shown["work_id"], note.strip(), 3, True)  # fmt: skip
    assert label.answers == typed
    assert form(at)["message"]["kind"] == "success" and form(at)["work_id"] != shown["work_id"]
