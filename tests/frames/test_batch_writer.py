"""BatchWriter: a batch written in a thread while the next fills, in order, counted on commit."""

from __future__ import annotations

import gc
import os
import signal
import threading
from dataclasses import dataclass
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

    def write(conn: Any, batch: list[Any], counts: StoredCounts, fresh: bool,
              stage_dir: Any = None) -> None:  # fmt: skip
        events.append(("start", batch[0]))
        if batch[0] == 1:
            assert hold.wait(10)
        if batch[0] == fail:
            raise RuntimeError(f"batch {fail} refused")
        counts.inserted += len(batch)
        events.append(("end", batch[0]))

    return write


@dataclass
class _Rig:
    """A BatchWriter over the fake write_batch, with what it recorded."""

    writer: BatchWriter
    committed: list[StoredCounts]
    events: list[tuple[str, Any]]
    hold: threading.Event


def _rig(engine: Engine, monkeypatch: pytest.MonkeyPatch, *, held: bool = True,
         fail: Any = None) -> _Rig:  # fmt: skip
    """held: batch 1 is written only once `hold` is set."""
    events: list[tuple[str, Any]] = []
    hold = threading.Event()
    if not held:
        hold.set()
    monkeypatch.setattr(batch_writer, "write_batch", _fake_write(events, hold, fail))
    committed: list[StoredCounts] = []
    return _Rig(BatchWriter(engine, True, committed.append), committed, events, hold)


def _batch(*marks: int) -> list[Any]:
    """A stand-in batch: the fake write_batch reads only its first item and its length."""
    return list(marks)


def test_a_batch_is_written_while_the_next_fills(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = _rig(engine, monkeypatch)
    rig.writer.submit(_batch(1, 1))  # returns before batch 1 is written
    rig.events.append(("filling", 2))
    assert rig.committed == []  # not counted before its commit
    rig.hold.set()
    rig.writer.submit(_batch(2, 2, 2))  # waits for batch 1: one batch in flight, in order
    assert [c.inserted for c in rig.committed] == [2]
    rig.writer.close()
    assert [c.inserted for c in rig.committed] == [2, 3]
    order = [rig.events.index(e) for e in (("filling", 2), ("end", 1), ("start", 2))]
    assert order == sorted(order)


def test_a_failed_batch_raises_at_the_next_submit_and_stops_the_writes(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = _rig(engine, monkeypatch, held=False, fail=2)
    rig.writer.submit(_batch(1))
    rig.writer.submit(_batch(2))
    with pytest.raises(RuntimeError, match="batch 2 refused"):
        rig.writer.submit(_batch(3))
    rig.writer.close()
    assert [c.inserted for c in rig.committed] == [1]  # batch 2 never committed
    assert ("start", 3) not in rig.events


def test_close_raises_the_last_batchs_failure(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = _rig(engine, monkeypatch, held=False, fail=2)
    rig.writer.submit(_batch(2))
    with pytest.raises(RuntimeError, match="batch 2 refused"):
        rig.writer.close()
    assert rig.committed == []


def test_an_interrupt_while_waiting_leaves_the_batch_to_close(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C while a batch is written: close() (in the importer's finally) still waits for
    # its commit and counts it, so the counts match the database.
    rig = _rig(engine, monkeypatch)
    rig.writer.submit(_batch(1, 1))

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGUSR1, interrupt)
    try:
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGUSR1)).start()
        with pytest.raises(KeyboardInterrupt):
            rig.writer.wait()
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert rig.committed == []
    rig.hold.set()
    rig.writer.close()
    assert [c.inserted for c in rig.committed] == [2]


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


def test_the_cycle_collector_is_paused_while_an_import_takes_its_batches(
    sqlite_engine: Engine, schema: Schema, seed_record: dict, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    enabled: list[bool] = []
    write = batch_writer.write_batch

    def spy(conn: Any, batch: list[Any], counts: StoredCounts, fresh: bool, *rest: Any) -> None:
        enabled.append(gc.isenabled())  # one switch for the whole process, every thread
        write(conn, batch, counts, fresh, *rest)

    monkeypatch.setattr(batch_writer, "write_batch", spy)
    records = [make_record(seed_record, f"W{i}") for i in range(1, 31)]
    path = write_jsonl(tmp_path / "f.jsonl", records)
    assert gc.isenabled()
    assert import_frame(sqlite_engine, path, schema, batch_size=10, progress=False).inserted == 30
    assert enabled == [False, False, False]
    assert gc.isenabled()  # resumed once the import has taken its last batch


def test_the_setting_and_the_importer_have_the_same_default_batch_size() -> None:
    from labeling.frames.importer import DEFAULT_BATCH_SIZE
    from labeling.settings import Settings

    assert Settings.model_fields["import_batch_size"].default == DEFAULT_BATCH_SIZE
