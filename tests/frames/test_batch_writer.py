"""BatchWriter: a batch written in a thread while the next fills, in order, counted on commit."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from db.engine import make_engine, read_session, upgrade
from db.models import Work
from labeling.frames import batch_writer
from labeling.frames.batch_writer import BatchWriter
from labeling.frames.importer import import_frame
from labeling.frames.store import StoredCounts
from labeling.schema import Schema
from tests.conftest import make_record, write_jsonl


def _fake_write(events: list[tuple[str, Any]], hold: threading.Event, fail: Any = None) -> Any:
    """A write_batch that records when each batch starts and ends; batch 1 waits for `hold`."""

    def write(conn: Any, batch: list[Any], counts: StoredCounts, fresh: bool) -> None:
        events.append(("start", batch[0]))
        if batch[0] == 1:
            assert hold.wait(10)
        if batch[0] == fail:
            raise RuntimeError(f"batch {fail} refused")
        counts.inserted += len(batch)
        events.append(("end", batch[0]))

    return write


def _batch(*marks: int) -> list[Any]:
    """A stand-in batch: the fake write_batch reads only its first item and its length."""
    return list(marks)


def test_a_batch_is_written_while_the_next_fills(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[tuple[str, Any]] = []
    hold = threading.Event()
    monkeypatch.setattr(batch_writer, "write_batch", _fake_write(events, hold))
    committed: list[StoredCounts] = []
    writer = BatchWriter(engine, True, committed.append)
    writer.submit(_batch(1, 1))  # returns before batch 1 is written
    events.append(("filling", 2))
    assert committed == []  # not counted before its commit
    hold.set()
    writer.submit(_batch(2, 2, 2))  # waits for batch 1: one batch in flight, file order kept
    assert [c.inserted for c in committed] == [2]
    writer.close()
    assert [c.inserted for c in committed] == [2, 3]
    assert events.index(("filling", 2)) < events.index(("end", 1)) < events.index(("start", 2))


def test_a_failed_batch_raises_at_the_next_submit_and_stops_the_writes(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[tuple[str, Any]] = []
    hold = threading.Event()
    hold.set()
    monkeypatch.setattr(batch_writer, "write_batch", _fake_write(events, hold, fail=2))
    committed: list[StoredCounts] = []
    writer = BatchWriter(engine, True, committed.append)
    writer.submit(_batch(1))
    writer.submit(_batch(2))
    with pytest.raises(RuntimeError, match="batch 2 refused"):
        writer.submit(_batch(3))
    writer.close()
    assert [c.inserted for c in committed] == [1]  # batch 2 never committed
    assert ("start", 3) not in events


def test_close_raises_the_last_batchs_failure(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    hold = threading.Event()
    hold.set()
    monkeypatch.setattr(batch_writer, "write_batch", _fake_write([], hold, fail=2))
    writer = BatchWriter(engine, True, lambda counts: None)
    writer.submit(_batch(2))
    with pytest.raises(RuntimeError, match="batch 2 refused"):
        writer.close()


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
def test_an_in_memory_database_is_written_in_the_callers_thread(
    url: str, schema: Schema, seed_record: dict, tmp_path: Path
) -> None:
    # Each thread's connection to an in-memory database is a database of its own: a writer
    # thread would find no tables there.
    engine = make_engine(url)
    upgrade(engine)
    records = [make_record(seed_record, f"W{i}") for i in range(1, 31)]
    path = write_jsonl(tmp_path / "f.jsonl", records)
    summary = import_frame(engine, path, schema, batch_size=10, progress=False)
    assert (summary.inserted, summary.failed) == (30, False)
    with read_session(engine) as s:
        assert s.scalar(select(func.count()).select_from(Work)) == 30
    engine.dispose()


def test_an_interrupt_while_waiting_leaves_the_batch_to_close(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C while a batch is written: close() (in the importer's finally) still waits for
    # its commit and counts it, so the counts match the database.
    events: list[tuple[str, Any]] = []
    hold = threading.Event()
    monkeypatch.setattr(batch_writer, "write_batch", _fake_write(events, hold))
    committed: list[StoredCounts] = []
    writer = BatchWriter(engine, True, committed.append)
    writer.submit(_batch(1, 1))

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGUSR1, interrupt)
    try:
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGUSR1)).start()
        with pytest.raises(KeyboardInterrupt):
            writer.wait()
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert committed == []
    hold.set()
    writer.close()
    assert [c.inserted for c in committed] == [2]
