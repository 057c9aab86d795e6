"""Gold-set export: CSV, JSON Lines or Parquet, streamed, deterministic, with a manifest.

The data file holds one row per work (see export_rows.wide_columns) ordered by work id, and
nothing that depends on when it was written; the manifest beside it (PATH.manifest.json)
holds the creation time, filters, schema hash, counts and the file's sha256. The same
database state therefore exports byte-identical data files. The files of one export are put
in place all together or not at all (file_set.FileSet).
"""

from __future__ import annotations

import hashlib
import io
import logging
from collections import Counter
from contextlib import closing, suppress
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import IO, Any, cast

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from sqlalchemy import CursorResult, Engine, insert
from sqlalchemy.exc import SQLAlchemyError

import labeling
from db.engine import is_sqlite, write_session
from db.models import Export, utcnow
from labeling.export.column_docs import described, described_long, preview_order
from labeling.export.csv_cells import FORMULA_START, neutralise, neutralised
from labeling.export.definitions import (
    LONG_COLUMNS,
    ExportError,
    ExportFilters,
    arrow_schema,
    sample_design,
    status_counts,
)
from labeling.export.file_set import FileSet, naming, refuse_database
from labeling.export.parallel import iter_tables_parallel
from labeling.export.plan import CHUNK, FORMATS, ExportPlan, plan_export
from labeling.export.summaries import store as store_summaries
from labeling.export.table import iter_tables
from labeling.schema import Schema

__all__ = ["FORMATS", "FORMULA_START", "ExportError", "ExportFilters", "ExportPlan",
           "ExportPreview", "ExportResult", "export_gold", "long_path", "manifest_path",
           "neutralise", "plan_export", "preview", "preview_gold", "write_gold"]  # fmt: skip

log = logging.getLogger(__name__)
ROW_GROUP = 16_384
# Strings always quoted, nulls empty: an empty text and a missing value stay different.
CSV_OPTIONS = pa_csv.WriteOptions(include_header=True, batch_size=8192, delimiter=",",
                                  quoting_style="needed")  # fmt: skip
PSEUDONYM_NOTE = (
    "annotator and lead names replaced by 'annotator-' + the first 12 hex digits of "
    "HMAC-SHA256(key, name); key = SHA-256 of a fixed tag and the database's earliest users "
    "row (id, name, created_at): stable within one database, different across databases"
)


@dataclass
class ExportResult:
    """What an export wrote."""

    path: str
    format: str
    row_count: int
    sha256: str
    counts: dict[str, int]
    manifest_path: str
    long_path: str | None = None
    long_rows: int = 0
    long_sha256: str | None = None
    export_id: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain data (for the CLI's JSON output)."""
        return asdict(self)


@dataclass
class ExportPreview:
    """Counts per status of the matching works and the first rows of the gold set (columns:
    the order to show them in, the work and its human answers first)."""

    counts: dict[str, int]
    total: int
    columns: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)


def manifest_path(out: str | Path) -> Path:
    """Where the manifest of an export to `out` goes: PATH.manifest.json."""
    out = Path(out)
    return out.with_name(out.name + ".manifest.json")


def long_path(out: str | Path, fmt: str) -> Path:
    """Where the labels file of an export to `out` goes: gold.csv -> gold.labels.csv."""
    out = Path(out)
    if out.suffix:
        return out.with_name(f"{out.stem}.labels{out.suffix}")
    return out.with_name(f"{out.name}.labels.{fmt}")


# ---------------------------------------------------------------- writers


def csv_ready(table: pa.Table) -> pa.Table:
    """Text cells neutralised and lists ';'-joined, for a spreadsheet-safe CSV."""
    columns = []
    for name in table.column_names:
        col = table[name].combine_chunks()
        if pa.types.is_list(col.type):
            col = pc.binary_join(col, ";")
        if pa.types.is_string(col.type):
            col = neutralised(col)
        columns.append(col)
    return pa.table(columns, names=table.column_names)


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    """JSON Lines with U+2028/2029 escaped (valid JSON, but they split lines in some readers)."""
    data = b"".join(orjson.dumps(r) + b"\n" for r in rows)
    return data.replace("\u2028".encode(), b"\\u2028").replace("\u2029".encode(), b"\\u2029")


class _HashingFile:
    """A binary file that also hashes what is written to it."""

    def __init__(self, fh: IO[bytes]) -> None:
        """Wrap an open binary file."""
        self.fh = fh
        self.sha = hashlib.sha256()

    def write(self, data: bytes) -> int:
        """Write and hash."""
        self.sha.update(data)
        return self.fh.write(data)

    @property
    def closed(self) -> bool:
        """Whether the file is closed (pyarrow's writers ask)."""
        return self.fh.closed

    def flush(self) -> None:
        """Flush the file."""
        self.fh.flush()


class _Writer:
    """Streams tables of a fixed schema into one file of one format."""

    def __init__(self, path: Path, fmt: str, schema: pa.Schema, files: FileSet | None = None):
        """Open the temporary of `path` in the export's set of files (None: a set of its own,
        put in place by close)."""
        self.path, self.fmt, self.schema = path, fmt, schema
        self.files = files if files is not None else FileSet(path.parent, [path])
        self._own = files is None
        self.rows = 0
        self._pq: Any = None
        self._csv: Any = None
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        # Parquet writes its own file (hashed when closed); text formats stream through here.
        self.tmp = self.files.temporary(path)
        self._fh = self.files.open(path) if fmt != "parquet" else io.BytesIO()
        self._out = _HashingFile(self._fh)
        if fmt == "parquet":
            with naming(path):
                self._pq = pq.ParquetWriter(
                    str(self.tmp), schema, compression="zstd", compression_level=3,
                    use_dictionary=True, write_statistics=True, version="2.6",
                    data_page_version="1.0", store_schema=True,
                )  # fmt: skip

    def write(self, table: pa.Table) -> None:
        """Append a table (Parquet: buffered until a row group is full)."""
        with naming(self.path):
            self._write(table)

    def _write(self, table: pa.Table) -> None:
        """Append a table (errors not yet naming the file)."""
        if not table.num_rows:
            return
        self.rows += table.num_rows
        if self.fmt == "csv":
            ready = csv_ready(table)
            if self._csv is None:
                self._csv = pa_csv.CSVWriter(self._out, ready.schema, write_options=CSV_OPTIONS)
            self._csv.write_table(ready)
        elif self.fmt == "jsonl":
            self._out.write(_jsonl(table.to_pylist()))
        else:
            self._pending.append(table)
            self._pending_rows += table.num_rows
            if self._pending_rows >= ROW_GROUP:
                self._flush_groups(final=False)

    def write_rows(self, rows: list[dict[str, Any]]) -> None:
        """Append plain rows (the long file: JSONL keeps list answers as lists)."""
        if not rows:
            return
        if self.fmt == "jsonl":
            self.rows += len(rows)
            with naming(self.path):
                self._out.write(_jsonl(rows))
            return
        joined = [{**r, "value": ";".join(r["value"]) if isinstance(r["value"], list)
                   else r["value"]} for r in rows]  # fmt: skip
        self.write(pa.Table.from_pylist(joined, schema=self.schema))

    def _flush_groups(self, *, final: bool) -> None:
        """Write pending Parquet rows in row groups of exactly ROW_GROUP rows (the last may
        be shorter), so the file layout does not depend on how rows were chunked."""
        table = pa.concat_tables(self._pending)
        while table.num_rows >= ROW_GROUP or (final and table.num_rows):
            size = min(ROW_GROUP, table.num_rows)
            # One contiguous table per group: the encoder cuts data pages at chunk boundaries
            # (seen with long unique titles), so the bytes would depend on the chunking.
            self._pq.write_table(table.slice(0, size).combine_chunks(), row_group_size=size)
            table = table.slice(size)
        self._pending = [table] if table.num_rows else []
        self._pending_rows = table.num_rows

    def close(self) -> str:
        """Finish the temporary (in place at once when the set is its own); its sha256."""
        with naming(self.path):
            self._close()
        if self._own:
            with self.files.replacing():
                pass
        return self._out.sha.hexdigest()

    def _close(self) -> None:
        """Finish the temporary file and its hash."""
        if self.fmt == "csv" and self._csv is None:  # no rows: the header alone
            self._csv = pa_csv.CSVWriter(self._out, csv_ready(self.schema.empty_table()).schema,
                                         write_options=CSV_OPTIONS)  # fmt: skip
        if self._csv is not None:
            self._csv.close()
        self._fh.close()
        if self._pq is not None:
            if self._pending:
                self._flush_groups(final=True)
            self._pq.close()
            with self.tmp.open("rb") as fh:
                while block := fh.read(1 << 20):
                    self._out.sha.update(block)

    def abort(self) -> None:
        """Close the temporary file after a failure (its set removes it)."""
        # Already failing: the closing writers may fail as well, and the file goes anyway.
        for close in (self._pq and self._pq.close, self._csv and self._csv.close, self._fh.close):
            with suppress(Exception):
                close and close()
        if self._own:
            self.files.discard()


# ---------------------------------------------------------------- public API


def export_gold(
    engine: Engine,
    schema: Schema,
    out: str | Path,
    *,
    fmt: str,
    filters: ExportFilters | None = None,
    long: bool = False,
    pseudonymize: bool = False,
    user_id: int | None = None,
    chunk_size: int = CHUNK,
    processes: int | None = None,
) -> ExportResult:
    """Plan an export (plan_export: ExportError on bad input) and write it (write_gold).

    Args:
        engine: the database.
        schema: the label schema (questions, teachers, hash).
        out: the data file to write (replaced atomically).
        fmt: "csv", "jsonl" or "parquet".
        filters: which works and questions (default: validated works, every question).
        long: also write every current label, one row per question (see long_path); the
            labels file, in any format, can be imported again with import_labels.
        pseudonymize: replace annotator and lead names by stable pseudonyms.
        user_id: who exported (kept in the exports table).
        chunk_size: works read and built per step (memory; the files do not depend on it).
        processes: worker processes building chunks (None: min(2, CPU count); 1: none).

    Returns:
        Paths, row counts, counts per status and sha256 of what was written.
    """
    plan = plan_export(engine, schema, fmt=fmt, filters=filters, long=long,
                       pseudonymize=pseudonymize, chunk_size=chunk_size,
                       processes=processes)  # fmt: skip
    return write_gold(engine, plan, out, user_id=user_id)


def write_gold(
    engine: Engine, plan: ExportPlan, out: str | Path, *, user_id: int | None = None
) -> ExportResult:
    """Write a planned gold set, its manifest (and the labels file if plan.long), and record
    the export (user_id: who exported); returns paths, counts and sha256s. All or nothing
    (file_set.FileSet): on any failure the previous files stay and an OSError names the file
    that failed; ExportError, before anything is written, for the database's own files."""
    out = Path(out)
    fmt = plan.fmt
    lpath = long_path(out, fmt) if plan.long else None
    mpath = manifest_path(out)
    targets = [out] + ([lpath] if lpath is not None else []) + [mpath]
    refuse_database(engine.url.database if is_sqlite(engine) else None, targets)
    files = FileSet(out.parent, targets)
    main = side = None
    counts: Counter[str] = Counter()
    try:
        main = _Writer(out, fmt, arrow_schema(list(plan.columns)), files)
        if lpath is not None:
            side = _Writer(lpath, fmt, arrow_schema(LONG_COLUMNS), files)
        # Chunks come from worker processes sharing one snapshot (one process when small).
        with closing(iter_tables_parallel(engine, plan)) as chunks:
            for chunk in chunks:
                main.write(chunk.table)
                for entry in pc.value_counts(chunk.table["human_status"]).to_pylist():
                    counts[entry["values"]] += entry["counts"]
                if side is not None:
                    side.write_rows(chunk.labels)
                if chunk.stale is not None:
                    _store_summaries(engine, chunk.stale)
        digest = main.close()
        long_digest = side.close() if side is not None else None
        result = ExportResult(
            path=str(out), format=fmt, row_count=main.rows, sha256=digest,
            counts=dict(sorted(counts.items())), manifest_path=str(mpath),
            long_path=str(lpath) if lpath else None, long_rows=side.rows if side else 0,
            long_sha256=long_digest,
        )  # fmt: skip
        with engine.connect() as conn:
            design = sample_design(conn, plan.campaign_id, plan.campaign_name)
        files.write_bytes(mpath, _manifest(result, plan, design, main.tmp.stat().st_size))
        # The record joins the set: an export that cannot be recorded leaves the old files.
        with files.replacing():
            result.export_id = _record(engine, result, plan, user_id)
    except BaseException:
        for writer in (main, side):
            if writer is not None:
                writer.abort()
        files.discard()
        raise
    return result


def _store_summaries(engine: Engine, summaries: pa.Table) -> None:
    """Keep the label summaries a chunk had to recompute (works labelled since the last
    export, or a database without them yet), so the next export reads them instead."""
    try:
        store_summaries(engine, summaries)
    except SQLAlchemyError as exc:  # the files are right either way; the next export retries
        log.warning("label summaries of %d works not stored: %s", summaries.num_rows, exc)


def _manifest(result: ExportResult, plan: ExportPlan, design: str, size: int) -> bytes:
    """The content of PATH.manifest.json describing the export (size: the data file's)."""
    schema, pseudonymize = plan.schema, plan.pseudonymize
    manifest = {
        "tool": "labeling", "tool_version": labeling.__version__,
        "created_at": utcnow().isoformat(timespec="seconds"),
        "file": Path(result.path).name, "format": result.format, "sha256": result.sha256,
        "bytes": size, "row_count": result.row_count,
        "counts_per_status": result.counts, "filters": plan.filters.as_dict(),
        "schema": {"version": schema.version, "hash": schema.hash, "path": schema.path,
                   "teachers": list(schema.teachers),
                   "questions": [q.name for q in plan.questions]},
        "columns": described(plan.columns, schema, plan.questions),
        "order": "work_id ascending",
        "sample_design": design,
        "labels_file": None if result.long_path is None else {
            "file": Path(result.long_path).name, "sha256": result.long_sha256,
            "row_count": result.long_rows, "columns": described_long(LONG_COLUMNS),
            "content": "the current (latest, non-skipped) label of each annotator per work and "
                       "campaign, one row per question; importable with labeling import-labels",
        },
        "pseudonymized": pseudonymize,
        "pseudonyms": PSEUDONYM_NOTE if pseudonymize else None,
        "csv": "UTF-8, no BOM; text always quoted, so an unquoted empty cell is a missing value "
               "and \"\" an empty text; multi-label answers ';'-joined; a text cell starting "
               "with = + - @ tab or CR, possibly after apostrophes, gets one more apostrophe in "
               "front (import-labels removes exactly that one)" if result.format == "csv"
               else None,
    }  # fmt: skip
    return orjson.dumps(manifest, option=orjson.OPT_INDENT_2) + b"\n"


def _record(engine: Engine, result: ExportResult, plan: ExportPlan, user_id: int | None) -> int:
    """Add the export to the exports table; returns its id."""
    with write_session(engine) as session:
        done = session.execute(insert(Export).values(
            user_id=user_id, format=result.format, path=result.path, row_count=result.row_count,
            sha256=result.sha256, created_at=utcnow(),
            filters={**plan.filters.as_dict(), "long": plan.long,
                     "pseudonymize": plan.pseudonymize},
        ))  # fmt: skip
        key = cast(CursorResult[Any], done).inserted_primary_key
        assert key is not None  # an insert of one row
        return int(key[0])


def preview(
    engine: Engine,
    schema: Schema,
    filters: ExportFilters | None = None,
    *,
    limit: int = 20,
    pseudonymize: bool = False,
) -> ExportPreview:
    """Counts per status of the works an export would hold, and its first rows.

    Args:
        engine: the database.
        schema: the label schema.
        filters: which works and questions (default: validated works).
        limit: how many rows to return.
        pseudonymize: show pseudonyms instead of names, as the export would.
    """
    plan = plan_export(engine, schema, fmt="csv", filters=filters, pseudonymize=pseudonymize)
    return preview_gold(engine, plan, limit=limit)


def preview_gold(engine: Engine, plan: ExportPlan, *, limit: int = 20) -> ExportPreview:
    """Counts per status of the works of a planned export, and its first `limit` rows."""
    # One chunk of `limit` works, and no labels: the rows shown are the file's first rows.
    first = replace(plan, chunk_size=max(1, limit), long=False)
    with engine.connect() as conn, conn.begin():
        counts = status_counts(conn, plan.conditions())
        rows: list[dict[str, Any]] = []
        chunks = iter_tables(conn, first)
        for chunk in chunks:
            rows.extend(chunk.table.to_pylist())
            break
        chunks.close()
    order = preview_order(plan.columns, plan.questions)
    return ExportPreview(counts=counts, total=sum(counts.values()), columns=order,
                         rows=rows[:limit])  # fmt: skip
