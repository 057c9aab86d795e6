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
from itertools import repeat
from typing import Any

import numpy as np
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
_FLAGS = {None: NULL, True: _TRUE, False: _FALSE}
_INT2, _INT4 = struct.Struct(">ih").pack, struct.Struct(">ii").pack
_INT8 = struct.Struct(">iq").pack
_FLOAT8 = struct.Struct(">id").pack
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)  # PostgreSQL's timestamps count from here
_EPOCH_NAIVE = _EPOCH.replace(tzinfo=None)
_MICROSECOND = timedelta(microseconds=1)
_SAMPLE, _FEW = 64, 16  # a text column with at most _FEW distinct values in its first _SAMPLE
# A column's values as binary COPY fields, each field given as one or more parallel lists of
# pieces (a row joins its pieces in order): a length header and the bytes, say, kept apart
# so that neither is copied into a field of its own before the row is joined.
Parts = list[Sequence[bytes]]


def _text_field(v: Any) -> bytes:
    """One text value (str, or its UTF-8 bytes) as a binary COPY field."""
    if v is None:
        return NULL
    data = v if type(v) is bytes else v.encode("utf-8")
    n = len(data)
    return (_HEADS[n] if n < _SHORT else _LENGTH(n)) + data


def _text_fields(values: Sequence[Any]) -> list[bytes]:
    """A text column's values as binary COPY fields, one by one (any mix of str, bytes, None)."""
    out: list[bytes] = []
    append = out.append
    for v in values:
        if v is None:
            append(NULL)
            continue
        data = v if type(v) is bytes else v.encode("utf-8")
        n = len(data)
        append((_HEADS[n] if n < _SHORT else _LENGTH(n)) + data)
    return out


def _utf8(values: Sequence[Any]) -> Sequence[bytes] | None:
    """The values as UTF-8 bytes, if all are str or all are bytes (None: any other mix)."""
    if type(values[0]) is bytes:
        return values if set(map(type, values)) == {bytes} else None
    try:  # a None or a bytes value among them raises
        return list(map(str.encode, values))
    except TypeError:
        return None


def _text_parts(values: Sequence[Any]) -> Parts:
    """A text column's parts (str, bytes or None values)."""
    # A column of few distinct values (a language, a venue, the model version) has each
    # value encoded once, then looked up: a works row 7.1 -> 5.8 us (issue 16,
    # twenty-third pass). Whether it has few is judged by its first values.
    if len(set(values[:_SAMPLE])) <= _FEW:
        memo = {v: _text_field(v) for v in set(values)}
        return [list(map(memo.__getitem__, values))]
    # Otherwise each value's length header and its bytes are two pieces of the row, and
    # every step maps a C function over the column (issue 16, twenty-eighth pass).
    data = _utf8(values)
    if data is None:
        return [_text_fields(values)]
    return [_heads(list(map(len, data))), data]


def _heads(lengths: list[int]) -> list[bytes]:
    """The length header of each field."""
    heads = map(_HEADS.__getitem__, lengths) if max(lengths) < _SHORT else map(_LENGTH, lengths)
    return list(heads)


class Encoded(list[Sequence[bytes]]):
    """A column given to rows_from_columns as its parts already (see Parts)."""


def prefixed_parts(prefix: bytes, data: list[bytes]) -> Encoded:
    """Text (or bytea) fields, each `prefix` then one of `data`, as parts: nothing copied."""
    return Encoded([_heads(list(map(len(prefix).__add__, map(len, data)))),
                    [prefix] * len(data), data])  # fmt: skip


def _mapped(pack: Callable[..., bytes], size: int, values: Sequence[Any]) -> Parts:
    """A fixed-size column's parts: `pack` mapped over it, or value by value if one is None."""
    try:
        return [list(map(pack, repeat(size, len(values)), values))]
    except struct.error:  # a None (or a value the type cannot hold: raised again below)
        return [[NULL if v is None else pack(size, v) for v in values]]


# Module functions, so that a Kind pickles (a worker's RowEncoder is sent to it).
def _int2_parts(values: Sequence[Any]) -> Parts:
    """A smallint column's parts."""
    return _mapped(_INT2, 2, values)


def _int4_parts(values: Sequence[Any]) -> Parts:
    """A integer column's parts."""
    return _mapped(_INT4, 4, values)


def _int8_parts(values: Sequence[Any]) -> Parts:
    """A bigint column's parts."""
    return _mapped(_INT8, 8, values)


def _float8_parts(values: Sequence[Any]) -> Parts:
    """A double precision column's parts."""
    return _mapped(_FLOAT8, 8, values)


def _bool_parts(values: Sequence[Any]) -> Parts:
    """A boolean column's parts (any value is taken by its truth, None as NULL)."""
    try:
        return [list(map(_FLAGS.__getitem__, values))]
    except (KeyError, TypeError):  # another truthy or falsy value
        return [[NULL if v is None else _TRUE if v else _FALSE for v in values]]


def _time_parts(values: Sequence[Any]) -> Parts:
    """A timestamp column's parts."""
    # A naive timestamp is taken as UTC, as db.models.UTCDateTime takes it.
    return [[
        NULL if v is None
        else _INT8(8, (v - (_EPOCH if v.tzinfo is not None else _EPOCH_NAIVE)) // _MICROSECOND)
        for v in values
    ]]  # fmt: skip


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

    def __init__(self, parts: Callable[[Sequence[Any]], Parts], read: Any) -> None:
        self.parts, self.read = parts, read

    def field(self, value: Any) -> bytes:
        """One value's field."""
        return b"".join(piece[0] for piece in self.parts([value]))


TEXT = Kind(_text_parts, _read_text)
FLOAT8 = Kind(_float8_parts, _read_float)
_KINDS = {
    "bool": Kind(_bool_parts, _read_bool),
    "int2": Kind(_int2_parts, _read_int),
    "int4": Kind(_int4_parts, _read_int),
    "int8": Kind(_int8_parts, _read_int),
    "float8": FLOAT8,
    "timestamp": Kind(_time_parts, _read_time),
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


def _float8_block(columns: Sequence[Sequence[Any]], n: int) -> list[bytes] | None:
    """The fields of adjacent float8 columns, one piece a row, built by numpy (None: a None
    or a value that is no float among them, for the columns one by one)."""
    try:
        m = np.array(columns, dtype=">f8")
    except (TypeError, ValueError):
        return None
    if m.shape != (len(columns), n) or np.isnan(m).any():  # numpy reads None as NaN
        return None
    block = np.empty((n, len(columns)), dtype=[("length", ">i4"), ("value", ">f8")])
    block["length"], block["value"] = 8, m.T
    # Each row's fields as one void scalar: tolist() gives their bytes, NUL bytes and all.
    row = np.dtype(("V", block.itemsize * len(columns)))
    fields: list[bytes] = block.view(row).ravel().tolist()  # type: ignore[assignment]
    return fields


def rows_from_columns(
    kinds: Sequence[Kind], columns: Sequence[Sequence[Any]], n: int
) -> list[bytes]:
    """The binary rows of n rows given as one sequence of values per column (in table order).

    A column of one repeated value (a default) may be given as a 1-tuple: encoded once, and
    with the repeated columns next to it as one piece. Adjacent float8 columns (the scores)
    are encoded together, a row's fields as one piece. A column given Encoded is taken as is.
    """
    if n == 0:
        return []
    pieces: list[Any] = []
    fixed = struct.pack(">h", len(kinds))  # the field count, then any repeated columns
    at = 0
    while at < len(kinds):
        kind, values = kinds[at], columns[at]
        if isinstance(values, Encoded):
            if fixed:
                pieces.append(repeat(fixed, n))
                fixed = b""
            pieces += values
            at += 1
            continue
        if len(values) == 1:
            fixed += kind.field(values[0])
            at += 1
            continue
        if fixed:
            pieces.append(repeat(fixed, n))
            fixed = b""
        end = at + 1
        while kind is FLOAT8 and end < len(kinds) and kinds[end] is FLOAT8 \
                and len(columns[end]) != 1:  # fmt: skip
            end += 1
        block = _float8_block(columns[at:end], n) if end - at > 1 else None
        if block is not None:
            pieces.append(block)
        else:
            for k in range(at, end):
                pieces += kinds[k].parts(columns[k])
        at = end
    if fixed:
        pieces.append(repeat(fixed, n))
    return list(map(b"".join, zip(*pieces, strict=True)))


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
