"""A SQLite import's journal: the WAL copied into the file beside the writer, or the rollback
journal of a bulk load into an empty table."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, func, select

import db.engine
import labeling.frames.batch_writer as batch_writer
import labeling.frames.importer as importer
from db.engine import make_engine, read_session, write_connection
from db.models import Work
from db.wal import WalCheckpointer, in_rollback, rollback_journal
from labeling.frames.importer import import_frame
from labeling.schema import Schema
from tests.conftest import make_record, write_jsonl


def _rows_in_file_alone(engine: Engine, tmp_path: Path) -> int:
    """Works rows in the database file itself, without its WAL (what checkpoints copied)."""
    database = engine.url.database
    assert database is not None
    copy = tmp_path / "file-alone.db"
    shutil.copyfile(database, copy)  # no -wal beside it: SQLite reads the file only
    with sqlite3.connect(copy) as conn:
        return int(conn.execute("SELECT count(*) FROM works").fetchone()[0])


def test_an_import_is_checkpointed_beside_the_writer(
    sqlite_engine: Engine, schema: Schema, seed_record: dict[str, Any], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    # The writer's own commits never checkpoint here: only the checkpointer's passes can.
    monkeypatch.setattr(db.engine, "BULK_WAL_AUTOCHECKPOINT", 0)
    records = [make_record(seed_record, f"W{i}") for i in range(1, 41)]
    path = write_jsonl(tmp_path / "frame.jsonl", records)

    summary = import_frame(sqlite_engine, path, schema, batch_size=5, progress=False)

    assert summary.inserted == 40
    with read_session(sqlite_engine) as s:
        assert s.scalar(select(func.count()).select_from(Work)) == 40
    # At least the first batch: a pass starts after each commit when none is running.
    assert _rows_in_file_alone(sqlite_engine, tmp_path) >= 5


def test_without_passes_the_file_alone_holds_none(
    sqlite_engine: Engine, schema: Schema, seed_record: dict[str, Any], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The control for the test above: what it reads is the passes' doing."""
    monkeypatch.setattr(db.engine, "BULK_WAL_AUTOCHECKPOINT", 0)
    monkeypatch.setattr(WalCheckpointer, "committed", lambda self: None)
    records = [make_record(seed_record, f"W{i}") for i in range(1, 41)]
    path = write_jsonl(tmp_path / "frame.jsonl", records)

    assert import_frame(sqlite_engine, path, schema, batch_size=5, progress=False).inserted == 40
    assert _rows_in_file_alone(sqlite_engine, tmp_path) == 0


def test_a_failed_pass_is_counted_and_raises_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "not-a-database.db"
    bad.write_bytes(b"this is not a SQLite file" * 100)  # the pass fails as on a broken disk
    checkpointer = WalCheckpointer(create_engine(f"sqlite:///{bad}"))
    checkpointer.committed()
    checkpointer.close()
    assert (checkpointer.passes, checkpointer.failures) == (0, 1)


def test_passes_run_one_at_a_time_outside_the_pool(sqlite_engine: Engine) -> None:
    """Its connection is its own: a pooled one would stay in the pool for the index builds."""
    pool = sqlite_engine.pool
    before = pool.checkedin()  # type: ignore[attr-defined]
    checkpointer = WalCheckpointer(sqlite_engine)
    for _ in range(50):
        checkpointer.committed()
    checkpointer.close()
    assert checkpointer.failures == 0
    assert 1 <= checkpointer.passes <= 50
    assert pool.checkedin() == before  # type: ignore[attr-defined]
    assert checkpointer._conn is None  # closed by close()


def _journal_mode(engine: Engine) -> str:
    """The journal mode a new pooled connection to the file sees."""
    with engine.connect() as conn:
        return str(conn.exec_driver_sql("PRAGMA journal_mode").scalar_one())


def _synchronous(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.exec_driver_sql("PRAGMA synchronous").scalar_one())


def test_a_bulk_load_switches_to_the_rollback_journal_and_back(sqlite_engine: Engine) -> None:
    assert _journal_mode(sqlite_engine) == "wal"
    with rollback_journal(sqlite_engine) as switched:
        assert switched
        assert in_rollback(sqlite_engine.url.database)
        # New pooled connections keep the mode (the listener does not turn the WAL on) and
        # sync fully: NORMAL is crash-safe only with the WAL.
        assert _journal_mode(sqlite_engine) == "truncate"
        assert _synchronous(sqlite_engine) == 2
        with write_connection(sqlite_engine, bulk=True) as conn:
            conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")
        assert not Path(f"{sqlite_engine.url.database}-wal").exists()
    assert not in_rollback(sqlite_engine.url.database)
    assert _journal_mode(sqlite_engine) == "wal"
    assert _synchronous(sqlite_engine) == 1


def test_another_open_connection_keeps_the_wal(sqlite_engine: Engine) -> None:
    """Another process's connection (here a raw one) holds the WAL open: no switch."""
    database = sqlite_engine.url.database
    assert database is not None
    other = sqlite3.connect(database)
    try:
        other.execute("SELECT count(*) FROM works").fetchone()  # opens the WAL
        with rollback_journal(sqlite_engine) as switched:
            assert not switched
            assert not in_rollback(database)
            assert _journal_mode(sqlite_engine) == "wal"
            assert _synchronous(sqlite_engine) == 1
    finally:
        other.close()
    assert _journal_mode(sqlite_engine) == "wal"


def test_a_file_left_in_rollback_mode_gets_the_wal_back(tmp_path: Path) -> None:
    """A process killed during a bulk load leaves the rollback journal on: the next engine's
    first connection turns the WAL back on."""
    path = tmp_path / "left.db"
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA journal_mode=TRUNCATE")
        raw.execute("CREATE TABLE t (x INTEGER)")
    engine = make_engine(f"sqlite:///{path}")
    try:
        assert _journal_mode(engine) == "wal"
    finally:
        engine.dispose()


@pytest.mark.pg
def test_not_for_postgresql(pg_url: str) -> None:
    engine = make_engine(pg_url)
    try:
        with rollback_journal(engine) as switched:
            assert not switched
            assert not in_rollback(engine.url.database)
    finally:
        engine.dispose()


def test_not_for_a_memory_database() -> None:
    memory = make_engine("sqlite://")
    try:
        with rollback_journal(memory) as switched:
            assert not switched
    finally:
        memory.dispose()


def test_an_import_into_an_empty_table_runs_in_the_rollback_journal(
    sqlite_engine: Engine, schema: Schema, seed_record: dict[str, Any], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The deferred-index case (an empty table, a large file) commits its batches in rollback
    mode; a second import, into the filled table, stays in the WAL; both end in the WAL."""
    monkeypatch.setattr(importer, "PARALLEL_MIN_BYTES", 0)  # this small file counts as large
    modes: list[str] = []
    write = importer.write_batch

    def spy(conn: Any, *args: Any, **kwargs: Any) -> Any:
        modes.append(str(conn.exec_driver_sql("PRAGMA journal_mode").scalar_one()))
        return write(conn, *args, **kwargs)

    monkeypatch.setattr(importer, "write_batch", spy)  # --strict's one transaction
    monkeypatch.setattr(batch_writer, "write_batch", spy)  # the batches of the others
    records = [make_record(seed_record, f"W{i}") for i in range(1, 41)]
    path = write_jsonl(tmp_path / "frame.jsonl", records)

    first = import_frame(sqlite_engine, path, schema, batch_size=10, progress=False, strict=True)
    assert first.inserted == 40 and set(modes) == {"wal"}  # --strict: one transaction, WAL
    with write_connection(sqlite_engine) as conn:
        conn.exec_driver_sql("DELETE FROM works")
    modes.clear()
    summary = import_frame(sqlite_engine, path, schema, batch_size=10, progress=False, workers=0)
    assert summary.inserted == 40
    assert set(modes) == {"truncate"}
    assert _journal_mode(sqlite_engine) == "wal"
    changed = [make_record(seed_record, f"W{i}", title=f"new {i}") for i in range(1, 41)]
    modes.clear()
    again = import_frame(sqlite_engine, write_jsonl(tmp_path / "again.jsonl", changed), schema,
                         batch_size=10, progress=False, workers=0)  # fmt: skip
    assert again.updated == 40 and set(modes) == {"wal"}  # the table was not empty
    with read_session(sqlite_engine) as s:
        assert s.scalar(select(func.count()).select_from(Work)) == 40


def test_a_failed_bulk_load_turns_the_wal_back_on(
    sqlite_engine: Engine, schema: Schema, seed_record: dict[str, Any], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """Binary data after the first lines stops the import part-way (ImportFailed): what it
    committed in the rollback journal stays, and the file is in WAL mode again."""
    monkeypatch.setattr(importer, "PARALLEL_MIN_BYTES", 0)
    modes: list[str] = []
    write = batch_writer.write_batch

    def spy(conn: Any, *args: Any, **kwargs: Any) -> Any:
        modes.append(str(conn.exec_driver_sql("PRAGMA journal_mode").scalar_one()))
        return write(conn, *args, **kwargs)

    monkeypatch.setattr(batch_writer, "write_batch", spy)
    records = [make_record(seed_record, f"W{i}") for i in range(1, 21)]
    path = write_jsonl(tmp_path / "frame.jsonl", records)
    with path.open("ab") as f:
        f.write(b"\x00\x01\x02\xff\n" * 5)  # not UTF-8 text: not a frame, stop
    with pytest.raises(importer.ImportFailed) as failed:
        import_frame(sqlite_engine, path, schema, batch_size=10, progress=False, workers=0)
    assert failed.value.summary.inserted == 20
    assert modes and set(modes) == {"truncate"}  # it failed in the rollback journal
    assert not in_rollback(sqlite_engine.url.database)
    assert _journal_mode(sqlite_engine) == "wal"
    with read_session(sqlite_engine) as s:
        assert s.scalar(select(func.count()).select_from(Work)) == 20
