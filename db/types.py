"""Column types of the models that store one thing the same way on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import JSON, DateTime, Text
from sqlalchemy.types import TypeDecorator

from db.engine import json_text

__all__ = ["JSONText", "UTCDateTime"]


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


class JSONText(TypeDecorator):
    """JSON that PostgreSQL keeps as `text`: the server stores it without parsing it.

    For the frame record, which the importer has decoded and checked before it is written:
    the `json` type's input check took a third of the server's COPY time for 3 KB records
    (bench/RESULTS.md, issue 16, ninth pass). In Python it is JSON as on every engine, and
    SQLite's JSON is text already. In SQL on PostgreSQL, `record::json` reads it as JSON.
    """

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Any) -> Any:
        return Text() if dialect.name == "postgresql" else JSON()

    def process_bind_param(self, value: Any, dialect: Any) -> Any:
        if value is None or dialect.name != "postgresql":
            return value
        return json_text(value)

    def process_result_value(self, value: Any, dialect: Any) -> Any:
        if value is None or dialect.name != "postgresql":
            return value
        return orjson.loads(value)
