"""Parallel gold-set export: byte-identical files, one shared snapshot, failures and cleanup."""

from __future__ import annotations

import multiprocessing as mp
import os
import sqlite3
import sys
import time
import types
from collections.abc import Iterator
from concurrent.futures.process import BrokenProcessPool
from contextlib import ExitStack, closing
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import Engine, insert, select, update
from sqlalchemy.exc import DBAPIError

from db.engine import (
    EngineSpec,
    engine_spec,
    is_sqlite,
    make_engine,
    shared_snapshot,
    write_session,
)
from db.models import Campaign, CampaignItem, Label, User, Work, utcnow
from labeling.export import parallel as export_parallel
from labeling.export import plan as export_plan
from labeling.export.gold_set import ExportFilters, export_gold
from labeling.export.parallel import WorkerError, iter_tables_parallel
from labeling.export.plan import plan_export
from labeling.frames.importer import import_frame
from labeling.schema import Schema
from labeling.vocabulary import STATUS_UNVALIDATED, STATUS_VALIDATED
from tests.conftest import make_record, write_jsonl
from tests.factories import add_user, answers_for

N_WORKS, N_VALIDATED = 240, 200
IDS = [f"W{i:04d}" for i in range(1, N_WORKS + 1)]
TITLES = {"W0003": '=HYPERLINK("http://x","y")', "W0077": "Quotes \"in\", commas,\nnewline",
          "W0150": "-minus first", "W0199": "日本語 \u2028 separator"}  # fmt: skip
SMALL = {"chunk_size": 20, "threshold": 1, "range_size": 20}  # ten ranges of one chunk


def chunks_of(
    engine: Engine, schema: Schema, filters: ExportFilters, processes: int, **kw: Any
) -> Iterator[Any]:
    """iter_tables_parallel over a plan of these filters (kw: plan_export's options)."""
    plan = plan_export(engine, schema, fmt="parquet", filters=filters, processes=processes, **kw)
    return iter_tables_parallel(engine, plan)


@pytest.fixture
def many(engine: Engine, schema: Schema, seed_record: dict, tmp_path: Path) -> Engine:
    """240 works from the seed record; the first 200 validated with two labels each."""
    records = [make_record(seed_record, w, title=TITLES.get(w, f"Title {w}")) for w in IDS]
    import_frame(engine, write_jsonl(tmp_path / "frame.jsonl", records), schema)
    users = [add_user(engine, name) for name in ("alice", "=bob")]
    now = utcnow()
    with write_session(engine) as session:
        campaign = insert(Campaign).values(name="main", strategy="manual", overlap=2)
        cid = session.execute(campaign.values(created_at=now)).inserted_primary_key[0]
        via = f"rule:unanimous:k=2:c{cid}"
        items, labels = [], []
        for pos, wid in enumerate(IDS[:N_VALIDATED], start=1):
            answers = answers_for(schema, pos % 3)
            item = {"position": pos, "n_labels": 2, "done": True, "is_gold": False}
            items.append({"campaign_id": cid, "work_id": wid, **item})
            label = {"version": 1, "answers": answers, "skipped": False, "flagged": False}
            label |= {"model_version": "m", "time_on_item_ms": 1000 + pos, "source": "app"}
            label |= {"created_at": now, "schema_hash": schema.hash, "scores_visible": True}
            labels += [{"campaign_id": cid, "work_id": wid, "user_id": u, **label} for u in users]
            done = {"status": STATUS_VALIDATED, "final_answers": answers, "validated_via": via}
            session.execute(update(Work).where(Work.id == wid).values(**done))
        session.execute(insert(CampaignItem), items)
        session.execute(insert(Label), labels)
    return engine


@pytest.fixture
def small_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers for any export, over ranges of two chunks of 20 works."""
    monkeypatch.setattr(export_plan, "THRESHOLD", 1)
    monkeypatch.setattr(export_plan, "RANGE_SIZE", 40)


@pytest.fixture
def pids(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A folder where every worker notes its pid (through the worker hook)."""
    folder = tmp_path / "pids"
    folder.mkdir()
    monkeypatch.setattr(export_parallel, "WORKER_HOOK", partial(note_pid, folder, None, 0))
    yield folder


def note_pid(folder: Path, fail_at: int | None, exit_code: int, idx: int) -> None:
    """Worker hook: note the worker's pid; at range `fail_at`, fail (or exit if exit_code)."""
    (folder / str(os.getpid())).touch()
    if idx == fail_at:
        if exit_code:
            os._exit(exit_code)
        raise RuntimeError(f"injected failure in range {idx}")


def worker_pids(folder: Path) -> set[int]:
    """The pids the workers noted, after checking none is this process."""
    found = {int(p.name) for p in folder.iterdir()}
    assert os.getpid() not in found
    return found


def _running(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


def assert_gone(found: set[int]) -> None:
    """Every process in `found` has ended (within a few seconds), and no child is left."""
    deadline = time.monotonic() + 10
    alive = set(found)
    while alive and time.monotonic() < deadline:
        alive = {pid for pid in alive if _running(pid)}
        time.sleep(0.05)
    assert not alive
    assert mp.active_children() == []


def _rows(chunks: Iterator[Any]) -> list[dict[str, Any]]:
    """Every row of a stream of chunks, in order."""
    return [row for chunk in chunks for row in chunk.table.to_pylist()]


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_parallel_files_are_byte_identical(
    many: Engine, schema: Schema, tmp_path: Path, fmt: str, small_ranges: None, pids: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    kw: dict[str, Any] = {"fmt": fmt, "long": True, "pseudonymize": True, "chunk_size": 20}
    one = export_gold(many, schema, tmp_path / f"one.{fmt}", processes=1, **kw)
    assert not list(pids.iterdir())  # processes=1 builds here
    two = export_gold(many, schema, tmp_path / f"two.{fmt}", processes=2, **kw)
    assert len(worker_pids(pids)) == 2  # both workers built ranges
    assert one.row_count == two.row_count == N_VALIDATED
    assert one.long_rows == two.long_rows > 0
    assert (one.sha256, one.long_sha256) == (two.sha256, two.long_sha256)
    assert one.counts == two.counts
    assert (tmp_path / f"one.{fmt}").read_bytes() == (tmp_path / f"two.{fmt}").read_bytes()
    monkeypatch.setattr(export_plan, "RANGE_SIZE", 50)  # rounded down to whole chunks
    everything = ExportFilters(status="all")
    a = export_gold(many, schema, tmp_path / f"a.{fmt}", filters=everything, processes=1, **kw)
    b = export_gold(many, schema, tmp_path / f"b.{fmt}", filters=everything, processes=3, **kw)
    assert a.row_count == b.row_count == N_WORKS
    assert (a.sha256, a.long_sha256) == (b.sha256, b.long_sha256)
    assert_gone(worker_pids(pids))


def test_chunks_are_the_ones_of_one_process(many: Engine, schema: Schema, pids: Path) -> None:
    everything, kw = ExportFilters(status="all"), {"pseudonymize": True, "long": True}
    one = list(chunks_of(many, schema, everything, 1, chunk_size=20, **kw))
    two = list(chunks_of(many, schema, everything, 2, **SMALL, **kw))
    assert len(worker_pids(pids)) == 2
    assert [c.table.num_rows for c in one] == [c.table.num_rows for c in two] == [20] * 12
    for a, b in zip(one, two, strict=True):
        assert a.table.equals(b.table) and a.table.schema == b.table.schema
        assert (a.labels, a.stale) == (b.labels, b.stale)
    assert sum(len(c.labels) for c in two) > 0


def test_small_exports_start_no_workers(many: Engine, schema: Schema, pids: Path) -> None:
    rows = _rows(chunks_of(many, schema, ExportFilters(), 2, chunk_size=20))
    assert len(rows) == N_VALIDATED
    assert not list(pids.iterdir())


def test_workers_share_the_snapshot(many: Engine, schema: Schema, pids: Path) -> None:
    filters = ExportFilters()
    before = _rows(chunks_of(many, schema, filters, 1, chunk_size=20))
    chunks = chunks_of(many, schema, filters, 2, **SMALL)
    first = next(chunks)  # the snapshot is shared; later ranges are not built yet
    started = time.monotonic()
    with write_session(many) as session:  # commits while the workers build
        session.execute(update(Work).where(Work.id.in_(["W0190", "W0020"]))
                        .values(title="changed"))  # fmt: skip
        session.execute(update(Work).where(Work.id == "W0170").values(status=STATUS_UNVALIDATED))
        session.execute(update(Work).where(Work.id == "W0220").values(
            status=STATUS_VALIDATED, final_answers=answers_for(schema, 1),
            validated_via="rule:unanimous:k=2:c1"))  # fmt: skip
        session.execute(insert(User).values(name="late", role="lead", created_at=utcnow(),
                                            failed_logins=0, active=True))  # fmt: skip
    assert time.monotonic() - started < 5  # SQLite: the snapshot's write lock is long gone
    during = first.table.to_pylist() + _rows(chunks)
    assert during == before
    assert len(worker_pids(pids)) == 2
    after = _rows(chunks_of(many, schema, filters, 2, **SMALL))
    assert after != before and len(after) == len(before)  # the commits were real
    assert_gone(worker_pids(pids))


def _write(engine: Engine, name: str) -> None:
    """Commit a user from a connection of its own (SQLite: giving up after 0.2 s locked)."""
    if not is_sqlite(engine):
        add_user(engine, name)
        return
    with closing(sqlite3.connect(engine.url.database, timeout=0.2, isolation_level=None)) as db:
        db.execute("BEGIN IMMEDIATE")
        db.execute(
            "INSERT INTO users (name, role, active, failed_logins, created_at) "
            "VALUES (?, 'annotator', 1, 0, '2026-01-01 00:00:00.000000')",
            (name,),
        )
        db.execute("COMMIT")


def test_shared_snapshot_lets_no_commit_in_before_workers_join(engine: Engine) -> None:
    add_user(engine, "before")
    names = select(User.name).order_by(User.name)
    other = make_engine(engine.url.render_as_string(hide_password=False))  # a worker's
    joined: list[Any] = []

    def share(token: str) -> None:
        """Commit between the parent's first read and the worker's, then let it join."""
        if is_sqlite(engine):  # the write lock keeps every writer out
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                _write(engine, "during")
        else:  # committed, but after the exported snapshot
            _write(engine, "during")
        joined.append(workers.enter_context(shared_snapshot(other, join=token)))

    with ExitStack() as workers, shared_snapshot(engine, share) as conn:
        _write(engine, "after")  # once every worker is in, writers go on
        assert conn.execute(names).scalars().all() == ["before"]
        assert joined[0].execute(names).scalars().all() == ["before"]
    other.dispose()
    with engine.connect() as conn:
        assert "after" in conn.execute(names).scalars().all()


def test_worker_failure_raises_and_leaves_nothing(
    many: Engine, schema: Schema, tmp_path: Path, small_ranges: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    folder = tmp_path / "pids"
    folder.mkdir()
    monkeypatch.setattr(export_parallel, "WORKER_HOOK", partial(note_pid, folder, 2, 0))
    out = tmp_path / "out" / "gold.parquet"
    with pytest.raises(WorkerError, match="injected failure in range 2") as err:
        export_gold(many, schema, out, fmt="parquet", long=True, chunk_size=20, processes=2)
    assert "Traceback" in str(err.value)  # the worker's own traceback comes along
    assert list(out.parent.iterdir()) == []  # no data file, no temporary file
    assert_gone(worker_pids(folder))


def test_worker_death_raises(
    many: Engine, schema: Schema, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "pids"
    folder.mkdir()
    monkeypatch.setattr(export_parallel, "WORKER_HOOK", partial(note_pid, folder, 1, 7))
    with pytest.raises(WorkerError, match="exit code 7"):
        _rows(chunks_of(many, schema, ExportFilters(), 2, **SMALL))
    assert_gone(worker_pids(folder))


def test_a_worker_dead_before_a_range_is_handed_out_raises_worker_error() -> None:
    # The race of test_worker_death_raises (CI saw it once on PostgreSQL): the executor had
    # seen the worker die before the next submit, which raised BrokenProcessPool as it was.
    class BrokenExecutor:
        def submit(self, *args: Any) -> Any:
            raise BrokenProcessPool("A child process terminated abruptly")

    dead = types.SimpleNamespace(name="gold-export-42", exitcode=7)
    pool = export_parallel._Pool(BrokenExecutor(), [dead])  # type: ignore[arg-type]
    with pytest.raises(WorkerError, match=r"gold-export-42 exited unexpectedly \(exit code 7\)"):
        next(pool.ordered(iter([("W1", "W9")]), window=2))


def test_closing_early_ends_the_workers(many: Engine, schema: Schema, pids: Path) -> None:
    chunks = chunks_of(many, schema, ExportFilters(), 2, **SMALL)
    first = next(chunks)
    assert isinstance(first.table, pa.Table) and first.table.num_rows == 20
    found = worker_pids(pids)
    assert found
    chunks.close()
    assert_gone(found)
    with write_session(many) as session:  # and nothing holds the database any more
        session.execute(update(Work).values(title="free"))


def test_bad_snapshot_token_is_refused(engine: Engine) -> None:
    if is_sqlite(engine):
        pytest.skip("SQLite has no snapshot token")
    with pytest.raises(ValueError, match="not a snapshot id"):
        with shared_snapshot(engine, join="1'; DROP TABLE works; --"):
            pass
    with pytest.raises(DBAPIError, match="invalid snapshot"):  # well-formed, unknown
        with shared_snapshot(engine, join="00000003-0000FFFF-1"):
            pass


def test_cli_processes_flag_and_setting(
    many: Engine,
    schema: Schema,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    """--processes, else LABELING_EXPORT_PROCESSES, reaches the export; a bad value is
    refused before anything is written."""
    from click.testing import CliRunner

    from labeling.cli.main import main

    seen: list[Any] = []
    real = export_parallel.iter_tables_parallel

    def spy(engine: Engine, plan: Any) -> Any:
        seen.append(plan.processes)
        return real(engine, plan)

    monkeypatch.setattr("labeling.export.gold_set.iter_tables_parallel", spy)
    monkeypatch.setenv("LABELING_DB_URL", many.url.render_as_string(hide_password=False))
    monkeypatch.setenv("LABELING_EXPORT_PROCESSES", "3")
    from labeling.settings import get_settings

    get_settings.cache_clear()
    request.addfinalizer(get_settings.cache_clear)  # no settings of this test outlive it
    runner = CliRunner()
    out = tmp_path / "g.csv"
    for extra, want in (([], 3), (["--processes", "1"], 1)):
        result = runner.invoke(main, ["export", "--format", "csv", "--out", str(out), *extra])
        assert result.exit_code == 0, result.output
        assert seen[-1] == want
    bad = runner.invoke(main, ["export", "--format", "csv", "--out", str(tmp_path / "x.csv"),
                               "--processes", "0"])  # fmt: skip
    assert bad.exit_code == 2 and "0" in bad.output and not (tmp_path / "x.csv").exists()


def note_options(folder: Path, idx: int) -> None:
    """Worker hook: note the engine options the worker got and the busy timeout it runs with."""
    state = export_parallel._worker
    assert state.spec is not None and state.conn is not None
    running = state.spec.busy_timeout_ms  # PostgreSQL: no such setting to read back
    if is_sqlite(state.conn.engine):
        running = state.conn.exec_driver_sql("PRAGMA busy_timeout").scalar()
    (folder / f"{os.getpid()}-{idx}").write_text(f"{state.spec.busy_timeout_ms} {running}")


def test_workers_build_their_engine_from_the_parents_options(
    many: Engine, schema: Schema, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker's engine is the parent's (its settings, e.g. sqlite_busy_timeout_ms), not one
    made from the URL with default options."""
    own = make_engine(many.url.render_as_string(hide_password=False), busy_timeout_ms=1234)
    assert engine_spec(own) == EngineSpec(own.url.render_as_string(hide_password=False), 1234)
    folder = tmp_path / "options"
    folder.mkdir()
    monkeypatch.setattr(export_parallel, "WORKER_HOOK", partial(note_options, folder))
    try:
        assert len(_rows(chunks_of(own, schema, ExportFilters(), 2, **SMALL))) == N_VALIDATED
    finally:
        own.dispose()
    noted = list(folder.iterdir())
    assert len(noted) == 10 and {p.read_text() for p in noted} == {"1234 1234"}


def test_workers_do_not_run_the_main_script(
    many: Engine, schema: Schema, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside Streamlit __main__ is the page being run: a started worker must not run it."""
    ran, page = tmp_path / "ran", tmp_path / "page.py"
    page.write_text(f"open({str(ran)!r}, 'a').write('ran')\n")
    main = types.ModuleType("__main__")
    main.__file__ = str(page)
    monkeypatch.setitem(sys.modules, "__main__", main)
    assert len(_rows(chunks_of(many, schema, ExportFilters(), 2, **SMALL))) == N_VALIDATED
    assert not ran.exists()
    assert sys.modules["__main__"] is main  # and the page is back in place


@pytest.mark.parametrize(
    ("codes", "named"),
    [
        ([7, None], "w0 exited unexpectedly (exit code 7)"),
        # The executor terminates the others after a death; the forkserver, ending with the
        # pool, may give 255 for a status it could not read: neither is the cause.
        ([-15, 7], "w1 exited unexpectedly (exit code 7)"),
        ([255, 7], "w1 exited unexpectedly (exit code 7)"),
        ([255, -15, 9], "w2 exited unexpectedly (exit code 9)"),
        ([-15, 255], "w1 exited unexpectedly (exit code 255)"),
        ([-15, -15], "w0 exited unexpectedly (exit code -15)"),
    ],
)
def test_the_death_named_is_the_worker_that_died(codes: list[int | None], named: str) -> None:
    procs = [types.SimpleNamespace(name=f"w{i}", exitcode=c) for i, c in enumerate(codes)]
    assert export_parallel.death_message(procs, wait_s=0) == f"export worker {named}"
