"""The frame record's column type: packed (LZ4) on both engines, a dict in Python."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import lz4.block
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine, select, text

from db.bulk import bulk_insert
from db.engine import read_session, write_connection
from db.models import Work
from db.types import DICTIONARY_2, pack_json, unpack_json
from labeling.frames.importer import import_frame
from labeling.schema import Schema
from tests.conftest import make_record
from tests.factories import insert_works, work_row


@given(st.text())
def test_packed_text_unpacks_to_itself(value: str) -> None:
    assert unpack_json(pack_json(value)) == value
    assert pack_json(value.encode()) == pack_json(value)


@pytest.mark.parametrize(
    "stored",
    ['{"id": "W1"}', b'{"id": "W1"}', b'\n {"id": "W1"}', memoryview(b'{"id": "W1"}')],
)
def test_text_stored_before_reads_as_it_is(stored: str | bytes | memoryview) -> None:
    """Text on SQLite before 0014; UTF-8 bytes on PostgreSQL, retyped to bytea by 0018."""
    expected = stored if isinstance(stored, str) else bytes(stored).decode()
    assert unpack_json(stored) == expected


@pytest.mark.parametrize("stored", [b"\x03abc", b"\x00{}", b""])
def test_an_unknown_packing_is_refused(stored: bytes) -> None:
    with pytest.raises(ValueError, match="not a packed JSON value"):
        unpack_json(stored)


def test_a_record_packs_against_the_dictionary_and_one_packed_before_still_reads(
    seed_record: dict[str, Any],
) -> None:
    text = orjson.dumps(make_record(seed_record, "W42", title="Another title")).decode()
    packed = pack_json(text)
    assert packed[:1] == b"\x02"
    alone = b"\x01" + lz4.block.compress(text.encode())  # as revisions before 0017 packed it
    assert len(packed) < 0.8 * len(alone)
    assert unpack_json(packed) == unpack_json(alone) == text


def test_the_dictionary_never_changes() -> None:
    """Records packed with it read only with these very bytes: another takes another byte."""
    digest = hashlib.sha256(DICTIONARY_2).hexdigest()
    assert digest == "8510d24323c2e23b77b72d4211d4713e09cd95bd67922b3601b477b7589f8cee"


def _stored(engine: Engine) -> dict[str, Any]:
    """Each work's record as the database holds it: (its SQLite storage class or its
    PostgreSQL type, its first byte, its JSON text)."""
    kind = "typeof(record)" if engine.dialect.name == "sqlite" else "pg_typeof(record)::text"
    with engine.connect() as conn:
        rows = conn.execute(text(f"SELECT id, {kind}, record FROM works")).all()
    first = [r[:1].encode() if isinstance(r, str) else bytes(r[:1]) for _, _, r in rows]
    return {w: (k, f, unpack_json(r)) for (w, k, r), f in zip(rows, first, strict=True)}


def test_the_orm_and_a_bulk_insert_pack_and_read_a_dict(engine: Engine) -> None:
    record = {"id": "W1", "title": "tab\t é 𝔘 \\N", "n": [0.5, None, 1]}
    insert_works(engine, [work_row("W1") | {"record": record}])
    bulk = work_row("W2") | {"record": {"id": "W2"}}
    with write_connection(engine) as conn:
        bulk_insert(conn, Work.__table__, [bulk])
    stored = _stored(engine)
    kind = "blob" if engine.dialect.name == "sqlite" else "bytea"
    assert stored["W1"] == (kind, b"\x02", orjson.dumps(record).decode())
    assert stored["W2"] == (kind, b"\x02", '{"id":"W2"}')
    with read_session(engine) as session:
        assert session.get(Work, "W1").record == record  # type: ignore[union-attr]
        assert session.get(Work, "W2").record == {"id": "W2"}  # type: ignore[union-attr]


def test_a_record_stored_as_text_still_reads(sqlite_engine: Engine) -> None:
    """A database written before the record was packed needs no migration."""
    insert_works(sqlite_engine, [work_row("W1")])
    with write_connection(sqlite_engine) as conn:
        conn.execute(text("""UPDATE works SET record = '{"id": "W1", "old": true}'"""))
    assert _stored(sqlite_engine)["W1"] == ("text", b"{", '{"id": "W1", "old": true}')
    with read_session(sqlite_engine) as session:
        record = session.execute(select(Work.record)).scalar_one()
    assert record == {"id": "W1", "old": True}


def test_an_imported_record_is_its_line_exactly(
    engine: Engine, schema: Schema, seed_record: dict[str, Any], tmp_path: Path
) -> None:
    """Fast path, slow path (a number-like title) and an update all store the line's own text."""
    lines = [
        orjson.dumps(make_record(seed_record, "W1", title='tab\t é 𝔘 \\N \\. "q"')),
        orjson.dumps(make_record(seed_record, "W2", title="1e100")),  # the detailed checks' way
        b'{"id":  "W3" ,' + orjson.dumps(make_record(seed_record, "W3"))[11:],  # spaces kept
    ]
    frame = tmp_path / "frame.jsonl"
    frame.write_bytes(b"\n".join(lines) + b"\n")
    assert import_frame(engine, frame, schema).inserted == 3
    lines[0] = orjson.dumps(make_record(seed_record, "W1", title="changed"))
    frame.write_bytes(b"\n".join(lines) + b"\n")
    summary = import_frame(engine, frame, schema)
    assert (summary.updated, summary.unchanged) == (1, 2)
    stored = _stored(engine)
    kind = "blob" if engine.dialect.name == "sqlite" else "bytea"
    assert stored == {
        f"W{i}": (kind, b"\x02", line.decode()) for i, line in enumerate(lines, start=1)
    }
    with read_session(engine) as session:
        records = {w: r for w, r in session.execute(select(Work.id, Work.record))}
    assert records == {f"W{i}": orjson.loads(line) for i, line in enumerate(lines, start=1)}
