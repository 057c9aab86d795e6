"""Fast bulk inserts that bypass per-row ORM work: executemany on SQLite, COPY on PostgreSQL."""

from __future__ import annotations

from datetime import UTC
from operator import itemgetter
from typing import Any

import orjson
from sqlalchemy import JSON, ColumnDefault, Connection, DateTime, Table
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


def _memo(encode: Any) -> Any:
    """Wrap an encoder so a value repeated row after row (a batch timestamp) is encoded once."""
    last: list[Any] = [object(), None]

    def encode_memo(value: Any) -> Any:
        if value is not last[0]:
            last[0], last[1] = value, encode(value)
        return last[1]

    return encode_memo


def bulk_insert(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert many rows (dicts with the same keys) into `table` inside the caller's transaction."""
    if not rows:
        return
    keys = list(rows[0])
    # Python-side column defaults (status, flags) are applied here as the ORM would; they
    # are the same for every row, so they are encoded once and appended to each tuple.
    extra_keys: list[str] = []
    extra_values: list[Any] = []
    dialect = conn.dialect.name
    for col in table.columns:
        if col.name in keys or col.default is None or col.primary_key:
            continue
        default = col.default
        # The models' defaults are values or callables (no Sequence, no server-side default).
        assert isinstance(default, ColumnDefault)
        value = default.arg(None) if default.is_callable else default.arg
        enc = _encoder(col, dialect)
        extra_keys.append(col.name)
        extra_values.append(enc(value) if enc else value)
    getter = itemgetter(*keys)
    tuples = [getter(row) for row in rows] if len(keys) > 1 else [(getter(r),) for r in rows]
    encoders = [
        (i, _memo(enc)) for i, k in enumerate(keys) if (enc := _encoder(table.c[k], dialect))
    ]
    if encoders or extra_values:
        tail = tuple(extra_values)
        converted = []
        for t in tuples:
            if encoders:
                t = list(t)
                for i, enc in encoders:
                    t[i] = enc(t[i])
            converted.append(tuple(t) + tail)
        tuples = converted
    keys += extra_keys
    cols = ", ".join(f'"{k}"' for k in keys)
    dbapi_conn = conn.connection.driver_connection
    assert dbapi_conn is not None  # only a closed or invalidated pool entry has none
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
