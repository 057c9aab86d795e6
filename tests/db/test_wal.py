"""WalCheckpointer: a SQLite import's WAL copied into the file beside the writer."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, func, select

import db.engine
from db.engine import read_session
from db.models import Work
from db.wal import WalCheckpointer
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
