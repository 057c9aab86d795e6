"""Streaming, idempotent import of a frame (JSON Lines, optionally gzipped).

Each record is stored exactly as delivered (`works.record`, the line's own JSON text) next to
the columns the queue orders and filters on. When a newer frame brings a new
`model_version`, the superseded prediction moves to `predictions`, so history is kept.
Parsing and checking run in worker processes for large files (JSON parsing of the score
vectors is the bound); the main process only writes.
"""

from __future__ import annotations

import gzip
import hashlib
import multiprocessing
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from itertools import islice
from pathlib import Path
from typing import IO, Any

import orjson
from sqlalchemy import Connection, Engine, insert, update
from tqdm import tqdm

from db.engine import write_connection
from db.models import ImportRun, utcnow
from labeling.frame_store import defer_indexes, ensure_work_indexes, write_batch
from labeling.machine_columns import MachinePlan, machine_digest, machine_hash, machine_plan
from labeling.record import check_record, work_columns
from labeling.schema import Schema

MAX_PROBLEMS_KEPT = 1000
CHUNK_LINES = 500
PARALLEL_MIN_BYTES = 32 * 1024 * 1024


class FrameReadError(Exception):
    """The frame file cannot be opened or read (not a per-line problem)."""


@dataclass
class Problem:
    """One reported line: rejected (skipped) or a warning (imported, but inconsistent)."""

    line: int
    work_id: str | None
    kind: str
    reason: str


@dataclass
class ImportSummary:
    """Counts of one frame import, plus the first problems found."""

    path: str
    lines: int = 0
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    rejected: int = 0
    warnings: int = 0
    aborted: bool = False
    problems: list[Problem] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0 when every line was imported, 3 when any was rejected or the import aborted."""
        return 3 if (self.rejected or self.aborted) else 0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the counts (problems excluded)."""
        d = asdict(self)
        d.pop("problems")
        return d


@dataclass(slots=True)
class Parsed:
    """One line after parsing and checking (in a worker): what the writer needs."""

    line: int
    work_id: str | None
    errors: list[str]
    warnings: list[str]
    columns: dict[str, Any] | None = None
    text: str | None = None
    digest: str | None = None


class _Reporter:
    """Counts problems, keeps the first ones, and streams all of them to a report file."""

    def __init__(self, summary: ImportSummary, report_path: Path | None) -> None:
        self.summary = summary
        self.fh: IO[bytes] | None = report_path.open("wb") if report_path else None

    def add(self, line: int, work_id: str | None, kind: str, reason: str) -> None:
        if kind == "rejected":
            self.summary.rejected += 1
        else:
            self.summary.warnings += 1
        problem = Problem(line, work_id, kind, reason)
        if len(self.summary.problems) < MAX_PROBLEMS_KEPT:
            self.summary.problems.append(problem)
        if self.fh:
            self.fh.write(orjson.dumps(asdict(problem)) + b"\n")

    def close(self) -> None:
        if self.fh:
            self.fh.close()


def _open(path: Path) -> tuple[IO[bytes], IO[bytes]]:
    """Open raw and (maybe) decompressed streams; gzip is recognised by its magic bytes."""
    try:
        raw = path.open("rb")
    except OSError as exc:
        raise FrameReadError(f"{path}: cannot open frame ({exc.strerror or exc})") from exc
    if raw.read(2) == b"\x1f\x8b":
        raw.seek(0)
        return raw, gzip.GzipFile(fileobj=raw, mode="rb")
    raw.seek(0)
    return raw, raw


def iter_chunks(
    path: Path, size: int = CHUNK_LINES
) -> Iterator[tuple[list[tuple[int, bytes]], int]]:
    """Yield chunks of (line number, raw line) and the bytes of the file read so far."""
    raw, stream = _open(path)
    try:
        numbered = enumerate(stream, start=1)
        while chunk := list(islice(numbered, size)):
            yield chunk, raw.tell()
    except (OSError, EOFError, gzip.BadGzipFile, UnicodeError) as exc:
        raise FrameReadError(f"{path}: cannot read frame ({exc})") from exc
    finally:
        stream.close()
        raw.close()


_worker_schema: Schema | None = None


def _init_worker(schema: Schema) -> None:
    global _worker_schema
    _worker_schema = schema


def _parse_chunk_in_worker(chunk: list[tuple[int, bytes]]) -> list[Parsed]:
    assert _worker_schema is not None
    return parse_chunk(chunk, _worker_schema)


def parse_chunk(chunk: list[tuple[int, bytes]], schema: Schema) -> list[Parsed]:
    """Parse and check raw lines; blank lines are dropped."""
    out: list[Parsed] = []
    plan, plan_hash = _plan_for(schema)
    for number, line in chunk:
        line = line.strip()
        if not line:
            continue
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            out.append(Parsed(number, None, [f"invalid JSON: {exc}"], []))
            continue
        checked = check_record(rec, schema)
        if checked.errors:
            out.append(Parsed(number, checked.work_id, checked.errors, []))
            continue
        assert checked.work_id is not None
        columns = work_columns(rec, checked.work_id)
        columns["machine"], columns["machine_hash"] = machine_digest(plan, rec), plan_hash
        out.append(
            Parsed(
                number,
                checked.work_id,
                [],
                checked.warnings,
                columns,
                line.decode("utf-8"),
                hashlib.sha256(line).hexdigest(),
            )
        )
    return out


_plans: dict[str, tuple[MachinePlan, str]] = {}


def _plan_for(schema: Schema) -> tuple[MachinePlan, str]:
    """The schema's machine plan and hash (built once per schema and process)."""
    if schema.hash not in _plans:
        _plans[schema.hash] = (machine_plan(schema), machine_hash(schema))
    return _plans[schema.hash]


def import_frame(
    engine: Engine,
    path: str | Path,
    schema: Schema,
    *,
    strict: bool = False,
    report_path: str | Path | None = None,
    batch_size: int = 5000,
    progress: bool | None = None,
    workers: int | None = None,
) -> ImportSummary:
    """Import a frame file; bad lines are skipped and reported, good ones upserted.

    Args:
        engine: the database to import into (migrated).
        path: a JSON Lines file, plain or gzipped.
        schema: the label schema the score vectors are checked against.
        strict: abort at the first bad line and write nothing (the rest is still checked
            so the report lists every bad line).
        report_path: where to write every problem as JSON Lines (optional).
        batch_size: records per transaction (the whole file is one transaction if strict).
        progress: show a progress bar (None: only when stderr is a terminal).
        workers: parsing processes (None: 2 for files over 32 MB, else parse in-process).

    Raises:
        FrameReadError: the file cannot be opened or decompressed.
    """
    path = Path(path)
    summary = ImportSummary(path=str(path))
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise FrameReadError(f"{path}: cannot open frame ({exc.strerror or exc})") from exc
    if workers is None:
        workers = min(2, multiprocessing.cpu_count()) if size >= PARALLEL_MIN_BYTES else 0
    reporter = _Reporter(summary, Path(report_path) if report_path else None)
    bar = tqdm(
        total=size, unit="B", unit_scale=True, desc="import", leave=False,
        disable=None if progress is None else not progress,
    )  # fmt: skip
    run_id = _start_run(engine, path)
    ensure_work_indexes(engine)
    deferred = defer_indexes(engine) if (size >= PARALLEL_MIN_BYTES and not strict) else []
    pool = None
    if workers > 0:
        pool = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker,
            initargs=(schema,),
        )
    try:
        chunks = iter_chunks(path)
        if pool is None:
            parsed_chunks: Iterator[tuple[list[Parsed], int]] = (
                (parse_chunk(chunk, schema), pos) for chunk, pos in chunks
            )
        else:
            parsed_chunks = _parallel(pool, chunks, workers)
        _consume(engine, parsed_chunks, summary, reporter, bar, strict, batch_size)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
        if deferred:
            ensure_work_indexes(engine)
        bar.close()
        reporter.close()
    _finish_run(engine, run_id, summary)
    return summary


def _parallel(
    pool: ProcessPoolExecutor, chunks: Iterator[tuple[list[tuple[int, bytes]], int]], workers: int
) -> Iterator[tuple[list[Parsed], int]]:
    """Parse chunks in the pool, in order, with a bounded number in flight (bounded memory)."""
    pending: list[tuple[Any, int]] = []
    for chunk, pos in chunks:
        pending.append((pool.submit(_parse_chunk_in_worker, chunk), pos))
        if len(pending) >= 4 * workers:
            future, p = pending.pop(0)
            yield future.result(), p
    for future, p in pending:
        yield future.result(), p


def _consume(
    engine: Engine,
    parsed_chunks: Iterator[tuple[list[Parsed], int]],
    summary: ImportSummary,
    reporter: _Reporter,
    bar: tqdm,
    strict: bool,
    batch_size: int,
) -> None:
    try:
        if strict:
            # One transaction for the whole file: _Abort rolls all of it back.
            with write_connection(engine) as conn:
                _write_all(engine, conn, parsed_chunks, summary, reporter, bar, True, batch_size)
        else:
            _write_all(engine, None, parsed_chunks, summary, reporter, bar, False, batch_size)
    except _Abort:
        summary.aborted = True
        summary.inserted = summary.updated = summary.unchanged = 0


def _write_all(
    engine: Engine,
    conn: Connection | None,
    parsed_chunks: Iterator[tuple[list[Parsed], int]],
    summary: ImportSummary,
    reporter: _Reporter,
    bar: tqdm,
    strict: bool,
    batch_size: int,
) -> None:
    seen: set[str] = set()
    batch: list[Parsed] = []
    last_pos = 0
    for parsed, pos in parsed_chunks:
        bar.update(pos - last_pos)
        last_pos = pos
        for p in parsed:
            summary.lines = max(summary.lines, p.line)
            if p.errors:
                reporter.add(p.line, p.work_id, "rejected", "; ".join(p.errors))
                continue
            assert p.work_id is not None
            if p.work_id in seen:
                reporter.add(
                    p.line, p.work_id, "rejected", f"duplicate id {p.work_id} within the file"
                )
                continue
            seen.add(p.work_id)
            for warning in p.warnings:
                reporter.add(p.line, p.work_id, "warning", warning)
            if strict and summary.rejected:
                continue  # aborting: keep checking so every bad line is reported
            batch.append(p)
            if len(batch) >= batch_size:
                _flush(engine, conn, batch, summary)
                batch.clear()
    if strict and summary.rejected:
        raise _Abort
    if batch:
        _flush(engine, conn, batch, summary)


class _Abort(Exception):
    """Raised inside the strict transaction to roll it back."""


def _flush(
    engine: Engine, conn: Connection | None, batch: list[Parsed], summary: ImportSummary
) -> None:
    if conn is not None:
        write_batch(conn, batch, summary)
        return
    with write_connection(engine) as own:
        write_batch(own, batch, summary)


def _start_run(engine: Engine, path: Path) -> int:
    with write_connection(engine) as conn:
        return conn.execute(
            insert(ImportRun).values(kind="frame", path=str(path), started_at=utcnow())
        ).inserted_primary_key[0]


def _finish_run(engine: Engine, run_id: int, summary: ImportSummary) -> None:
    with write_connection(engine) as conn:
        conn.execute(
            update(ImportRun)
            .where(ImportRun.id == run_id)
            .values(summary=summary.as_dict(), finished_at=utcnow())
        )
