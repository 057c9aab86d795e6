"""Reading a labels file (CSV, JSON Lines, optionally .gz, or Parquet) and its cells.

open_rows checks what can be checked before any row is read (type, readability, required
columns) and raises LabelError; afterwards it yields one row or one problem per data line,
and a file that stops being readable part-way raises LabelError naming the last line read.
The cell parsers turn one cell into a typed value or raise CellError with a message.
"""

from __future__ import annotations

import csv
import gzip
import json
import zlib
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from labeling.errors import InputError
from labeling.export.csv_cells import unneutralise
from labeling.inputs import shown, storable
from labeling.review.labels import LabelError
from labeling.review.validation import AnswerError, normalise_value
from labeling.schema import Question

IMPORT_COLUMNS = ("work_id", "annotator", "question", "value")
NOT_UTF8 = "not UTF-8 text"
INT32 = (-(2**31), 2**31 - 1)  # the range of the labels table's integer columns
CSV_FIELD_LIMIT = 1 << 26  # a cell up to 64 MiB (a long note); Python's default is 128 KiB
_READ_ERRORS = (OSError, EOFError, zlib.error, csv.Error, UnicodeError)
Row = dict[str, Any]


class CellError(InputError):
    """A cell that cannot be read as what its column holds."""


def _is_utf8(text: str) -> bool:
    """False when decoding left lone surrogates (the bytes were not UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _missing(path: Path, names: Sequence[str] | None) -> None:
    """LabelError naming the required columns a file lacks."""
    missing = [c for c in IMPORT_COLUMNS if c not in (names or [])]
    if missing:
        raise LabelError(f"{path}: missing columns {', '.join(missing)}")


def open_rows(path: Path) -> Iterator[tuple[int, Row | str]]:
    """The (line number, row or problem) of each data line, once the file is known readable.

    Raises LabelError now for a file of unknown type, unreadable, or without the columns
    work_id, annotator, question, value (CSV, Parquet); and while iterating, when the file
    stops being readable (truncated .gz, bad Parquet page, CSV syntax).
    """
    lower = path.name.lower()
    name = lower.removesuffix(".gz")
    if not lower.endswith(".parquet") and not name.endswith((".csv", ".jsonl", ".ndjson",
                                                             ".json")):  # fmt: skip
        raise LabelError(f"{path}: expected a .csv, .jsonl (optionally .gz) or .parquet file")
    try:
        if lower.endswith(".parquet"):
            rows = _parquet(path)
        else:
            opener: Any = gzip.open if lower.endswith(".gz") else open
            # Undecodable bytes become lone surrogates, so a line in another encoding is
            # rejected with its number instead of aborting the whole file.
            fh = opener(path, "rt", encoding="utf-8-sig", errors="surrogateescape", newline="")
            rows = _csv(path, fh) if name.endswith(".csv") else _jsonl(fh)
        next(rows)  # reads the header: a missing column is known now
    except LabelError:
        raise
    except (*_READ_ERRORS, _arrow_error()) as exc:
        raise LabelError(f"{path}: cannot read ({_why(exc)})") from exc
    return _guarded(path, rows)


def _guarded(path: Path, rows: Iterator[Any]) -> Iterator[tuple[int, Row | str]]:
    """The rows, with a read failure part-way turned into a LabelError naming the line."""
    line = 0
    try:
        for line, row in rows:
            yield line, row
    except (*_READ_ERRORS, _arrow_error()) as exc:
        raise LabelError(f"{path}: cannot read after line {line} ({_why(exc)}); "
                         "nothing was imported") from exc  # fmt: skip


def _why(exc: BaseException) -> str:
    """A read error in a few words."""
    return shown(str(exc) or type(exc).__name__)


def _arrow_error() -> type[Exception]:
    """pyarrow's base exception (imported only when needed)."""
    import pyarrow as pa

    return pa.ArrowException


def _parquet(path: Path) -> Iterator[Any]:
    """(row number from 1, row) per row of a Parquet labels file (an export's --long file)."""
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(path)
    _missing(path, parquet.schema_arrow.names)
    yield 0, None  # the header sentinel: columns checked
    number = 0
    for batch in parquet.iter_batches(batch_size=10_000):
        for row in batch.to_pylist():
            number += 1
            yield number, row


def _csv(path: Path, fh: Any) -> Iterator[Any]:
    """(line number, row) per CSV record; cells un-neutralised (labeling.export.csv_cells)."""
    with fh:
        csv.field_size_limit(max(csv.field_size_limit(), CSV_FIELD_LIMIT))
        reader = csv.DictReader(fh)
        _missing(path, reader.fieldnames)
        yield 0, None
        for row in reader:
            cells = [v for v in row.values() if isinstance(v, str)]
            if not all(_is_utf8(v) for v in cells):
                yield reader.line_num, NOT_UTF8
                continue
            yield reader.line_num, {k: unneutralise(v) if isinstance(v, str) else v
                                    for k, v in row.items()}  # fmt: skip


def _jsonl(fh: Any) -> Iterator[Any]:
    """(line number, object or problem) per non-blank JSON line."""
    with fh:
        yield 0, None
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            if not _is_utf8(line):
                yield number, NOT_UTF8
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:  # JSONDecodeError, or an integer too long to convert
                yield number, f"not valid JSON ({getattr(exc, 'msg', exc)})"
                continue
            except RecursionError:
                yield number, "not valid JSON (nested too deeply)"
                continue
            if not isinstance(obj, dict):
                yield number, "not a JSON object"
            elif not _is_utf8(json.dumps(obj, ensure_ascii=False)):  # "\ud800" escapes
                yield number, NOT_UTF8
            else:
                yield number, obj


# ---------------------------------------------------------------- cells


def text_cell(row: Row, key: str, *, limit: int | None = None, strip: bool = False) -> str | None:
    """A text cell (None when missing or empty); CellError when not storable text."""
    value = row.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise CellError(f"{key}: text expected, not {shown(repr(value))[:60]}")
    value = value.strip() if strip else value
    if not storable(value):
        raise CellError(f"{key}: contains a NUL character")
    if limit is not None and len(value) > limit:
        raise CellError(f"{key}: {len(value)} characters, at most {limit}")
    return value or None


def whole_cell(row: Row, key: str, low: int, high: int = INT32[1]) -> int | None:
    """A whole number in [low, high] (None when empty); CellError otherwise."""
    value = row.get(key)
    if value is None or value == "":
        return None
    number = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        digits = value.strip().removeprefix("-")
        if digits.isascii() and digits.isdigit() and len(digits) <= 12:
            number = int(value)
    if number is None:
        raise CellError(f"{key} {shown(repr(value))[:60]}: a whole number expected")
    if not low <= number <= high:
        raise CellError(f"{key} {number}: a whole number in [{low}, {high}] expected")
    return number


def time_cell(row: Row, key: str) -> datetime | None:
    """An ISO 8601 time as UTC (naive: UTC); None when empty; CellError otherwise."""
    value = row.get(key)
    if value is None or value == "":
        return None
    try:
        if isinstance(value, datetime):
            stamp = value
        elif isinstance(value, str):
            stamp = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        else:
            raise ValueError(f"a time expected, not {value!r}")
        return stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise CellError(f"{key}: {shown(str(exc))[:120]}") from exc


def flag_cell(row: Row, key: str) -> bool | None:
    """true/false (JSON, Parquet or CSV text, any case); None when empty; CellError otherwise."""
    value = row.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise CellError(f"{key} {shown(repr(value))[:60]}: true or false expected")


def answer_cell(question: Question, raw: Any) -> Any:
    """One cell of a labels file as a checked answer."""
    if question.kind == "multi":
        if raw is None or isinstance(raw, str):
            raw = [p.strip() for p in (raw or "").split(";") if p.strip()]
        return normalise_value(question, raw)
    if raw is None or raw == "":
        raise AnswerError(f"question '{question.name}': no value")
    return normalise_value(question, raw)


def label_fields(row: Row) -> dict[str, Any]:
    """The label fields beside the answers a row gives (empty cells left out); CellError on
    a bad one. Every row of one label that gives a field must give the same value."""
    values = {
        "created_at": time_cell(row, "created_at"),
        "confidence": whole_cell(row, "confidence", INT32[0]),
        "note": text_cell(row, "note"),
        "time_on_item_ms": whole_cell(row, "time_on_item_ms", 0),
        "model_version": text_cell(row, "model_version", limit=128),
        "scores_visible": flag_cell(row, "scores_visible"),
        "schema_hash": text_cell(row, "schema_hash", limit=64),
        "flagged": flag_cell(row, "flagged"),  # an export's --long file round-trips its flags
    }
    return {k: v for k, v in values.items() if v is not None}
