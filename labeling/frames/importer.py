"""Streaming, idempotent, resumable import of a frame (JSON Lines, optionally gzipped).

Each record is stored exactly as delivered (`works.record`, the line's own JSON text) next to
the columns the queue orders and filters on. When a newer frame changes a work's content
(compared as parsed JSON), the content it replaces moves to `predictions` under its revision,
under a new `model_version` or the same one, so history is kept (labeling/frames/revisions.py).
Parsing and checking run in worker processes for large files (JSON parsing of the score
vectors is the bound), which also build each new row ready to write; the main process only
writes, each batch in a thread of its own while it takes the next batch's lines
(labeling/frames/batch_writer.py). Into SQLite the workers write their rows into staging
files of their own, and the main process copies them in with INSERT ... SELECT
(db/staging.py); PostgreSQL takes the rows built in the workers by COPY.

An import that fails part-way (the file cannot be read to its end, it is not a frame, the
database refuses) keeps the batches it committed and says how far it got: at a million rows
resuming beats starting over, and re-running the repaired file skips what is stored
(unchanged records are not rewritten). Only --strict is all-or-nothing.
"""

from __future__ import annotations

import multiprocessing
import shutil
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, select
from tqdm import tqdm

from db.engine import engine_spec, is_sqlite, write_connection
from db.indexes import defer_indexes, ensure_work_indexes
from db.models import Work
from db.staging import MAX_ATTACHED, MAX_STAGING_WORKERS, make_stage_dir, ref_group
from db.wal import rollback_journal
from labeling import collector
from labeling.frames.batch_writer import BatchWriter
from labeling.frames.frame_file import BLOCK_BYTES, FrameReadError, iter_blocks, iter_chunks
from labeling.frames.import_runs import describe_error, finish_run, start_run
from labeling.frames.import_summary import (
    ImportFailed,
    ImportSummary,
    Problem,
    Reporter,
    failure_message,
)
from labeling.frames.known import Known, known_hashes
from labeling.frames.lines import Groups, Parsed, init_worker, parse_chunk, parse_in_pool
from labeling.frames.machine_columns import machine_hash
from labeling.frames.seen import SeenIds
from labeling.frames.store import StoredCounts, work_encoder, write_batch
from labeling.processes import spawned_pool
from labeling.schema import Schema

__all__ = ["FrameReadError", "ImportFailed", "ImportSummary", "Problem", "import_frame"]

PARALLEL_MIN_BYTES = 32 * 1024 * 1024
BINARY_RUN = 3  # lines in a row that are not text: the file is not a frame, stop
# Lines handed to the writer at a time: a transaction (batch_size lines) may take several,
# so that memory holds two of these whatever the batch size (see BatchWriter). Staged lines
# go in whole transactions (their rows are in the staging files, not in memory).
HANDOFF_LINES = 5000
# Records per transaction unless the caller says (LABELING_IMPORT_BATCH_SIZE's default too).
DEFAULT_BATCH_SIZE = 20_000
# The largest transaction whose rows are staged: its lines (about 500 bytes each without
# their rows) are held until it is written, and its rows take about 2 KB each on disk.
STAGED_BATCH_MAX = 50_000


def import_frame(
    engine: Engine,
    path: str | Path,
    schema: Schema,
    *,
    strict: bool = False,
    report_path: str | Path | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
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
        FrameReadError: the file cannot be opened (nothing read, no run recorded).
        ImportFailed: the import stopped part-way (unreadable, not a frame, database error);
            the batches committed before stay and the run is recorded as failed.
    """
    path = Path(path)
    summary = ImportSummary(path=str(path))
    try:
        size = path.stat().st_size
        path.open("rb").close()
    except OSError as exc:
        raise FrameReadError(f"{path}: cannot open frame ({exc.strerror or exc})") from exc
    if workers is None:
        workers = min(2, multiprocessing.cpu_count()) if size >= PARALLEL_MIN_BYTES else 0
    reporter = Reporter(summary, Path(report_path) if report_path else None)
    run_id = start_run(engine, "frame", path)
    reason: str | None = None
    cause: BaseException | None = None
    deferred: list[Any] = []
    bar = tqdm(
        total=size, unit="B", unit_scale=True, desc="import", leave=False,
        disable=None if progress is None else not progress,
    )  # fmt: skip
    pool = None
    stage_dir = _staging_dir(engine, workers, strict, batch_size)
    encoder = work_encoder(engine.dialect.name)
    # A bulk load into an empty table runs in SQLite's rollback journal, the index builds too
    # (new pages only), and the WAL is back on once they are done (db/wal.py).
    with ExitStack() as journal:
        try:
            ensure_work_indexes(engine)
            if size >= PARALLEL_MIN_BYTES and not strict:
                deferred = defer_indexes(engine)
                if deferred:  # the table was empty: nothing for a reader to wait for yet
                    journal.enter_context(rollback_journal(engine))
            if workers > 0:  # started with a bare __main__: inside Streamlit, not the page again
                initargs = (schema, encoder, engine_spec(engine), stage_dir)
                pool = spawned_pool(workers, init_worker, initargs)
            look_up = _any_stored(engine)  # into an empty table no line can be unchanged
            if pool is None:
                chunks = _with_known(engine, iter_chunks(path), schema, look_up)
                parsed_chunks: Iterator[tuple[list[Parsed], int, int]] = (
                    (parse_chunk(chunk, schema, known, encoder), pos, -1)
                    for chunk, pos, known in chunks
                )
            else:  # the workers look the stored hashes up themselves
                groups = Groups(batch_size if stage_dir else 0, BLOCK_BYTES)
                spans = iter_blocks(path, spans=True)
                parsed_chunks = parse_in_pool(pool, spans, workers, look_up, groups)
            # The parsed chunks come back as millions of fresh objects and no cycles: the cycle
            # collector's passes over them, in the pool's thread that unpickles them, held the
            # GIL that the writer's thread needs after each row (4.2 s of a 1M SQLite import).
            with collector.paused():
                _consume(engine, parsed_chunks, summary, reporter, bar, strict, batch_size,
                         not look_up, stage_dir, workers)  # fmt: skip
        except (_Stop, FrameReadError) as exc:
            reason, cause = str(exc), exc
        except Exception as exc:  # the database (or anything else) failed: say so in one line
            reason, cause = f"{path}: {describe_error(exc)}", exc
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)
            if stage_dir is not None:
                shutil.rmtree(stage_dir, ignore_errors=True)
            bar.close()
            reporter.close()
        _end(engine, run_id, summary, deferred, strict, reason, cause)
    return summary


def _end(
    engine: Engine, run_id: int, summary: ImportSummary, deferred: list[Any], strict: bool,
    reason: str | None, cause: BaseException | None,
) -> None:  # fmt: skip
    """Rebuild deferred indexes and record the run; raise ImportFailed if anything failed."""
    if deferred:
        try:
            ensure_work_indexes(engine)
        except Exception as exc:
            if reason is None:
                reason, cause = f"{summary.path}: {describe_error(exc)}", exc
    if reason is not None:
        summary.failed, summary.error = True, failure_message(reason, summary, strict)
    try:
        finish_run(engine, run_id, summary.as_dict(), summary.error)
    except Exception as exc:
        note = f"the run could not be recorded ({describe_error(exc)})"
        cause = cause or exc
        summary.failed = True
        summary.error = f"{summary.error}; {note}" if summary.error else f"{summary.path}: {note}"
    if summary.failed:
        assert summary.error is not None
        raise ImportFailed(summary.error, summary) from cause


Chunk = list[tuple[int, bytes]]


def _staging_dir(engine: Engine, workers: int, strict: bool, batch_size: int) -> str | None:
    """A new directory for the workers to stage their rows in (db/staging.py), or None: the
    rows come back pickled. Only into SQLite (PostgreSQL takes the rows by COPY), outside
    --strict, whose one transaction would read every group's files at once, and for
    transactions of at most STAGED_BATCH_MAX lines, which are held whole until written."""
    staged = 0 < workers <= MAX_STAGING_WORKERS and batch_size <= STAGED_BATCH_MAX
    if not staged or strict or not is_sqlite(engine):
        return None
    try:
        return make_stage_dir()
    except OSError:  # no writable temporary directory: the rows come back pickled instead
        return None


def _any_stored(engine: Engine) -> bool:
    """Whether the works table holds a row (else no line can be unchanged: no lookups)."""
    with engine.connect() as conn:
        return conn.execute(select(Work.id).limit(1)).first() is not None


def _with_known(
    engine: Engine, chunks: Iterator[tuple[Chunk, int]], schema: Schema, look_up: bool
) -> Iterator[tuple[Chunk, int, Known | None]]:
    """Each chunk with the stored hashes of its lines' ids (none when look_up is False)."""
    if not look_up:  # nothing stored: no line can be unchanged (a repeated id is a duplicate)
        for chunk, pos in chunks:
            yield chunk, pos, None
        return
    plan_hash = machine_hash(schema)
    for chunk, pos in chunks:
        yield chunk, pos, known_hashes(engine, chunk, plan_hash)


def _consume(
    engine: Engine,
    parsed_chunks: Iterator[tuple[list[Parsed], int, int]],
    summary: ImportSummary,
    reporter: Reporter,
    bar: tqdm,
    strict: bool,
    batch_size: int,
    fresh: bool,
    stage_dir: str | None = None,
    workers: int = 0,
) -> None:
    try:
        if strict:
            # One transaction for the whole file: _Abort (or any failure) rolls all of it back.
            with write_connection(engine, bulk=True) as conn:
                writer = _Writer(engine, conn, summary, reporter, strict, batch_size, fresh)
                writer.write(parsed_chunks, bar)
            summary.add(writer.pending)  # committed
        else:
            writer = _Writer(engine, None, summary, reporter, strict, batch_size, fresh,
                             stage_dir, workers)  # fmt: skip
            writer.write(parsed_chunks, bar)
    except _Abort:
        summary.aborted = True


class _Abort(Exception):
    """Raised inside the strict transaction to roll it back."""


class _Stop(Exception):
    """The file is not a frame (binary data, a JSON array): stop reading it."""


class _Writer:
    """Takes parsed lines in file order: reports, batches and writes them."""

    def __init__(self, engine: Engine, conn: Connection | None, summary: ImportSummary,
                 reporter: Reporter, strict: bool, batch_size: int,
                 fresh: bool, stage_dir: str | None = None,
                 workers: int = 0) -> None:  # fmt: skip
        self.conn, self.summary, self.reporter = conn, summary, reporter
        self.strict, self.fresh = strict, fresh
        self.handoff = min(batch_size, HANDOFF_LINES)
        # Staged rows (db/staging.py): batch_size lines a transaction (a batch), written once
        # their groups are staged whole, which they are when the next group's lines come.
        self.staged, self.group = stage_dir is not None, -1
        if self.staged:
            self.handoff = batch_size
            self.max_groups = max(1, MAX_ATTACHED // max(1, workers))
        self.seen = SeenIds()
        self.first: Iterator[bool] = iter(())  # see write()
        self.batch: list[Parsed] = []
        self.binary: list[Parsed] = []  # the current run of lines that are not text
        self.any_line = self.any_text = False
        self.pending = StoredCounts()  # written in the strict transaction, not yet committed
        # Outside --strict, batch_size lines a transaction, written while the next ones fill.
        self.writer = (
            None if conn is not None
            else BatchWriter(engine, fresh, summary.add, 0 if self.staged else batch_size,
                             stage_dir)
        )  # fmt: skip

    def write(self, parsed_chunks: Iterator[tuple[list[Parsed], int, int]], bar: tqdm) -> None:
        """Write every parsed line, then the last batch; return once all are committed."""
        try:
            self._write(parsed_chunks, bar)
        finally:
            if self.writer is not None:
                self.writer.close()

    def _write(self, parsed_chunks: Iterator[tuple[list[Parsed], int, int]], bar: tqdm) -> None:
        last_pos = 0
        try:
            for parsed, pos, group in parsed_chunks:
                bar.update(pos - last_pos)
                last_pos = pos
                if group != self.group:
                    self._group_done(group)
                # Whether each line that will reach the duplicate check (a text line without
                # errors) is its id's first, for the whole chunk at once; _take_text reads it.
                ids = [p.work_id or "" for p in parsed if not p.binary and not p.errors]
                self.first = iter(self.seen.add_many(ids))
                for p in parsed:
                    self.take(p)
            if self.binary and not self.any_text:  # nothing in the file was text
                raise _Stop(self._binary_reason())
        except (_Stop, FrameReadError):
            # The file failed, not the database: store the good lines read before the failure.
            if self.batch and not self.strict:
                self._flush()
            raise
        self._report_binary()
        if self.strict and self.summary.rejected:
            raise _Abort
        if self.batch:
            self._flush()

    def take(self, p: Parsed) -> None:
        """One non-blank line, in file order."""
        self.summary.lines = max(self.summary.lines, p.line)
        if not self.any_line:
            self.any_line = True
            if p.array:
                raise _Stop(f"{self.summary.path}: line {p.line}: this is a JSON array; "
                            "a frame is JSON Lines, one object per line")  # fmt: skip
        if p.binary:
            self.binary.append(p)
            if len(self.binary) >= BINARY_RUN:
                raise _Stop(self._binary_reason())
            return
        self.any_text = True
        self._report_binary()
        self._take_text(p)

    def _binary_reason(self) -> str:
        first, n = self.binary[0], len(self.binary)
        rows = f"{n} lines in a row are" if n > 1 else "the only line is"
        return (f"{self.summary.path}: line {first.line}: {first.errors[0]}; {rows} not "
                "UTF-8 text: a binary file? A frame is UTF-8 JSON Lines")  # fmt: skip

    def _report_binary(self) -> None:
        """A short run of undecodable lines between text lines: ordinary rejected lines."""
        for p in self.binary:
            self.reporter.add(p.line, None, "rejected", p.errors[0])
        self.binary.clear()

    def _take_text(self, p: Parsed) -> None:
        summary, reporter = self.summary, self.reporter
        if p.errors:
            reporter.add(p.line, p.work_id, "rejected", "; ".join(p.errors))
            return
        assert p.work_id is not None
        if not next(self.first):
            reporter.add(p.line, p.work_id, "rejected", f"duplicate id {p.work_id} within the file")
            return
        for warning in p.warnings:
            reporter.add(p.line, p.work_id, "warning", warning)
        if self.strict and summary.rejected:
            return  # aborting: keep checking so every bad line is reported
        self.batch.append(p)
        if len(self.batch) >= self.handoff and not self.staged:
            self._flush()

    def _group_done(self, group: int) -> None:
        """A chunk of another staging group came: the lines so far are staged, write them
        in whole batches; all of them if they span as many groups as a transaction may read."""
        self.group = group
        while len(self.batch) >= self.handoff:
            self._flush(self.handoff)
        refs = [p.row for p in self.batch if type(p.row) is int]
        if len({ref_group(ref) for ref in refs}) >= self.max_groups:
            self._flush()

    def _flush(self, lines: int | None = None) -> None:
        """Hand the first `lines` lines of the batch (default all) to the writer."""
        batch, self.batch = (
            self.batch[:lines],
            self.batch[len(self.batch) if lines is None else lines :],
        )
        if self.writer is not None:
            self.writer.submit(batch)  # counted once committed: the counts match the database
        else:
            assert self.conn is not None
            write_batch(self.conn, batch, self.pending, self.fresh)
