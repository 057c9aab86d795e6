"""An export's files are replaced all together or not at all, and never onto the database."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from sqlalchemy import Engine, func, select

from db.engine import make_engine
from db.models import Export, Work
from labeling.cli.main import main
from labeling.export import file_set, gold_set
from labeling.export.gold_set import ExportFilters, long_path, manifest_path, plan_export
from labeling.export.parallel import iter_tables_parallel
from labeling.frames.importer import import_frame
from labeling.review.campaigns import create_campaign
from labeling.schema import Schema
from tests.export.test_export import _frame, _label_all, build_gold_db
from tests.factories import add_user

ROOT = Path(__file__).resolve().parents[2]
NEW = ExportFilters(status="validated", questions=("genre",))
OLD = ExportFilters(status="all", questions=("genre", "categories"))


@pytest.fixture
def small(sqlite_engine: Engine, schema: Schema, seed_record: dict, tmp_path: Path) -> Engine:
    """A small gold database (nine works, two campaigns)."""
    build_gold_db(sqlite_engine, schema, seed_record, tmp_path / "frames")
    return sqlite_engine


def _write(engine: Engine, schema: Schema, out: Path, fmt: str, filters: ExportFilters) -> Any:
    """Export with the labels file, in this process."""
    plan = plan_export(engine, schema, fmt=fmt, filters=filters, long=True, processes=1)
    return gold_set.write_gold(engine, plan, out)


def _files(folder: Path) -> dict[str, bytes]:
    """Every file of a folder, by name."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _intact(out: Path, fmt: str) -> dict[str, Any]:
    """The manifest of a complete set: its sha256s match the data and labels files."""
    manifest = json.loads(manifest_path(out).read_bytes())
    assert manifest["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    labels = long_path(out, fmt)
    assert manifest["labels_file"]["sha256"] == hashlib.sha256(labels.read_bytes()).hexdigest()
    return manifest


def _no_temporaries(folder: Path) -> None:
    """No export temporary (of this version or the older `.NAME.tmp-PID`) is in the folder."""
    left = [p.name for p in folder.iterdir() if p.name.startswith(".")]
    assert not left, left


@pytest.fixture
def tiny(sqlite_engine: Engine, schema: Schema, seed_record: dict, tmp_path: Path) -> Engine:
    """One work validated by two annotators: a data row, two label rows and the manifest."""
    import_frame(sqlite_engine, _frame(tmp_path, seed_record, ["W01"], "w.jsonl"), schema)
    campaign = create_campaign(sqlite_engine, name="main", overlap=2)
    for name in ("alice", "=bob"):
        _label_all(sqlite_engine, schema, campaign.id, add_user(sqlite_engine, name), lambda w: 0)
    return sqlite_engine


def _replayed(engine: Engine, schema: Schema, fmt: str, monkeypatch: pytest.MonkeyPatch
              ) -> Callable[[Path], Any]:  # fmt: skip
    """An export of NEW to a path, replaying the chunks and CSV cells of the first one
    (thousands of exports then take a few milliseconds each: what they test is the writing of
    the files); writing OLD there first, really, makes the previous set."""
    plan = plan_export(engine, schema, fmt=fmt, filters=NEW, long=True, processes=1)
    cached = list(iter_tables_parallel(engine, plan))
    ready: dict[int, tuple[Any, Any]] = {}
    real_ready = gold_set.csv_ready

    def chunks(engine: Engine, planned: Any) -> Iterator[Any]:
        yield from cached if planned is plan else iter_tables_parallel(engine, planned)

    def csv_ready(table: Any) -> Any:
        if id(table) not in ready:  # the table is kept: its id stays its own
            ready[id(table)] = (table, real_ready(table))
        return ready[id(table)][1]

    monkeypatch.setattr(gold_set, "iter_tables_parallel", chunks)
    monkeypatch.setattr(gold_set, "csv_ready", csv_ready)
    return lambda out: gold_set.write_gold(engine, plan, out)


class _Budget:
    """Temporaries that take `left` bytes in all, then fail as a full disk does (no name)."""

    def __init__(self, left: int) -> None:
        self.left, self.written, self.failed = left, 0, None

    def open(self, path: Path) -> Any:
        return _Limited(path.open("xb"), self, path.name.split(".new.", 1)[1])


class _Limited:
    """A file that writes what the budget allows, and raises ENOSPC past it."""

    def __init__(self, fh: Any, budget: _Budget, target: str) -> None:
        self.fh, self.budget, self.target = fh, budget, target

    def write(self, data: bytes) -> int:
        take = min(len(data), self.budget.left)
        self.fh.write(data[:take])
        self.budget.left -= take
        self.budget.written += take
        if take < len(data):
            self.budget.failed = self.budget.failed or self.target
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return take

    @property
    def closed(self) -> bool:
        return self.fh.closed

    def flush(self) -> None:
        self.fh.flush()

    def close(self) -> None:
        self.fh.close()

    def __enter__(self) -> _Limited:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_full_disk_at_any_byte_leaves_the_previous_set(
    tiny: Engine, schema: Schema, tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh, kept = tmp_path / "fresh", tmp_path / "kept"
    fresh.mkdir()
    _write(tiny, schema, kept / f"gold.{fmt}", fmt, OLD)  # the previous set
    before = _files(kept)
    export = _replayed(tiny, schema, fmt, monkeypatch)
    unlimited = _Budget(1 << 40)
    monkeypatch.setattr(file_set, "open_temporary", unlimited.open)
    export(tmp_path / "sized" / f"gold.{fmt}")
    total = unlimited.written  # data, labels and manifest: about 7 KB
    assert total > 2000
    failed_in = set()
    for n in range(total):
        for folder in (fresh, kept):
            budget = _Budget(n)
            monkeypatch.setattr(file_set, "open_temporary", budget.open)
            with pytest.raises(OSError) as err:
                export(folder / f"gold.{fmt}")
            assert budget.failed is not None
            assert err.value.filename == str(folder / budget.failed), (n, err.value)
            assert budget.failed in str(err.value)
            assert _files(folder) == ({} if folder is fresh else before), n
            failed_in.add(budget.failed)
    assert failed_in == {f"gold.{fmt}", f"gold.labels.{fmt}", f"gold.{fmt}.manifest.json"}
    monkeypatch.setattr(file_set, "open_temporary", _Budget(total).open)
    result = export(kept / f"gold.{fmt}")  # exactly enough room
    assert _intact(kept / f"gold.{fmt}", fmt)["row_count"] == result.row_count == 1
    _no_temporaries(kept)


def _failing(method: str, nth: int) -> Callable[..., Any]:
    """A ParquetWriter method that fails as a full disk does (no file named) on call `nth`."""
    real = getattr(pq.ParquetWriter, method)
    calls = []

    def failing(self: Any, *args: Any, **kw: Any) -> Any:
        calls.append(self)
        if len(calls) == nth:
            raise OSError(errno.ENOSPC, "Error writing bytes to file")
        return real(self, *args, **kw)

    return failing


def test_a_failing_parquet_writer_or_manifest_leaves_the_previous_set(
    tiny: Engine, schema: Schema, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "out"
    out = folder / "gold.parquet"
    _write(tiny, schema, out, "parquet", OLD)
    before = _files(folder)
    for method in ("write_table", "close"):
        for nth in (1, 2):  # the data file's writer, then the labels file's
            with monkeypatch.context() as patched:
                patched.setattr(pq.ParquetWriter, method, _failing(method, nth))
                with pytest.raises(OSError) as err:
                    _write(tiny, schema, out, "parquet", NEW)
            name = ["gold.parquet", "gold.labels.parquet"][nth - 1]
            assert err.value.filename == str(folder / name), (method, nth, err.value)
            assert _files(folder) == before
    export = _replayed(tiny, schema, "parquet", monkeypatch)
    sizes = _Budget(1 << 40)
    monkeypatch.setattr(file_set, "open_temporary", sizes.open)
    export(tmp_path / "sized" / "gold.parquet")
    # Only the manifest goes through open_temporary (its every byte: the CSV test above).
    for n in [*range(0, sizes.written, 53), sizes.written - 1]:
        monkeypatch.setattr(file_set, "open_temporary", _Budget(n).open)
        with pytest.raises(OSError, match="gold.parquet.manifest.json"):
            export(out)
        assert _files(folder) == before


@pytest.mark.parametrize("step", [1, 2, 3, "record"])
@pytest.mark.parametrize("previous", [True, False])
def test_a_failure_while_replacing_puts_the_previous_files_back(
    small: Engine, schema: Schema, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    step: int | str, previous: bool,
) -> None:  # fmt: skip
    out = tmp_path / "out" / "gold.csv"
    if previous:
        _write(small, schema, out, "csv", OLD)
    else:
        out.parent.mkdir()
    before = _files(out.parent)
    real_replace, replaced = os.replace, []

    def replace(src: Any, dst: Any) -> None:
        if file_set.PREFIX + str(os.getpid()) in os.fspath(src) and ".new." in os.fspath(src):
            replaced.append(dst)
            if len(replaced) == step:
                raise PermissionError(errno.EACCES, "Permission denied", os.fspath(src))
        real_replace(src, dst)

    def record(*args: Any) -> int:
        raise RuntimeError("the exports table is gone")

    monkeypatch.setattr(os, "replace", replace)
    if step == "record":
        monkeypatch.setattr(gold_set, "_record", record)
    with pytest.raises((OSError, RuntimeError)) as err:
        _write(small, schema, out, "csv", NEW)
    monkeypatch.undo()
    if step != "record":  # the target being replaced, not the temporary
        assert err.value.filename == str(replaced[-1])
    assert _files(out.parent) == before
    with small.connect() as conn:
        assert conn.execute(select(func.count()).select_from(Export)).scalar() == int(previous)


_CHILD = """
import os, sys, time
from pathlib import Path
from db.engine import make_engine
from labeling.export import file_set, gold_set
from labeling.export.definitions import ExportFilters
from labeling.schema import load_schema
from labeling.settings import DEFAULT_SCHEMA

url, out, step, marker = sys.argv[1:5]

def stop():
    Path(marker).write_text("stopped")
    time.sleep(600)

if step == "writing":  # killed while the labels file is being written
    real_rows = gold_set._Writer.write_rows
    def write_rows(self, rows):
        real_rows(self, rows)
        stop()
    gold_set._Writer.write_rows = write_rows
else:  # killed after `step` of the three files were replaced
    real_replace, done = os.replace, []
    def replace(src, dst):
        real_replace(src, dst)
        if file_set.PREFIX in os.fspath(src) and ".new." in os.fspath(src):
            done.append(dst)
            if len(done) == int(step):
                stop()
    os.replace = replace
gold_set.export_gold(make_engine(url), load_schema(DEFAULT_SCHEMA), out, fmt="csv",
                     filters=ExportFilters(status="validated", questions=("genre",)),
                     long=True, processes=1)
"""


@pytest.mark.parametrize("step", ["writing", "1", "2", "3"])
def test_a_killed_export_leaves_one_whole_set(
    small: Engine, schema: Schema, tmp_path: Path, step: str
) -> None:
    out = tmp_path / "out" / "gold.csv"
    _write(small, schema, out, "csv", OLD)
    before = _files(out.parent)
    marker = tmp_path / "stopped"
    url = small.url.render_as_string(hide_password=False)
    child = subprocess.Popen([sys.executable, "-c", _CHILD, url, str(out), step, str(marker)],
                             cwd=ROOT)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert child.poll() is None, "the export ended before the kill"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
    assert any(p.name.startswith(file_set.PREFIX) for p in out.parent.iterdir())
    if step == "writing":  # killed before replacing anything: the old set, untouched
        assert {k: v for k, v in _files(out.parent).items() if k in before} == before
    # What the next export in the folder does first: settle the killed one's files.
    file_set.remove_stale(out.parent)
    _no_temporaries(out.parent)
    if step == "3":  # every file replaced: the new set stands
        assert _intact(out, "csv")["row_count"] == 7
        assert set(_files(out.parent)) == set(before)
    else:
        assert _files(out.parent) == before
    result = _write(small, schema, out, "csv", NEW)
    assert _intact(out, "csv")["sha256"] == result.sha256
    _no_temporaries(out.parent)


def test_an_older_versions_temporary_of_a_dead_process_goes(
    small: Engine, schema: Schema, tmp_path: Path
) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    out = tmp_path / "gold.csv"
    (tmp_path / f".gold.csv.tmp-{dead.stdout.strip()}").write_text("half a file")
    (tmp_path / f".other.csv.tmp-{dead.stdout.strip()}").write_text("not ours")
    _write(small, schema, out, "csv", NEW)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [
        f".other.csv.tmp-{dead.stdout.strip()}"
    ]


# ------------------------------------------------------------------ the database's own files


def _database(tmp_path: Path, template: Path, name: str, schema: Schema, seed: dict) -> str:
    """A database file named `name` holding two works; its URL."""
    path = tmp_path / name
    shutil.copyfile(template, path)
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    import_frame(engine, _frame(tmp_path, seed, ["W01", "W02"], f"{name}.jsonl"), schema)
    engine.dispose()
    return url


@pytest.mark.parametrize(
    ("db_name", "out_name", "long"),
    [
        ("labeling.db", "labeling.db", False),  # the data file
        ("labeling.db", "labeling.db-wal", False),
        ("labeling.db", "labeling.db-shm", False),
        ("labeling.db", "labeling.db-journal", False),
        ("x.labels.db", "x.db-wal", True),  # the labels file x.labels.db-wal
        ("x.labels.db", "x.db", True),  # the labels file is the database
        ("g.csv.manifest.json", "g.csv", False),  # the manifest is the database
        ("labeling.db", "link.csv", False),  # a symbolic link to the database
        ("labeling.db", "hard.csv", False),  # a hard link to it
    ],
)
def test_cli_refuses_to_write_over_the_database(
    sqlite_template: Path, schema: Schema, seed_record: dict, tmp_path: Path,
    db_name: str, out_name: str, long: bool,
) -> None:  # fmt: skip
    url = _database(tmp_path, sqlite_template, db_name, schema, seed_record)
    db = tmp_path / db_name
    if out_name == "link.csv":
        (tmp_path / out_name).symlink_to(db)
    if out_name == "hard.csv":
        os.link(db, tmp_path / out_name)
    before = {p.name: p.stat().st_size for p in tmp_path.iterdir() if p.name != "link.csv"}
    args = ["--db", url, "export", "--format", "csv", "--out", str(tmp_path / out_name),
            "--status", "all"] + (["--long"] if long else [])  # fmt: skip
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: refusing to write"), res.output
    assert "database" in lines[0]
    from labeling.database import dispose_all

    dispose_all()
    after = {p.name: p.stat().st_size for p in tmp_path.iterdir() if p.name != "link.csv"}
    # Nothing written: no export file or temporary, the database's files as they were.
    side = {f"{db_name}{s}" for s in ("-wal", "-shm", "-writelock")}
    assert {k: v for k, v in after.items() if k not in side} == {
        k: v for k, v in before.items() if k not in side
    }
    engine = make_engine(url)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
        assert conn.execute(select(func.count()).select_from(Work)).scalar() == 2
    engine.dispose()
