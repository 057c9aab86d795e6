"""Fast bulk inserts that bypass per-row ORM work: executemany on SQLite, COPY on PostgreSQL."""

from __future__ import annotations

from datetime import UTC
from typing import Any

import orjson
from sqlalchemy import JSON, Connection, DateTime, Table
from sqlalchemy.types import TypeDecorator

from db.engine import RawJSON


def _encoder(column: Any, dialect: str) -> Any:
    col_type = column.type
    impl = col_type.impl if isinstance(col_type, TypeDecorator) else col_type
    if isinstance(impl, JSON):

        def encode_json(value: Any) -> Any:
            if value is None:
                return None
            return str(value) if isinstance(value, RawJSON) else orjson.dumps(value).decode()

        return encode_json
    if isinstance(impl, DateTime):
        if dialect == "sqlite":

            def encode_dt(value: Any) -> Any:
                if value is None:
                    return None
                if value.tzinfo is not None:
                    value = value.astimezone(UTC).replace(tzinfo=None)
                return value.isoformat(sep=" ", timespec="microseconds")

            return encode_dt
    return None


def bulk_insert(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert many rows (dicts with the same keys) into `table` inside the caller's transaction."""
    if not rows:
        return
    keys = list(rows[0])
    # Python-side column defaults (status, flags) are applied here as the ORM would.
    defaults = {}
    for col in table.columns:
        if col.name in keys or col.default is None or col.primary_key:
            continue
        default = col.default
        defaults[col.name] = default.arg(None) if default.is_callable else default.arg
    if defaults:
        rows = [{**row, **defaults} for row in rows]
        keys += list(defaults)
    dialect = conn.dialect.name
    encoders = [_encoder(table.c[k], dialect) for k in keys]
    tuples = [
        tuple(enc(row[k]) if enc else row[k] for k, enc in zip(keys, encoders, strict=True))
        for row in rows
    ]
    cols = ", ".join(f'"{k}"' for k in keys)
    dbapi_conn = conn.connection.driver_connection
    if dialect == "postgresql":
        with dbapi_conn.cursor() as cur:
            with cur.copy(f'COPY "{table.name}" ({cols}) FROM STDIN') as copy:
                for t in tuples:
                    copy.write_row(t)
        return
    marks = ", ".join("?" for _ in keys)
    cur = dbapi_conn.cursor()
    try:
        cur.executemany(f'INSERT INTO "{table.name}" ({cols}) VALUES ({marks})', tuples)
    finally:
        cur.close()
