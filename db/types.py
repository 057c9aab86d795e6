"""Column types of the models that read the same in Python on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import lz4.block
import orjson
from sqlalchemy import JSON, DateTime, LargeBinary
from sqlalchemy.types import TypeDecorator

from db.engine import json_text

__all__ = ["JSONText", "UTCDateTime", "pack_json", "pack_texts", "pack_value", "unpack_json"]

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
_PACK_2 = partial(lz4.block.compress, dict=DICTIONARY_2)
_JSON_SPACE = (b" ", b"\t", b"\n", b"\r")  # what JSON text may start with below 0x20


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
    """JSON text as a JSONText value is stored: LZ4 against DICTIONARY_2 (see JSONText)."""
    data = text.encode() if isinstance(text, str) else text
    return LZ4_DICTIONARY_2 + _PACK_2(data)


def pack_texts(texts: Sequence[bytes]) -> tuple[bytes, list[bytes]]:
    """Many JSON texts (UTF-8 bytes) packed as pack_json packs each, given as the first byte
    they all start with and the rest of each: a caller can send the two without joining them.
    """
    return LZ4_DICTIONARY_2, list(map(_PACK_2, texts))


def pack_value(value: Any) -> bytes | None:
    """A JSONText value (an object, or RawJSON text) as it is stored; None stays NULL."""
    return None if value is None else pack_json(json_text(value))


def unpack_json(value: str | bytes | memoryview) -> str:
    """The JSON text of a stored JSONText value: a packed value, or text as stored before.

    Text comes as a str (SQLite, before migration 0014) or as its UTF-8 bytes (PostgreSQL,
    records written before migration 0018 turned the column into bytea). JSON text never
    starts with a control character, so a first byte below 0x20 that is not whitespace
    says how the value is packed, and one this code does not know is refused.
    """
    if isinstance(value, str):
        return value
    kind = bytes(value[:1])
    if kind == LZ4_DICTIONARY_2:
        return lz4.block.decompress(memoryview(value)[1:], dict=DICTIONARY_2).decode()
    if kind == LZ4_BLOCK:
        return lz4.block.decompress(memoryview(value)[1:]).decode()
    if kind < b" " and kind not in _JSON_SPACE:
        raise ValueError(f"not a packed JSON value (first byte {kind!r})")
    return bytes(value).decode()


class JSONText(TypeDecorator):
    """JSON kept packed, as bytes the database does not parse: `bytea` on PostgreSQL, a BLOB
    on SQLite, each value packed by pack_json. In Python it is JSON (a dict) on every engine.

    For the frame record, which the importer has decoded and checked before it is written
    (the import's workers pack each line). LZ4 against a dictionary makes a 3 KB record
    about 1.3 KB: fewer bytes to stage, write, check-point and scan on SQLite, which
    compresses nothing itself (issue 16, tenth and twenty-first passes; migrations 0014 and
    0017). On PostgreSQL the packed record goes out of line uncompressed (STORAGE EXTERNAL)
    in one TOAST chunk, where the server compressed the text into two: a 1M import 4.5 s
    faster (the median of 5 pairs) and its database 4.0 -> 2.6 GB (twenty-second pass;
    migration 0018).
    Values stored before as text (a str on SQLite, UTF-8 bytes on PostgreSQL) still read.
    In SQL the value is opaque: `db.types.unpack_json` gives its text to a script.
    """

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Any) -> Any:
        return LargeBinary() if dialect.name == "postgresql" else JSON()

    def bind_processor(self, dialect: Any) -> Any:
        return pack_value

    def result_processor(self, dialect: Any, coltype: Any) -> Any:
        def unpack(value: Any) -> Any:
            return None if value is None else orjson.loads(unpack_json(value))

        return unpack
