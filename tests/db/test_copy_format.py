"""Rows in PostgreSQL's COPY text format: the line at once equals the line field by field."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from db.bulk import RowEncoder, _copy_field, _copy_line
from db.engine import RawJSON
from db.models import Work

# Text with the characters COPY escapes, and values of every type a works row holds.
_TEXT = st.text(alphabet=st.sampled_from(["a", "é", "\\", "\t", "\n", "\r", "N", " ", "𝔘"]))
_VALUE = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), _TEXT,
    _TEXT.map(RawJSON), st.datetimes(timezones=st.just(UTC)),
)  # fmt: skip


def _field_by_field(values: list[Any]) -> bytes:
    return ("\t".join([_copy_field(v) for v in values]) + "\n").encode("utf-8")


@given(st.lists(_VALUE, min_size=1, max_size=12))
def test_a_line_escaped_at_once_is_the_line_escaped_field_by_field(values: list[Any]) -> None:
    assert _copy_line(values) == _field_by_field(values)


def test_an_encoded_row_reads_back_with_every_escape() -> None:
    encoder = RowEncoder(Work.__table__, "postgresql")
    title = 'tab\there, new\nline, back\\slash \\N \r é 𝔘 "q"'
    now = datetime(2026, 12, 3, 19, 40, tzinfo=UTC)
    [row] = encoder.encode([{"id": "W1", "title": title, "year": 2020, "routes": {"a": 1}}], now)
    assert row == _field_by_field([
        {"id": "W1", "title": title, "year": 2020, "routes": '{"a":1}'}.get(k, d)
        if k not in ("imported_at", "updated_at") else now
        for k, d in zip(encoder.keys, encoder.defaults, strict=True)
    ])  # fmt: skip
    back = encoder.decode(row, ["id", "title", "year", "routes", "is_gold", "status"])
    assert back == {"id": "W1", "title": title, "year": 2020, "routes": '{"a":1}',
                    "is_gold": False, "status": "machine_predicted_unvalidated"}  # fmt: skip


# Row dicts as a chunk gives them: a few of the works table's columns, each maybe absent.
_COLUMNS = ["id", "title", "year", "routes", "score_opus", "is_retracted", "imported_at"]
# orjson (and a JSON column) takes integers of 64 bits at most.
_ROW_VALUE = _VALUE.filter(lambda v: type(v) is not int or -(2**63) <= v < 2**64)


@given(st.lists(st.fixed_dictionaries({}, optional={k: _ROW_VALUE for k in _COLUMNS}), max_size=6),
       st.sampled_from(["sqlite", "postgresql"]))  # fmt: skip
def test_rows_from_columns_equal_rows_from_dicts(rows: list[dict[str, Any]], dialect: str) -> None:
    encoder = RowEncoder(Work.__table__, dialect)
    now = datetime(2026, 12, 3, 22, 30, tzinfo=UTC)
    keys = sorted({k for row in rows for k in row})
    # A key some row lacks is None in its column; a column not given takes its default.
    full = [{k: row.get(k) for k in keys} for row in rows]
    columns = {k: [row[k] for row in full] for k in keys}
    assert encoder.encode_columns(columns, len(rows), now) == encoder.encode(full, now)
