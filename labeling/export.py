"""Gold-set export: CSV, JSON Lines or Parquet, streamed, deterministic, with a manifest.

The data file holds one row per work (see export_rows.wide_columns) ordered by work id, and
nothing that depends on when it was written; the manifest beside it (PATH.manifest.json)
holds the creation time, filters, schema hash, counts and the file's sha256. The same
database state therefore exports byte-identical data files.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson
from sqlalchemy import Engine, insert

import labeling
from db.engine import write_session
from db.models import Export, utcnow
from labeling.export_rows import (
    CHUNK,
    LONG_COLUMNS,
    ExportError,
    ExportFilters,
    GoldChunk,
    iter_chunks,
    resolve_campaign,
    select_questions,
    status_counts,
    wide_columns,
    work_conditions,
)
from labeling.schema import Schema

__all__ = ["FORMATS", "ExportError", "ExportFilters", "ExportPreview", "ExportResult",
           "export_gold", "long_path", "manifest_path", "preview"]  # fmt: skip

FORMATS = ("csv", "jsonl", "parquet")
ROW_GROUP = 65_536
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
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
    """Counts per status of the matching works and the first rows of the gold set."""

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


def neutralise(text: str) -> str:
    """A CSV cell a spreadsheet would run as a formula, prefixed with an apostrophe."""
    return "'" + text if text.startswith(FORMULA_START) else text


def _csv_str(value: Any) -> str:
    """A text cell, neutralised."""
    if value is None:
        return ""
    return "'" + value if value and value[0] in "=+-@\t\r" else value


def _csv_list(value: Any) -> str:
    """A list cell: labels ;-joined, neutralised."""
    return "" if value is None else _csv_str(";".join(str(v) for v in value))


def _csv_other(value: Any) -> Any:
    """A number or flag cell: floats as repr, booleans true/false, None empty."""
    if value is None:
        return ""
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, list):
        return _csv_list(value)
    if isinstance(value, str):
        return _csv_str(value)
    return repr(value) if isinstance(value, float) else value


_CSV_CELL = {"str": _csv_str, "list": _csv_list}


class _HashingFile:
    """A binary file that also hashes and counts what is written to it."""

    def __init__(self, fh: IO[bytes]) -> None:
        """Wrap an open binary file."""
        self.fh = fh
        self.sha = hashlib.sha256()

    def write(self, data: bytes) -> int:
        """Write and hash."""
        self.sha.update(data)
        return self.fh.write(data)


class _Writer:
    """Streams rows of fixed columns into one file of one format."""

    def __init__(self, path: Path, fmt: str, columns: list[tuple[str, str]]) -> None:
        """Open a temporary file beside `path` (renamed into place by close)."""
        self.path, self.fmt, self.columns = path, fmt, columns
        self.names = [c for c, _ in columns]
        self.tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        self.rows = 0
        self._convs = [(c, _CSV_CELL.get(k, _csv_other)) for c, k in columns]
        self._pq: Any = None
        self._batches: list[Any] = []
        self._pending = 0
        # Parquet writes its own file (hashed when closed); text formats stream through here.
        self._fh = self.tmp.open("wb") if fmt != "parquet" else io.BytesIO()
        self._out = _HashingFile(self._fh)
        if fmt == "csv":
            self._text = io.StringIO()
            self._csv = csv.writer(self._text, lineterminator="\n")
            self._csv.writerow(self.names)
            self._flush_text()
        elif fmt == "parquet":
            import pyarrow.parquet as pq

            self._schema = _arrow_schema(columns)
            self._pq = pq.ParquetWriter(
                str(self.tmp), self._schema, compression="zstd", compression_level=3,
                use_dictionary=True, write_statistics=True, version="2.6",
                data_page_version="1.0", store_schema=True,
            )  # fmt: skip

    def _flush_text(self) -> None:
        """Move the CSV text buffer to the file as UTF-8."""
        self._out.write(self._text.getvalue().encode("utf-8"))
        self._text.seek(0)
        self._text.truncate()

    def write(self, rows: Sequence[dict[str, Any]]) -> None:
        """Append rows (Parquet: buffered as Arrow batches until a row group is full)."""
        if not rows:
            return
        self.rows += len(rows)
        if self.fmt == "csv":
            convs = self._convs
            self._csv.writerows([[f(r[c]) for c, f in convs] for r in rows])
            self._flush_text()
        elif self.fmt == "jsonl":
            data = b"".join(orjson.dumps({c: r[c] for c in self.names}) + b"\n" for r in rows)
            # U+2028/2029 are valid in JSON but split lines in some readers (JavaScript).
            self._out.write(data.replace("\u2028".encode(), b"\\u2028")
                            .replace("\u2029".encode(), b"\\u2029"))  # fmt: skip
        else:
            import pyarrow as pa

            arrays = [pa.array([r[c] for r in rows], type=self._schema.field(c).type)
                      for c in self.names]  # fmt: skip
            self._batches.append(pa.RecordBatch.from_arrays(arrays, schema=self._schema))
            self._pending += len(rows)
            if self._pending >= ROW_GROUP:
                self._flush_groups(final=False)

    def _flush_groups(self, *, final: bool) -> None:
        """Write pending Parquet rows in row groups of exactly ROW_GROUP rows (the last may
        be shorter), so the file layout does not depend on how rows were chunked."""
        import pyarrow as pa

        table = pa.Table.from_batches(self._batches, schema=self._schema)
        while table.num_rows >= ROW_GROUP or (final and table.num_rows):
            size = min(ROW_GROUP, table.num_rows)
            self._pq.write_table(table.slice(0, size), row_group_size=size)
            table = table.slice(size)
        self._batches = table.combine_chunks().to_batches() if table.num_rows else []
        self._pending = table.num_rows

    def close(self) -> str:
        """Finish the file, move it into place and return its sha256."""
        self._fh.close()
        if self._pq is not None:
            self._flush_groups(final=True)
            self._pq.close()
            with self.tmp.open("rb") as fh:
                while block := fh.read(1 << 20):
                    self._out.sha.update(block)
        os.replace(self.tmp, self.path)
        return self._out.sha.hexdigest()

    def abort(self) -> None:
        """Drop the temporary file after a failure."""
        try:
            if self._pq is not None:
                self._pq.close()
        except Exception:  # noqa: BLE001 - already failing; the file is removed anyway
            pass
        self._fh.close()
        self.tmp.unlink(missing_ok=True)


def _arrow_schema(columns: list[tuple[str, str]]) -> Any:
    """The fixed Arrow schema of a column list (no pandas metadata)."""
    import pyarrow as pa

    kinds = {"str": pa.string(), "answer": pa.string(), "int": pa.int64(),
             "float": pa.float64(), "bool": pa.bool_(), "list": pa.list_(pa.string())}
    return pa.schema([pa.field(name, kinds[kind]) for name, kind in columns])


def _long_for(fmt: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Long rows ready for a format: Parquet wants the value column as text."""
    if fmt != "parquet":
        return rows
    return [{**r, "value": ";".join(r["value"]) if isinstance(r["value"], list) else r["value"]}
            for r in rows]  # fmt: skip


# ---------------------------------------------------------------- public API


def _check(fmt: str, schema: Schema, filters: ExportFilters) -> None:
    """ExportError on a bad format, status, date range or question before touching files."""
    if fmt not in FORMATS:
        raise ExportError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    select_questions(schema, filters.questions)
    work_conditions(filters, None)


def export_gold(
    engine: Engine, schema: Schema, out: str | Path, *, fmt: str,
    filters: ExportFilters | None = None, long: bool = False, pseudonymize: bool = False,
    user_id: int | None = None, chunk_size: int = CHUNK,
) -> ExportResult:
    """Write a gold set, its manifest (and optionally the labels file), and record the export.

    Args:
        engine: the database.
        schema: the label schema (questions, teachers, hash).
        out: the data file to write (replaced atomically).
        fmt: "csv", "jsonl" or "parquet".
        filters: which works and questions (default: validated works, every question).
        long: also write every current label, one row per question (see long_path); CSV and
            JSONL long files can be imported again with import_labels.
        pseudonymize: replace annotator and lead names by stable pseudonyms.
        user_id: who exported (kept in the exports table).
        chunk_size: works read and built per step (memory; the files do not depend on it).

    Returns:
        Paths, row counts, counts per status and sha256 of what was written.
    """
    filters = filters or ExportFilters()
    _check(fmt, schema, filters)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    questions = select_questions(schema, filters.questions)
    columns = wide_columns(schema, questions)
    main = _Writer(out, fmt, columns)
    lpath = long_path(out, fmt) if long else None
    side = _Writer(lpath, fmt, LONG_COLUMNS) if lpath is not None else None
    counts: Counter[str] = Counter()
    try:
        with engine.connect() as conn, conn.begin():
            for chunk in iter_chunks(conn, schema, filters, pseudonymize=pseudonymize,
                                     chunk_size=chunk_size, with_labels=long):  # fmt: skip
                main.write(chunk.rows)
                counts.update(r["status"] for r in chunk.rows)
                if side is not None:
                    side.write(_long_for(fmt, chunk.labels))
        digest = main.close()
        long_digest = side.close() if side is not None else None
    except BaseException:
        main.abort()
        if side is not None:
            side.abort()
        raise
    result = ExportResult(
        path=str(out), format=fmt, row_count=main.rows, sha256=digest,
        counts=dict(sorted(counts.items())), manifest_path=str(manifest_path(out)),
        long_path=str(lpath) if lpath else None, long_rows=side.rows if side else 0,
        long_sha256=long_digest,
    )  # fmt: skip
    _write_manifest(result, schema, filters, columns, pseudonymize)
    result.export_id = _record(engine, result, filters, long, pseudonymize, user_id)
    return result


def _write_manifest(
    result: ExportResult, schema: Schema, filters: ExportFilters,
    columns: list[tuple[str, str]], pseudonymize: bool,
) -> None:
    """Write PATH.manifest.json describing the export."""
    manifest = {
        "tool": "labeling", "tool_version": labeling.__version__,
        "created_at": utcnow().isoformat(timespec="seconds"),
        "file": Path(result.path).name, "format": result.format, "sha256": result.sha256,
        "bytes": Path(result.path).stat().st_size, "row_count": result.row_count,
        "counts_per_status": result.counts, "filters": filters.as_dict(),
        "schema": {"version": schema.version, "hash": schema.hash, "path": schema.path,
                   "teachers": list(schema.teachers),
                   "questions": [q.name for q in select_questions(schema, filters.questions)]},
        "columns": [{"name": c, "type": k} for c, k in columns],
        "order": "work_id ascending",
        "labels_file": None if result.long_path is None else {
            "file": Path(result.long_path).name, "sha256": result.long_sha256,
            "row_count": result.long_rows,
            "content": "the current (latest, non-skipped) label of each annotator per work and "
                       "campaign, one row per question; importable with labeling import-labels",
        },
        "pseudonymized": pseudonymize,
        "pseudonyms": PSEUDONYM_NOTE if pseudonymize else None,
        "csv": "UTF-8, no BOM; multi-label answers ';'-joined; cells starting with = + - @ tab "
               "or CR are prefixed with an apostrophe" if result.format == "csv" else None,
    }  # fmt: skip
    target = Path(result.manifest_path)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    tmp.write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2) + b"\n")
    os.replace(tmp, target)


def _record(
    engine: Engine, result: ExportResult, filters: ExportFilters, long: bool,
    pseudonymize: bool, user_id: int | None,
) -> int:
    """Add the export to the exports table; returns its id."""
    with write_session(engine) as session:
        return session.execute(insert(Export).values(
            user_id=user_id, format=result.format, path=result.path, row_count=result.row_count,
            sha256=result.sha256, created_at=utcnow(),
            filters={**filters.as_dict(), "long": long, "pseudonymize": pseudonymize},
        )).inserted_primary_key[0]  # fmt: skip


def preview(
    engine: Engine, schema: Schema, filters: ExportFilters | None = None, *, limit: int = 20,
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
    filters = filters or ExportFilters()
    _check("csv", schema, filters)
    columns = [c for c, _ in wide_columns(schema, select_questions(schema, filters.questions))]
    with engine.connect() as conn, conn.begin():
        camp = resolve_campaign(conn, filters.campaign)
        counts = status_counts(conn, work_conditions(filters, camp.id if camp else None))
        rows: list[dict[str, Any]] = []
        chunks: Iterator[GoldChunk] = iter_chunks(
            conn, schema, filters, pseudonymize=pseudonymize, chunk_size=max(1, limit))
        for chunk in chunks:
            rows.extend(chunk.rows)
            break
        chunks.close()  # type: ignore[attr-defined]
    return ExportPreview(counts=counts, total=sum(counts.values()), columns=columns,
                         rows=rows[:limit])  # fmt: skip
