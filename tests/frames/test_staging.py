"""Rows staged by the workers in SQLite files of their own (db/staging.py) store what the
pickled rows stored, whatever the groups, slots and runs, and nothing is left behind."""

from __future__ import annotations

import gzip
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import Engine, create_engine, select

from db.engine import make_engine, upgrade, write_connection
from db.models import Work
from db.staging import (
    StageWriter,
    StagingError,
    attach_files,
    drop_groups,
    fetch_staged,
    make_stage_dir,
    ref_group,
    runs,
    stage_ref,
)
from labeling.frames import importer, store
from labeling.frames.importer import import_frame
from labeling.frames.lines import Groups, parse_chunk
from labeling.frames.store import StoredCounts, work_encoder, write_batch
from labeling.frames.synth import iter_synthetic_records
from labeling.schema import Schema
from tests.conftest import make_record, write_jsonl


def _stored(engine: Engine) -> list[tuple[Any, ...]]:
    """Every works row but its timestamps, by id."""
    cols = [c for c in Work.__table__.columns if c.name not in ("imported_at", "updated_at")]
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(select(*cols).order_by(Work.id))]


@pytest.mark.parametrize(
    ("refs", "expected"),
    [
        ([], []),
        ([stage_ref(0, 0, 1)], [((0, 0), 1, 1)]),
        ([stage_ref(0, 0, r) for r in (1, 2, 3)], [((0, 0), 1, 3)]),
        ([stage_ref(0, 0, 1), stage_ref(0, 0, 3)], [((0, 0), 1, 1), ((0, 0), 3, 3)]),
        ([stage_ref(0, 0, 1), stage_ref(0, 1, 2)], [((0, 0), 1, 1), ((0, 1), 2, 2)]),
        # Consecutive rowids of the same slot in two groups are two files: two runs.
        ([stage_ref(4, 1, 7), stage_ref(5, 1, 8)], [((4, 1), 7, 7), ((5, 1), 8, 8)]),
        ([stage_ref(9, 63, (1 << 34) - 1)], [((9, 63), (1 << 34) - 1, (1 << 34) - 1)]),
    ],
)
def test_runs_are_consecutive_rows_of_one_file(refs: list[int], expected: list[Any]) -> None:
    assert runs(refs) == expected
    assert all(ref_group(r) == g for r, ((g, _), _, _) in zip(refs, runs(refs), strict=False))


@pytest.mark.parametrize(
    ("lines", "counts", "expected"),
    [
        (0, [], [-1, -1, -1]),
        # No count yet: a chunk of 30,000 bytes is guessed at 10 lines of 3,000.
        (25, [], [0, 0, 1, 1, 2]),
        (25, [5], [0, 0, 0, 0, 0, 1]),  # chunks of 5 lines: 5 a group
        (3, [10], [0, 1, 2]),  # a chunk larger than a group is a group of its own
    ],
)
def test_groups_hold_about_the_batch_size(lines: int, counts: list[int],
                                          expected: list[int]) -> None:  # fmt: skip
    groups = Groups(lines, 30_000)
    for n in counts:
        groups.count(n)
    assert [groups.next() for _ in expected] == expected


def test_a_writer_names_its_rows_in_order_and_claims_its_own_slot(tmp_path: Path) -> None:
    keys = ("id", "title")
    one, two = StageWriter(tmp_path, keys), StageWriter(tmp_path, keys)
    first = one.put(0, [("W1", "a"), ("W2", None)])
    assert two.put(0, []) == []
    assert (one.slot, two.slot) == (0, 1)
    second = one.put(0, [("W3", b"\x00\xff")])
    other = one.put(1, [("W4", 1.5)])
    assert runs(first + second) == [((0, 0), 1, 3)]
    assert runs(other) == [((1, 0), 1, 1)]
    assert one.put(1, []) == []
    one.close()
    conn = sqlite3.connect(":memory:")
    names = attach_files(conn, tmp_path, first + second + other)
    assert fetch_staged(conn, keys, names, [first[1], other[0], first[0], second[0]]) == [
        ("W2", None), ("W4", 1.5), ("W1", "a"), ("W3", b"\x00\xff"),
    ]  # fmt: skip
    with pytest.raises(StagingError, match="2 staged rows asked for, 1 found"):
        fetch_staged(conn, keys, names, [first[0], stage_ref(0, 0, 99)])
    conn.close()
    drop_groups(tmp_path, 1)
    assert sorted(p.name for p in tmp_path.glob("*.db")) == ["1-0.db"]


def test_a_writer_that_cannot_write_says_where(tmp_path: Path) -> None:
    writer = StageWriter(tmp_path, ("id",))
    assert len(writer.put(0, [("W1",)])) == 1
    gone = tmp_path / "gone"
    writer.directory = gone  # the directory vanished (or the disk refuses files)
    with pytest.raises(StagingError, match=f"{gone}/1-0.db: cannot stage rows .*TMPDIR"):
        writer.put(1, [("W2",)])
    with pytest.raises(StagingError, match=f"{gone}: cannot stage rows"):
        StageWriter(gone, ("id",)).put(0, [("W1",)])


def _staged_lines(tmp_path: Path, schema: Schema, records: list[dict[str, Any]]) -> list[Any]:
    """Records parsed with the works row encoder, their rows staged in group 0."""
    encoder = work_encoder("sqlite")
    lines = [(i, orjson.dumps(r)) for i, r in enumerate(records, start=1)]
    parsed = parse_chunk(lines, schema, None, encoder)
    writer = StageWriter(tmp_path, encoder.keys)
    for p, ref in zip(parsed, writer.put(0, [p.row for p in parsed]), strict=True):
        p.row = ref
    writer.close()
    return parsed


def test_a_staged_row_stored_meanwhile_by_another_writer_is_updated(
    sqlite_engine: Engine, schema: Schema, seed_record: dict[str, Any], tmp_path: Path
) -> None:
    """Into a table empty when the import started (fresh), a row whose id was stored since
    is not inserted twice: it comes back with its row, and is updated."""
    records = [make_record(seed_record, f"W{i}") for i in (1, 2, 3)]
    older = make_record(seed_record, "W2", title="stored meanwhile")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with write_connection(sqlite_engine, bulk=True) as conn:
        write_batch(conn, _staged_lines(tmp_path / "a", schema, [older]), StoredCounts(), True,
                    str(tmp_path / "a"))  # fmt: skip
    counts = StoredCounts()
    with write_connection(sqlite_engine, bulk=True) as conn:
        write_batch(conn, _staged_lines(tmp_path / "b", schema, records), counts, True,
                    str(tmp_path / "b"))  # fmt: skip
    assert (counts.inserted, counts.updated, counts.unchanged) == (2, 1, 0)
    with sqlite_engine.connect() as conn:
        titles = dict(conn.execute(select(Work.id, Work.title)).all())
        attached = conn.exec_driver_sql("PRAGMA database_list").all()
    assert titles == {f"W{i}": seed_record["title"] for i in (1, 2, 3)}
    assert [name for _, name, _ in attached] == ["main"]  # detached after the transaction


def _frame(seed_record: dict[str, Any], tmp_path: Path, name: str) -> Path:
    """600 synthetic records and the seed's, a repeated id, a broken line, a NUL title."""
    records: list[Any] = [orjson.dumps(r).decode() for r in iter_synthetic_records(600, seed=7)]
    records[50] = records[10]  # a repeated id in the same group: the first one is kept
    records[300] = "{not json"
    records[400] = make_record(seed_record, "W900", title="nul \u0000 here")
    records.append(make_record(seed_record, "W901"))
    return write_jsonl(tmp_path / name, records)


@pytest.mark.parametrize(("batch_size", "gz"), [(7, False), (100, True), (20_000, False)])
def test_a_staged_import_stores_what_the_pickled_rows_stored(
    schema: Schema, seed_record: dict[str, Any], tmp_path: Path, batch_size: int, gz: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The same frame through the workers, staged and not, then again changed: same rows,
    same counts, same problems; the staging directory is gone after each import."""
    made: list[str] = []

    def make() -> str:
        made.append(make_stage_dir(str(tmp_path)))
        return made[-1]

    monkeypatch.setattr(importer, "make_stage_dir", make)
    copied: list[int] = []  # rows each import copied from, then read back from, staging

    def counting(name: str) -> Any:
        real = getattr(store, name)

        def spy(*args: Any, **kwargs: Any) -> Any:
            copied[-1] += len(args[4] if name == "insert_staged" else args[3])
            return real(*args, **kwargs)

        return spy

    for name in ("insert_staged", "fetch_staged"):
        monkeypatch.setattr(store, name, counting(name))
    first, second = _frame(seed_record, tmp_path, "a.jsonl"), tmp_path / "b.jsonl"
    lines = first.read_text().splitlines()
    changed = orjson.loads(lines[5])
    changed["title"] = "a new title"
    lines[5] = orjson.dumps(changed).decode()
    lines += [orjson.dumps(make_record(seed_record, f"W{i}")).decode() for i in (902, 903)]
    second.write_text("\n".join(lines) + "\n")
    if gz:  # read by the importing process, in chunks of lines, not spans
        for path in (first, second):
            path.write_bytes(gzip.compress(path.read_bytes()))
    outcomes = []
    for staged in (True, False):
        engine = make_engine(f"sqlite:///{tmp_path}/{staged}.db")
        upgrade(engine)
        monkeypatch.setattr(importer, "MAX_STAGING_WORKERS", 5 if staged else 0)
        summaries = []
        for path in (first, second):
            copied.append(0)
            summaries.append(import_frame(engine, path, schema, workers=2, batch_size=batch_size))
        problems = [[(p.line, p.kind, p.reason) for p in s.problems] for s in summaries]
        outcomes.append(([s.as_dict() for s in summaries], problems, _stored(engine)))
        engine.dispose()
    assert len(made) == 2  # staged imports only
    # Fresh: every row copied in by INSERT ... SELECT; then the changed and new ones read back.
    assert copied == [598, 3, 0, 0]
    assert not any(os.path.exists(d) for d in made)
    assert outcomes[0] == outcomes[1]
    counts, problems, rows = outcomes[0]
    assert (counts[0]["inserted"], counts[0]["rejected"]) == (598, 3)
    assert (counts[1]["inserted"], counts[1]["updated"], counts[1]["unchanged"]) == (2, 1, 597)
    assert [line for line, kind, _ in problems[0] if kind == "rejected"] == [51, 301, 401]
    assert len(rows) == 600


def test_without_a_temporary_directory_the_rows_come_back_pickled(
    sqlite_engine: Engine, schema: Schema, seed_record: dict[str, Any], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    def refuse() -> str:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(importer, "make_stage_dir", refuse)
    summary = import_frame(sqlite_engine, _frame(seed_record, tmp_path, "f.jsonl"), schema,
                           workers=2)  # fmt: skip
    assert (summary.inserted, summary.rejected, summary.failed) == (598, 3, False)


@pytest.mark.parametrize(
    ("engine_url", "workers", "strict", "batch_size", "staged"),
    [
        ("sqlite", 2, False, 20_000, True),
        ("sqlite", 5, False, 50_000, True),
        ("sqlite", 6, False, 20_000, False),  # a transaction would read more than 10 files
        ("sqlite", 0, False, 20_000, False),  # parsed in this process
        ("sqlite", 2, True, 20_000, False),  # one transaction would read every file
        ("sqlite", 2, False, 50_001, False),  # its lines are held whole until written
        ("postgresql", 2, False, 20_000, False),  # COPY takes the rows built in the workers
    ],
)
def test_which_imports_stage_their_rows(
    engine_url: str, workers: int, strict: bool, batch_size: int, staged: bool,
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    url = f"sqlite:///{tmp_path}/x.db" if engine_url == "sqlite" else "postgresql+psycopg://x@h/d"
    engine = create_engine(url)
    made = importer._staging_dir(engine, workers, strict, batch_size)
    assert (made is not None) == staged
    assert made is None or Path(made).parent == tmp_path


def test_a_new_import_removes_the_staging_directories_of_killed_ones(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    dead = tmp_path / f"labeling-import-{gone.stdout.strip()}-abc"
    alive = tmp_path / f"labeling-import-{os.getppid()}-def"  # another import, running
    other = tmp_path / "labeling-import-notes"
    for directory in (dead, alive, other):
        directory.mkdir()
        (directory / "0-0.db").write_bytes(b"rows")
    made = Path(make_stage_dir(str(tmp_path)))
    assert made.name.startswith(f"labeling-import-{os.getpid()}-")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive.name, other.name, made.name])


def test_staging_files_lost_mid_import_fail_it_cleanly_and_a_rerun_completes(
    sqlite_engine: Engine, schema: Schema, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The staging directory vanishes after the third commit (a cleaner, a full disk): the
    import stops with a message, keeps whole batches, and re-running it stores the rest."""
    records = [orjson.dumps(r).decode() for r in iter_synthetic_records(2000, seed=11)]
    path = write_jsonl(tmp_path / "f.jsonl", records)
    made: list[str] = []
    commits = 0
    real_commit = importer.BatchWriter._commit

    def make() -> str:
        made.append(make_stage_dir(str(tmp_path)))
        return made[-1]

    def commit(self: Any) -> Any:
        nonlocal commits
        counts = real_commit(self)
        commits += 1
        if commits == 3:
            shutil.rmtree(made[-1])
        return counts

    monkeypatch.setattr(importer, "make_stage_dir", make)
    monkeypatch.setattr(importer.BatchWriter, "_commit", commit)
    with pytest.raises(importer.ImportFailed) as failed:
        import_frame(sqlite_engine, path, schema, workers=2, batch_size=100)
    summary = failed.value.summary
    assert summary.exit_code == 2
    # A worker finds the directory gone, or the importing process a file (whichever first).
    assert re.search(r"\(StagingError\): \S+: cannot (stage rows|read the rows the workers "
                     r"staged there) \(.*; before the failure", str(failed.value))  # fmt: skip
    assert summary.inserted == 300 == len(_stored(sqlite_engine))  # three whole batches
    monkeypatch.setattr(importer.BatchWriter, "_commit", real_commit)
    again = import_frame(sqlite_engine, path, schema, workers=2, batch_size=100)
    assert (again.inserted, again.unchanged, again.failed) == (1700, 300, False)
    ids = sorted(orjson.loads(line)["id"].rsplit("/", 1)[-1] for line in records)
    assert sorted(row[0] for row in _stored(sqlite_engine)) == ids
    assert not any(os.path.exists(d) for d in made)
