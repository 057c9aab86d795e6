"""PostgreSQL's binary COPY format: a table's rows built column by column, and read back.

A row is a 16-bit field count, then each field as a 32-bit length (-1 for NULL) and its
bytes, all big-endian (https://www.postgresql.org/docs/current/sql-copy.html, "Binary
Format"). Against the text format the server has no line to split, no escapes to undo and no
numbers or timestamps to parse: 200,000 stored works rows took 8.0-8.3 s of COPY against
10.0-11.0 s as text (bench/RESULTS.md, issue 16, ninth pass). The worker that builds a row
has nothing to escape, and a text value given as UTF-8 bytes (a frame line) is taken as is.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, DateTime, Float, Integer, SmallInteger, String
from sqlalchemy.types import TypeDecorator

SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"  # flags, extension
TRAILER = b"\xff\xff"
NULL = b"\xff\xff\xff\xff"
_LENGTH = struct.Struct(">i").pack
_SHORT = 8192
# The length header of each short value, built once: a list index costs less than a pack.
_HEADS = [_LENGTH(n) for n in range(_SHORT)]
_TRUE, _FALSE = _LENGTH(1) + b"\x01", _LENGTH(1) + b"\x00"
_INT2, _INT4 = struct.Struct(">ih").pack, struct.Struct(">ii").pack
_INT8 = struct.Struct(">iq").pack
_FLOAT8 = struct.Struct(">id").pack
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)  # PostgreSQL's timestamps count from here
_EPOCH_NAIVE = _EPOCH.replace(tzinfo=None)
_MICROSECOND = timedelta(microseconds=1)
_SAMPLE, _FEW = 64, 16  # a text column with at most _FEW distinct values in its first _SAMPLE


def _text_field(v: Any) -> bytes:
    """One text value (str, or its UTF-8 bytes) as a binary COPY field."""
    if v is None:
        return NULL
    data = v if type(v) is bytes else v.encode("utf-8")
    n = len(data)
    return (_HEADS[n] if n < _SHORT else _LENGTH(n)) + data


def _text_fields(values: Sequence[Any]) -> list[bytes]:
    # A column of few distinct values (a language, a venue, the model version) has each
    # value encoded once, then looked up: a works row 7.1 -> 5.8 us (issue 16,
    # twenty-third pass). Whether it has few is judged by its first values.
    if len(set(values[:_SAMPLE])) <= _FEW:
        memo: dict[Any, bytes] = {}
        return [memo[v] if v in memo else memo.setdefault(v, _text_field(v)) for v in values]
    out: list[bytes] = []  # _text_field inlined: this runs for every value of such columns
    append = out.append
    for v in values:
        if v is None:
            append(NULL)
            continue
        data = v if type(v) is bytes else v.encode("utf-8")
        n = len(data)
        append((_HEADS[n] if n < _SHORT else _LENGTH(n)) + data)
    return out


def _bool_fields(values: Sequence[Any]) -> list[bytes]:
    return [NULL if v is None else _TRUE if v else _FALSE for v in values]


def _int2_fields(values: Sequence[Any]) -> list[bytes]:
    return [NULL if v is None else _INT2(2, v) for v in values]


def _int4_fields(values: Sequence[Any]) -> list[bytes]:
    return [NULL if v is None else _INT4(4, v) for v in values]


def _int8_fields(values: Sequence[Any]) -> list[bytes]:
    return [NULL if v is None else _INT8(8, v) for v in values]


def _float8_fields(values: Sequence[Any]) -> list[bytes]:
    return [NULL if v is None else _FLOAT8(8, v) for v in values]


def _time_fields(values: Sequence[Any]) -> list[bytes]:
    # A naive timestamp is taken as UTC, as db.models.UTCDateTime takes it.
    return [
        NULL if v is None
        else _INT8(8, (v - (_EPOCH if v.tzinfo is not None else _EPOCH_NAIVE)) // _MICROSECOND)
        for v in values
    ]  # fmt: skip


def _read_text(data: bytes) -> str:
    return data.decode("utf-8")


def _read_int(data: bytes) -> int:
    return int.from_bytes(data, "big", signed=True)


def _read_float(data: bytes) -> float:
    value: float = struct.unpack(">d", data)[0]
    return value


def _read_bool(data: bytes) -> bool:
    return data != b"\x00"


def _read_time(data: bytes) -> datetime:
    return _EPOCH + _read_int(data) * _MICROSECOND


class Kind:
    """How one column's values become binary COPY fields, and how a field reads back."""

    def __init__(self, fields: Callable[[Sequence[Any]], list[bytes]], read: Any) -> None:
        self.fields, self.read = fields, read


TEXT = Kind(_text_fields, _read_text)
_KINDS = {
    "bool": Kind(_bool_fields, _read_bool),
    "int2": Kind(_int2_fields, _read_int),
    "int4": Kind(_int4_fields, _read_int),
    "int8": Kind(_int8_fields, _read_int),
    "float8": Kind(_float8_fields, _read_float),
    "timestamp": Kind(_time_fields, _read_time),
}


def column_kind(column: Any) -> Kind:
    """The binary COPY encoding of a table column (TypeError for a type it has none for).

    JSON is sent as its text (the `json` type's binary form); `jsonb`, `real`, `numeric`
    and the rest have other forms and are refused rather than written wrong.
    """
    col_type = column.type
    impl = col_type.impl if isinstance(col_type, TypeDecorator) else col_type
    name = type(impl).__name__
    if isinstance(impl, Boolean):
        return _KINDS["bool"]
    if isinstance(impl, Integer):  # SmallInteger and BigInteger are Integers too
        size = "int2" if isinstance(impl, SmallInteger) else "int4"
        return _KINDS["int8" if isinstance(impl, BigInteger) else size]
    if isinstance(impl, Float) and not impl.asdecimal and (impl.precision or 53) > 24:
        return _KINDS["float8"]
    if isinstance(impl, DateTime):
        return _KINDS["timestamp"]
    if type(impl) is JSON or (isinstance(impl, String) and name in ("String", "Text", "VARCHAR")):
        return TEXT
    raise TypeError(f"binary COPY: column {column.name} ({name}) has no encoding here")


def rows_from_columns(
    kinds: Sequence[Kind], columns: Sequence[Sequence[Any]], n: int
) -> list[bytes]:
    """The binary rows of n rows given as one sequence of values per column (in table order).

    A column of one repeated value (a default) may be given as a 1-tuple: encoded once.
    """
    count = struct.pack(">h", len(kinds))
    encoded = []
    for kind, values in zip(kinds, columns, strict=True):
        encoded.append(kind.fields(values) * n if len(values) == 1 else kind.fields(values))
    encoded[0] = [count + field for field in encoded[0]]
    return list(map(b"".join, zip(*encoded, strict=True)))


def read_row(row: bytes) -> list[bytes | None]:
    """A binary row's fields (None for NULL), undecoded."""
    count = int.from_bytes(row[:2], "big", signed=True)
    fields: list[bytes | None] = []
    pos = 2
    for _ in range(count):
        length = int.from_bytes(row[pos : pos + 4], "big", signed=True)
        pos += 4
        if length < 0:
            fields.append(None)
            continue
        fields.append(row[pos : pos + length])
        pos += length
    if pos != len(row):
        raise ValueError(f"binary COPY row: {len(row) - pos} bytes after its {count} fields")
    return fields
