"""Rows in PostgreSQL's binary COPY format: built column by column, read back, stored as given."""

from __future__ import annotations

import struct
from datetime import UTC, datetime, timedelta
from hashlib import sha256
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import (
    JSON,
    Column,
    Engine,
    Float,
    Integer,
    MetaData,
    Numeric,
    String,
    Table,
    delete,
    select,
)
from sqlalchemy.dialects.postgresql import JSONB

from db.bulk import RowEncoder, insert_encoded
from db.copy_binary import (
    _KINDS,
    TEXT,
    _text_field,
    _text_fields,
    column_kind,
    read_row,
    rows_from_columns,
)
from db.engine import RawJSON, write_connection
from db.models import Work
from db.types import pack_json

# Text with the characters the text format had to escape, and beyond the BMP.
_TEXT = st.text(alphabet=st.sampled_from(["a", "é", "\\", "\t", "\n", "\r", "N", " ", "𝔘", '"']))
_INT4 = st.integers(-(2**31), 2**31 - 1)
_FLOAT = st.floats(allow_nan=False)
_TIME = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)
# Row dicts as a chunk gives them: a few of the works table's columns, each maybe absent.
_COLUMNS = {
    "id": _TEXT, "title": st.none() | _TEXT, "year": st.none() | _INT4,
    "routes": st.none() | _TEXT.map(RawJSON) | st.dictionaries(_TEXT, st.booleans()),
    "score_opus": st.none() | _FLOAT, "is_retracted": st.none() | st.booleans(),
    "imported_at": st.none() | _TIME,
}  # fmt: skip
NOW = datetime(2026, 12, 3, 22, 30, 0, 123456, tzinfo=UTC)


@given(st.lists(st.fixed_dictionaries({}, optional=_COLUMNS), max_size=6),
       st.sampled_from(["sqlite", "postgresql"]))  # fmt: skip
def test_rows_from_columns_equal_rows_from_dicts(rows: list[dict[str, Any]], dialect: str) -> None:
    encoder = RowEncoder(Work.__table__, dialect)
    keys = sorted({k for row in rows for k in row})
    # A key some row lacks is None in its column; a column not given takes its default.
    full = [{k: row.get(k) for k in keys} for row in rows]
    columns = {k: [row[k] for row in full] for k in keys}
    assert encoder.encode_columns(columns, len(rows), NOW) == encoder.encode(full, NOW)


@given(st.fixed_dictionaries({}, optional=_COLUMNS))
def test_a_binary_row_reads_back_as_it_was_given(row: dict[str, Any]) -> None:
    encoder = RowEncoder(Work.__table__, "postgresql")
    [encoded] = encoder.encode([row], NOW)
    back = encoder.decode(encoded, [*encoder.keys])
    assert len(read_row(encoded)) == len(encoder.keys)
    for key in encoder.keys:
        given_value = row.get(key)
        if key == "routes" and isinstance(given_value, dict):
            assert isinstance(back[key], RawJSON) and back[key] != ""
        elif key in ("imported_at", "updated_at"):
            assert back[key] == (given_value or NOW)
        elif key in row:
            assert back[key] == given_value and type(back[key]) is type(given_value), key
    assert back["status"] == "machine_predicted_unvalidated" and back["is_gold"] is False


def test_text_given_as_bytes_is_the_text_given_as_str() -> None:
    encoder = RowEncoder(Work.__table__, "postgresql")
    record = '{"id":"W1","title":"tab\\there é 𝔘"}'
    as_str = encoder.encode_columns({"id": ["W1"], "record": [record]}, 1, NOW)
    as_bytes = encoder.encode_columns({"id": ["W1"], "record": [record.encode()]}, 1, NOW)
    assert as_str == as_bytes and encoder.value(as_bytes[0], "record") == record


_MANY = [f"title {i} é" for i in range(300)]
_FEW = ["en", None, "fr", b"de", "en"] * 60


@pytest.mark.parametrize(
    "values",
    [_MANY, _FEW, ["[]"] * 64 + _MANY, _FEW[:64] + [x.encode() for x in _MANY], ["x" * 9000] * 3],
    ids=["all distinct", "few", "few first then distinct", "bytes among them", "long"],
)
def test_a_text_column_is_encoded_value_by_value_however_many_values_repeat(
    values: list[Any],
) -> None:
    # A column of few distinct values takes a memo: it must give what each value alone gives.
    fields = _text_fields(values)
    assert fields == [_text_field(v) for v in values]
    for value, field in zip(values, fields, strict=True):
        text = None if value is None else value if isinstance(value, bytes) else value.encode()
        assert read_row(b"\x00\x01" + field) == [text]


def test_a_row_with_bytes_after_its_fields_is_refused() -> None:
    [row] = RowEncoder(Work.__table__, "postgresql").encode([{"id": "W1"}], NOW)
    assert len(read_row(row)) == len(Work.__table__.columns)
    with pytest.raises(ValueError, match="4 bytes after its 35 fields"):
        read_row(row + b"\x00\x00\x00\x00")


@pytest.mark.parametrize(
    "column_type", [JSONB(), Float(precision=24), Numeric(10, 2), Float(asdecimal=True)]
)
def test_a_type_without_a_binary_encoding_here_is_refused(column_type: Any) -> None:
    table = Table("t", MetaData(), Column("x", column_type))
    with pytest.raises(TypeError, match=r"column x \(\w+\) has no encoding"):
        column_kind(table.c.x)


# Values at the edges of what each column type holds, as the server must store them.
_HOSTILE = [
    {"id": "W1", "title": 'tab\there, new\nline, back\\slash \\N \\. \r é 𝔘 "q"', "year": 2**31 - 1,
     "cited_by": -(2**31), "routes": {"a": True, "é\t": None}, "score_opus": 5e-324,
     "score_gpt": 1.7976931348623157e308, "score_max": 1.0, "score_spread": 0.1 + 0.2,
     "is_retracted": True, "has_abstract": False, "imported_at": NOW - timedelta(days=10**5)},
    {"id": "W2", "title": "", "venue": "\\", "record": '{"id":"W2","x":"\\u00e9\\\\"}',
     "year": None, "routes": None, "score_opus": None},
]  # fmt: skip


def test_binary_rows_store_every_value_exactly(engine: Engine) -> None:
    """On both engines (SQLite takes tuples): what is read back is what was given."""
    encoder = RowEncoder(Work.__table__, engine.dialect.name)
    rows = [dict(r, record=r.get("record", '{"id":"W"}'), record_hash="h") for r in _HOSTILE]
    with write_connection(engine) as conn:
        conn.execute(delete(Work))
        insert_encoded(conn, encoder, encoder.encode(rows, NOW))
    with engine.connect() as conn:
        stored = {w.id: w for w in conn.execute(select(Work)).all()}
    for row in rows:
        got = stored[row["id"]]
        for key, value in row.items():
            value = value if key != "record" else orjson.loads(value)
            assert getattr(got, key) == value, key
        assert got.updated_at == NOW and got.status == "machine_predicted_unvalidated"


def test_a_json_column_is_sent_as_text() -> None:
    table = Table("t", MetaData(), Column("j", JSON), Column("n", Integer), Column("s", String))
    encoder = RowEncoder(table, "postgresql")
    [row] = encoder.encode([{"j": {"a": [1, 2]}, "n": 7, "s": "x"}], NOW)
    assert read_row(row) == [b'{"a":[1,2]}', b"\x00\x00\x00\x07", b"x"]


# The kinds of a made-up table (adjacent float8 columns are encoded together) and values of
# each, None among them; a text value may be given as str or as its UTF-8 bytes.
_KIND_OF = ["text", "float8", "float8", "float8", "bool", "int4", "text", "float8", "int8"]
_VALUE_OF = {
    "text": st.none() | _TEXT | _TEXT.map(str.encode) | st.just("é" * 9000),
    "float8": st.none() | st.floats(),  # NaN and infinities too: binary COPY stores them
    "bool": st.none() | st.booleans() | st.sampled_from([0, 1, "", "yes"]),
    "int4": st.none() | _INT4,
    "int8": st.none() | st.integers(-(2**63), 2**63 - 1),
}
_PACK = {"float8": struct.Struct(">d").pack, "int4": struct.Struct(">i").pack,
         "int8": struct.Struct(">q").pack}  # fmt: skip


def _reference_field(kind: str, value: Any) -> bytes:
    """A field as the binary COPY format defines it, built value by value."""
    if value is None:
        return b"\xff\xff\xff\xff"
    if kind == "text":
        data = value if isinstance(value, bytes) else value.encode()
    elif kind == "bool":
        data = b"\x01" if value else b"\x00"
    else:
        data = _PACK[kind](value)
    return struct.pack(">i", len(data)) + data


@given(st.data(), st.integers(1, 5))
def test_rows_built_column_by_column_are_the_format_value_by_value(data: Any, n: int) -> None:
    kinds = [_KINDS[k] if k != "text" else TEXT for k in _KIND_OF]
    columns: list[Any] = []
    for kind in _KIND_OF:
        if data.draw(st.booleans()):  # a column of one repeated value, given once
            columns.append((data.draw(_VALUE_OF[kind]),))
        else:
            columns.append(data.draw(st.lists(_VALUE_OF[kind], min_size=n, max_size=n)))
    rows = rows_from_columns(kinds, columns, n)
    for i, row in enumerate(rows):
        fields = [_reference_field(k, c[0] if len(c) == 1 else c[i])
                  for k, c in zip(_KIND_OF, columns, strict=True)]  # fmt: skip
        assert row == struct.pack(">h", len(kinds)) + b"".join(fields)


@pytest.mark.parametrize("values", [
    [1.5, None, 0.25], [0.5, float("nan")], [True, 0.5], [2**70, 0.5],
], ids=["None", "NaN", "a bool", "a large int"])  # fmt: skip
def test_float_columns_side_by_side_with_any_value_encode_as_each_alone(values: list[Any]) -> None:
    other = [0.75] * len(values)
    kinds = [_KINDS["float8"], _KINDS["float8"]]
    rows = rows_from_columns(kinds, [values, other], len(values))
    assert rows == [b"\x00\x02" + _reference_field("float8", v) + _reference_field("float8", 0.75)
                    for v in values]  # fmt: skip


def test_a_value_a_column_cannot_hold_is_refused_as_before() -> None:
    with pytest.raises(struct.error):
        rows_from_columns([_KINDS["int4"]], [[1, 2**40]], 2)
    with pytest.raises(struct.error):
        rows_from_columns([_KINDS["float8"], _KINDS["float8"]], [["x", 1.0], [1.0, 2.0]], 2)


# Over 8 KB once packed: hex digits of sha256 chains hardly compress.
_LONG = b'{"x":"' + b"".join(sha256(b"%d" % i).hexdigest().encode() for i in range(600)) + b'"}'


@pytest.mark.parametrize("records", [
    [b'{"id":"W1"}', b'{"id":"W2","t":"\xc3\xa9"}'], [b'{"id":"W1"}', '{"id":"W2"}'], [_LONG] * 2,
], ids=["bytes", "str among them", "long"])  # fmt: skip
def test_records_packed_together_are_fields_of_what_pack_json_gives(records: list[Any]) -> None:
    encoder = RowEncoder(Work.__table__, "postgresql")
    rows = encoder.encode_columns({"id": ["W1", "W2"], "record": records}, 2, NOW)
    at = encoder.keys.index("record")
    for row, record in zip(rows, records, strict=True):
        assert read_row(row)[at] == pack_json(record)
        assert record is not _LONG or len(pack_json(record)) > 8192  # a long field's header
        assert encoder.value(row, "record") == (
            record if isinstance(record, str) else record.decode()
        )
