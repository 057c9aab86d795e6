"""Rows built by the workers (db.bulk.RowEncoder) store exactly what bulk_insert stored."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from sqlalchemy import JSON, Engine, delete, select

from db.bulk import RowEncoder, bulk_insert, insert_encoded, insert_new_encoded
from db.engine import (
    BULK_WAL_AUTOCHECKPOINT,
    WAL_AUTOCHECKPOINT,
    RawJSON,
    write_connection,
)
from db.models import Work
from labeling.frames import store, typed
from labeling.frames.lines import Parsed, parse_chunk
from labeling.frames.store import KEPT, add_rows
from labeling.frames.synth import iter_synthetic_records
from labeling.schema import Schema
from tests.conftest import make_record

NOW = datetime(2026, 12, 3, 12, 0, 0, 123456, tzinfo=UTC)


def _lines(seed: dict[str, Any]) -> list[tuple[int, bytes]]:
    """Synthetic records, the seed, and values the COPY text format had to escape."""
    records = list(iter_synthetic_records(30, seed=5))
    odd = make_record(seed, "W77", title='tab\there, new\\nline, back\\\\slash \\r é 𝔘 "q"')
    odd["venue"], odd["doi"], odd["year"], odd["routes"] = "a\\tb\\\\", None, None, None
    sparse = {"id": "W78", "title": "only a title"}  # every other column NULL
    records += [make_record(seed, "W4413411773"), odd, sparse]
    # One line written with a raw tab between tokens (legal JSON whitespace).
    raw = [orjson.dumps(r) for r in records] + [b'{"id":\t"W79", "title": "x"}']
    return list(enumerate(raw, start=1))


def _stored(engine: Engine) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(select(Work).order_by(Work.id))]


def _old_rows(parsed: list[Parsed]) -> list[dict[str, Any]]:
    """The dicts write_batch gave bulk_insert before rows were built in the workers."""
    out = []
    for p in parsed:
        assert p.columns is not None and p.text is not None
        cols = dict(p.columns, record=RawJSON(p.text), record_hash=p.digest)
        cols["updated_at"] = cols["imported_at"] = NOW
        out.append(cols)
    return out


def test_encoded_rows_store_what_bulk_insert_stored(
    engine: Engine, schema: Schema, seed_record: dict[str, Any]
) -> None:
    parsed = parse_chunk(_lines(seed_record), schema)
    assert len(parsed) == 34 and all(p.columns is not None for p in parsed)
    with write_connection(engine) as conn:
        bulk_insert(conn, Work.__table__, _old_rows(parsed))
    before = _stored(engine)
    with write_connection(engine) as conn:
        conn.execute(delete(Work))
    encoder = RowEncoder(Work.__table__, engine.dialect.name)
    fresh = parse_chunk(_lines(seed_record), schema)
    for p in fresh:
        assert p.columns is not None
        p.columns["updated_at"] = p.columns["imported_at"] = NOW
    add_rows(fresh, encoder)
    with write_connection(engine) as conn:
        insert_encoded(conn, encoder, [p.row for p in fresh])
    assert _stored(engine) == before
    # The record text is recovered from a binary COPY row for an update.
    for p, old in zip(fresh, parsed, strict=True):
        assert encoder.value(p.row, "record") == old.text
        assert "updated_at" not in old.columns  # type: ignore[operator]


def _raw(engine: Engine) -> list[tuple[Any, ...]]:
    """The works rows as the driver reads them (SQLite: no bool, no JSON parsed)."""
    with engine.connect() as conn:
        return [tuple(r) for r in conn.exec_driver_sql("SELECT * FROM works ORDER BY id")]


def test_the_import_s_rows_store_the_very_values_bulk_insert_stored(
    engine: Engine, schema: Schema, seed_record: dict[str, Any]
) -> None:
    """Flags bound as integers, records as bytearrays, the human side left out: the database
    holds the same values, of the same types, as from the rows bulk_insert wrote."""
    parsed = parse_chunk(_lines(seed_record), schema)
    with write_connection(engine) as conn:
        bulk_insert(conn, Work.__table__, _old_rows(parsed))
    before = _raw(engine)
    with write_connection(engine) as conn:
        conn.execute(delete(Work))
    encoder = store.work_encoder(engine.dialect.name)
    assert not {"final_answers", "validated_via"} & set(encoder.keys)
    fresh = parse_chunk(_lines(seed_record), schema, None, encoder)
    for p in fresh:
        assert p.row is not None
        if engine.dialect.name == "sqlite":
            flags = [p.row[encoder.keys.index(k)] for k in ("is_gold", "is_retracted")]
            assert isinstance(p.row[encoder.keys.index("record")], bytearray)
            assert all(type(v) is int for v in flags if v is not None)
    with write_connection(engine) as conn:
        insert_encoded(conn, encoder, [p.row for p in fresh])
    stamps = [i for i, c in enumerate(Work.__table__.columns) if c.name.endswith("_at")]
    strip = lambda rows: [tuple(v for i, v in enumerate(r) if i not in stamps) for r in rows]  # noqa: E731
    assert strip(_raw(engine)) == strip(before)
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            kinds = conn.exec_driver_sql(
                "SELECT DISTINCT typeof(is_gold), typeof(record), typeof(final_answers), "
                "typeof(validated_via) FROM works"
            ).all()
        assert kinds == [("integer", "blob", "null", "null")]


def test_only_a_nullable_column_without_a_default_may_be_left_unset() -> None:
    for column in ("status", "id", "is_gold"):
        with pytest.raises(ValueError, match=f"works.{column} cannot be left unset"):
            RowEncoder(Work.__table__, "sqlite", unset=[column])


def test_parse_chunk_with_an_encoder_keeps_everything_else(
    engine: Engine, schema: Schema, seed_record: dict[str, Any]
) -> None:
    lines = _lines(seed_record)
    plain = parse_chunk(lines, schema)
    encoder = RowEncoder(Work.__table__, engine.dialect.name)
    with_rows = parse_chunk(lines, schema, None, encoder)
    for a, b in zip(plain, with_rows, strict=True):
        assert b.row is not None and b.columns is None  # the row replaces the columns
        assert b.text is None  # the row holds the record (packed)
        b.row, b.text, b.columns = None, a.text, a.columns
        assert a == b


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_the_typed_path_builds_the_rows_add_rows_builds(
    dialect: str, schema: Schema, seed_record: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows built column by column in typed_chunk equal rows built from each line's columns."""
    monkeypatch.setattr(typed, "utcnow", lambda: NOW)
    monkeypatch.setattr(store, "utcnow", lambda: NOW)
    lines = _lines(seed_record)
    encoder = RowEncoder(Work.__table__, dialect)
    by_columns = parse_chunk(lines, schema)
    assert all(p.columns is not None for p in by_columns)  # every line took the typed path
    add_rows(by_columns, encoder)
    with_rows = parse_chunk(lines, schema, None, encoder)
    assert [p.row for p in with_rows] == [p.row for p in by_columns]
    assert with_rows == by_columns


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_a_row_decodes_to_the_columns_and_record_it_was_built_from(
    dialect: str, schema: Schema, seed_record: dict[str, Any]
) -> None:
    """What write_batch reads back from a row for an update (the worker sends no columns)."""
    lines = _lines(seed_record)
    plain = parse_chunk(lines, schema)
    encoder = RowEncoder(Work.__table__, dialect)
    with_rows = parse_chunk(lines, schema, None, encoder)
    json_columns = {c.name for c in Work.__table__.columns if isinstance(c.type, JSON)}
    for a, b in zip(plain, with_rows, strict=True):
        assert a.columns is not None
        decoded = encoder.decode(b.row)
        # Exactly the columns an update wrote before, and the record with its hash.
        assert set(decoded) - KEPT == {*a.columns, "record", "record_hash"}
        assert decoded["record"] == a.text and isinstance(decoded["record"], RawJSON)
        assert decoded["record_hash"] == a.digest
        for key, value in a.columns.items():
            got = decoded[key]
            if key in json_columns and value is not None:
                assert isinstance(got, RawJSON) and orjson.loads(str(got)) == value, key
            else:
                assert got == value and type(got) is type(value), key
        assert {k: decoded[k] for k in ("machine", "id")} == encoder.decode(
            b.row, ["machine", "id"]
        )


def test_a_bulk_write_checkpoints_sqlite_less_often_then_restores_the_default(
    sqlite_engine: Engine,
) -> None:
    def threshold(conn: Any) -> int:
        dbapi = conn.connection.driver_connection
        return int(dbapi.execute("PRAGMA wal_autocheckpoint").fetchone()[0])

    with write_connection(sqlite_engine, bulk=True) as conn:
        assert threshold(conn) == BULK_WAL_AUTOCHECKPOINT
        raw = conn.connection.driver_connection
    with sqlite_engine.connect() as conn:
        assert conn.connection.driver_connection is raw  # the same pooled connection
        assert threshold(conn) == WAL_AUTOCHECKPOINT == 1000


def test_insert_new_encoded_skips_the_stored_keys_and_says_which(
    engine: Engine, schema: Schema, seed_record: dict[str, Any]
) -> None:
    encoder = store.work_encoder(engine.dialect.name)
    parsed = parse_chunk(_lines(seed_record), schema, encoder=encoder)
    rows = [p.row for p in parsed]
    with write_connection(engine) as conn:  # another writer stores the 3rd and 5th
        insert_encoded(conn, encoder, [rows[2], rows[4]])
    with write_connection(engine) as conn:
        skipped = insert_new_encoded(conn, encoder, rows, "id")
    stored = {p.work_id for p in parsed}
    # SQLite inserts the rest; PostgreSQL's COPY, in a savepoint, inserts none of them.
    assert skipped == ([2, 4] if engine.dialect.name == "sqlite" else list(range(len(rows))))
    assert {r[0] for r in _stored(engine)} == (
        stored if engine.dialect.name == "sqlite" else {parsed[2].work_id, parsed[4].work_id}
    )


def test_insert_new_encoded_refuses_rows_that_repeat_a_key(
    sqlite_engine: Engine, schema: Schema, seed_record: dict[str, Any]
) -> None:
    encoder = store.work_encoder("sqlite")
    parsed = parse_chunk(_lines(seed_record), schema, encoder=encoder)
    with write_connection(sqlite_engine) as conn:
        with pytest.raises(RuntimeError, match="works: two of the rows have the same id"):
            insert_new_encoded(conn, encoder, [parsed[0].row, parsed[0].row], "id")
