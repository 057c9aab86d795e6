"""Column types of the models that read the same in Python on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import lz4.block
import orjson
from sqlalchemy import JSON, DateTime, Text
from sqlalchemy.types import TypeDecorator

from db.engine import json_text

__all__ = ["JSONText", "UTCDateTime", "pack_json", "pack_value", "unpack_json"]

# The first byte of a packed value says how the rest is stored, an LZ4 block with its size:
# 1, on its own; 2, compressed against DICTIONARY_2. A dictionary never changes once rows
# are packed with it: another one would take another byte.
LZ4_BLOCK = b"\x01"
LZ4_DICTIONARY_2 = b"\x02"
# A real frame record (the seed the record format was written from). A record repeats most
# of its keys, label names and phrases: against it, LZ4 packs a 3 KB record into about
# 1.3 KB instead of 2.0 KB (the demo's real records and the bench's alike), fewer bytes to
# stage, write, check-point and scan, for 3-4 us more a record (issue 16, twenty-first
# pass).
DICTIONARY_2 = (Path(__file__).parent / "data" / "pack_dictionary_2.json").read_bytes()


class UTCDateTime(TypeDecorator):
    """A timestamp that is always timezone-aware UTC in Python, on SQLite and PostgreSQL."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        value = (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC)
        # SQLite keeps text; a naive UTC string sorts and compares correctly there.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def pack_json(text: str | bytes) -> bytes:
    """JSON text as SQLite keeps a JSONText value: a BLOB, LZ4-compressed (see JSONText)."""
    data = text.encode() if isinstance(text, str) else text
    return LZ4_DICTIONARY_2 + lz4.block.compress(data, dict=DICTIONARY_2)


def pack_value(value: Any) -> bytes | None:
    """A JSONText value (an object, or RawJSON text) as SQLite stores it; None stays NULL."""
    return None if value is None else pack_json(json_text(value))


def unpack_json(value: str | bytes) -> str:
    """The JSON text of a stored JSONText value: a packed BLOB, or text as stored before."""
    if isinstance(value, str):
        return value
    kind = value[:1]
    if kind == LZ4_DICTIONARY_2:
        return lz4.block.decompress(memoryview(value)[1:], dict=DICTIONARY_2).decode()
    if kind != LZ4_BLOCK:
        raise ValueError(f"not a packed JSON value (first byte {kind!r})")
    return lz4.block.decompress(memoryview(value)[1:]).decode()


class JSONText(TypeDecorator):
    """JSON kept as text the database does not parse: `text` on PostgreSQL, LZ4 on SQLite.

    For the frame record, which the importer has decoded and checked before it is written:
    the `json` type's input check took a third of the server's COPY time for 3 KB records
    (bench/RESULTS.md, issue 16, ninth pass). In SQL on PostgreSQL, `record::json` reads it
    as JSON; PostgreSQL compresses it itself (TOAST, lz4).
    SQLite compresses nothing: there the value is a BLOB packed by pack_json (the import's
    workers pack each line), about 30% fewer bytes to write, check-point and scan for each
    index built after a load (issue 16, tenth pass; migration 0014), and fewer again packed
    against a dictionary (migration 0017). Text stored before, or by hand, still reads. In
    Python it is JSON (a dict) on every engine.
    """

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Any) -> Any:
        return Text() if dialect.name == "postgresql" else JSON()

    def bind_processor(self, dialect: Any) -> Any:
        if dialect.name != "sqlite":
            return super().bind_processor(dialect)
        return pack_value

    def result_processor(self, dialect: Any, coltype: Any) -> Any:
        if dialect.name != "sqlite":
            return super().result_processor(dialect, coltype)

        def unpack(value: Any) -> Any:
            return None if value is None else orjson.loads(unpack_json(value))

        return unpack

    def process_bind_param(self, value: Any, dialect: Any) -> Any:
        return value if value is None else json_text(value)

    def process_result_value(self, value: Any, dialect: Any) -> Any:
        return value if value is None else orjson.loads(value)
