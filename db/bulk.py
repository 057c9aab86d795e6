"""Fast bulk inserts that bypass per-row ORM work: executemany on SQLite, COPY on PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any

import orjson
from sqlalchemy import JSON, Boolean, ColumnDefault, Connection, DateTime, Table
from sqlalchemy.types import TypeDecorator

from db.copy_binary import (
    SIGNATURE,
    TRAILER,
    column_kind,
    prefixed_parts,
    read_row,
    rows_from_columns,
)
from db.engine import RawJSON, json_text
from db.types import JSONText, pack_json, pack_texts, pack_value, unpack_json


def _packed(column: Any) -> bool:
    """Whether a column's values are stored packed (JSONText, see db/types.py)."""
    return isinstance(column.type, JSONText)


def _pack(value: Any) -> bytes | None:
    """A JSONText value as it is stored: JSON text (str, RawJSON, UTF-8 bytes) or an object."""
    if value is None:
        return None
    return pack_json(value if isinstance(value, (str, bytes)) else json_text(value))


def _encoder(column: Any, dialect: str) -> Any:
    col_type = column.type
    impl = col_type.impl if isinstance(col_type, TypeDecorator) else col_type
    if _packed(column):
        return pack_value  # what the ORM stores (JSONText's bind)
    if isinstance(impl, JSON):

        def encode_json(value: Any) -> Any:
            if value is None:
                return None
            return str(value) if isinstance(value, RawJSON) else orjson.dumps(value).decode()

        return encode_json
    if isinstance(impl, DateTime):
        if dialect == "sqlite":
            return _sqlite_time
    return None


def _sqlite_time(value: Any) -> Any:
    """A timestamp as SQLAlchemy stores it on SQLite (naive UTC, microseconds)."""
    if value is None:
        return None
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value.isoformat(sep=" ", timespec="microseconds")


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


def _flag(value: Any) -> int | None:
    """A flag as the integer SQLite stores (see RowEncoder)."""
    return None if value is None else int(value)


def _blob(value: Any) -> bytearray | None:
    """A JSONText value packed, as a bytearray (see RowEncoder)."""
    packed = _pack(value)
    return None if packed is None else bytearray(packed)


class RowEncoder:
    """Builds a table's rows ready to write, so the writing process does no per-value work.

    A row is every column of the table in table order, encoded as bulk_insert encodes it: a
    tuple for SQLite's `executemany`, one row of PostgreSQL's binary COPY format (bytes,
    db/copy_binary.py) for `COPY ... FROM STDIN (FORMAT BINARY)`. Columns a row's dict lacks
    take their Python-side default (the `now` given for timestamps), or NULL. Picklable:
    built once per worker process.

    On SQLite a flag is the integer 0 or 1 and a packed value a bytearray, which is what
    SQLite stores for them anyway: Python 3.11's sqlite3 binds a bool or a bytes value only
    after looking for an adapter, and the lookup raises and formats an AttributeError each
    time (1-2 us a value here, four of them in a works row; bench/RESULTS.md, issue 16,
    sixteenth pass). A NULL goes the same way: columns no row sets can be left out (`unset`).
    """

    def __init__(self, table: Table, dialect: str, unset: Sequence[str] = ()) -> None:
        """unset: columns no row ever has a value for, left out of every row (they are
        nullable and have no default, so they stay NULL)."""
        for name in unset:
            column = table.c[name]
            if not column.nullable or column.default is not None:
                raise ValueError(f"{table.name}.{name} cannot be left unset: it needs a value")
        columns = [c for c in table.columns if c.name not in unset]
        self.table_name, self.dialect = table.name, dialect
        # A text value may be given as its UTF-8 bytes (binary COPY sends them as they are;
        # SQLite would store them as a blob).
        self.utf8_text = dialect == "postgresql"
        self.keys = tuple(c.name for c in columns)
        self.defaults: list[Any] = []
        self.json_at: list[int] = []
        self.packed_at: list[int] = []  # JSON columns stored packed (JSONText)
        self.time_at: list[int] = []
        self.flag_at: list[int] = []  # Boolean columns, bound as integers on SQLite
        for i, col in enumerate(columns):
            impl = col.type.impl if isinstance(col.type, TypeDecorator) else col.type
            default = col.default if isinstance(col.default, ColumnDefault) else None
            if isinstance(impl, DateTime):
                self.time_at.append(i)
            elif isinstance(impl, Boolean):
                self.flag_at.append(i)
            elif _packed(col):
                self.packed_at.append(i)
            elif isinstance(impl, JSON):
                self.json_at.append(i)
            self.defaults.append(None if default is None or default.is_callable else default.arg)
        self.kinds = [column_kind(c) for c in columns] if dialect == "postgresql" else []
        self._at = {k: i for i, k in enumerate(self.keys)}
        self._untimed = tuple(k for i, k in enumerate(self.keys) if i not in self.time_at)

    def encode(self, rows: list[dict[str, Any]], now: datetime) -> list[Any]:
        """Each row (a dict of column values; JSON columns as objects or RawJSON) encoded."""
        pairs = list(zip(self.keys, self.defaults, strict=True))
        if self.dialect == "postgresql":
            columns = {k: [row.get(k, d) for row in rows] for k, d in pairs}
            return self._binary_rows(columns, len(rows), now)
        # Every row of a call has the same stamps: formatted once (isoformat was 2.6 us a row).
        stamp = _sqlite_time(now)
        out: list[Any] = []
        for row in rows:
            values = [row.get(k, d) for k, d in pairs]
            for i in self.json_at:
                v = values[i]
                if v is not None and not isinstance(v, str):
                    values[i] = v.decode() if isinstance(v, bytes) else orjson.dumps(v).decode()
            for i in self.packed_at:
                values[i] = _blob(values[i])
            for i in self.flag_at:
                values[i] = _flag(values[i])
            for i in self.time_at:
                if values[i] is None:
                    values[i] = stamp
            out.append(tuple(values))
        return out

    def encode_columns(self, columns: dict[str, list[Any]], n: int, now: datetime) -> list[Any]:
        """The rows encode() gives, from n rows' values given column by column.

        A chunk's columns are lists already (labeling/frames/batch_checks.py): building a dict
        per row only for encode() to take it apart again cost a third of a row's encoding.
        """
        if self.dialect == "postgresql":
            return self._binary_rows(columns, n, now)
        stamp = _sqlite_time(now)
        lists: list[list[Any]] = []
        for i, (key, default) in enumerate(zip(self.keys, self.defaults, strict=True)):
            col = columns.get(key)
            if col is None:
                col = [default] * n
            if i in self.json_at:
                col = [v if v is None or isinstance(v, str)
                       else v.decode() if isinstance(v, bytes) else orjson.dumps(v).decode()
                       for v in col]  # fmt: skip
            elif i in self.packed_at:
                col = [_blob(v) for v in col]
            elif i in self.flag_at:
                col = [_flag(v) for v in col]
            elif i in self.time_at:
                col = [stamp if v is None else v for v in col]
            lists.append(col)
        return list(zip(*lists, strict=True))

    def _binary_rows(self, columns: dict[str, list[Any]], n: int, now: datetime) -> list[bytes]:
        if n == 0:
            return []
        lists: list[Sequence[Any]] = []
        for i, (key, default) in enumerate(zip(self.keys, self.defaults, strict=True)):
            col = columns.get(key)
            if col is None:  # the same value in every row: encoded once
                lists.append((now if i in self.time_at and default is None else default,))
            elif i in self.packed_at:  # bytea: the packed bytes as they are
                if set(map(type, col)) == {bytes}:  # lines as read (the typed path): in C
                    lists.append(prefixed_parts(*pack_texts(col)))
                else:
                    lists.append([_pack(v) for v in col])
            elif i in self.json_at:  # orjson's bytes are the text's UTF-8: taken as they are
                lists.append([v if v is None or isinstance(v, (str, bytes)) else orjson.dumps(v)
                              for v in col])  # fmt: skip
            elif i in self.time_at:
                lists.append([now if v is None else v for v in col])
            else:
                lists.append(col)
        return rows_from_columns(self.kinds, lists, n)

    def value(self, row: Any, key: str) -> Any:
        """One column's value in an encoded row (see decode)."""
        return self.decode(row, [key])[key]

    def decode(self, row: Any, keys: Sequence[str] | None = None) -> dict[str, Any]:
        """The values of an encoded row (`keys`, default all but the timestamps), as an UPDATE
        takes them: JSON columns as their text (RawJSON), numbers and flags typed."""
        wanted = self._untimed if keys is None else keys
        at = [self._at[k] for k in wanted]
        if self.dialect == "postgresql":
            fields = read_row(row)
            out: dict[str, Any] = {}
            for k, i in zip(wanted, at, strict=True):
                field = fields[i]
                if field is None:
                    out[k] = None
                elif i in self.json_at:
                    out[k] = RawJSON(field.decode("utf-8"))
                elif i in self.packed_at:
                    out[k] = RawJSON(unpack_json(field))
                else:
                    out[k] = self.kinds[i].read(field)
            return out
        out = {}
        for k, i in zip(wanted, at, strict=True):
            value = row[i]
            if value is not None and i in self.json_at:
                value = RawJSON(value)
            elif value is not None and i in self.packed_at:
                value = RawJSON(unpack_json(value))
            elif value is not None and i in self.flag_at:
                value = bool(value)
            out[k] = value
        return out


def insert_new_encoded(conn: Connection, encoder: RowEncoder, rows: list[Any],
                       key: str) -> list[int]:  # fmt: skip
    """Insert the rows (built by `encoder`) whose primary key `key` is not stored yet.

    Returns the positions of the rows not inserted because their key was stored (by
    another writer), for the caller to update instead. Rows repeating a key among
    themselves are the caller's error (RuntimeError on SQLite).

    On SQLite, one INSERT ... ON CONFLICT DO NOTHING a row, and the stored keys are those
    found at a rowid from before it. In a savepoint instead, SQLite copied every page the
    rows touched that existed before it (the primary key's index pages, as the keys come
    in random order) into a statement journal, a file: 3.3 GB over a 1M import
    (bench/RESULTS.md, issue 16, seventeenth pass). On PostgreSQL, COPY in a savepoint
    (cheap there): on a conflict nothing is inserted and every position comes back.
    """
    if not rows:
        return []
    if encoder.dialect == "postgresql":
        dbapi = conn.dialect.dbapi
        assert dbapi is not None
        try:
            with conn.begin_nested():
                insert_encoded(conn, encoder, rows)
        except dbapi.IntegrityError:
            return list(range(len(rows)))
        return []
    dbapi_conn = conn.connection.driver_connection
    assert dbapi_conn is not None  # only a closed or invalidated pool entry has none
    at = encoder.keys.index(key)
    skipped = insert_new_sqlite(
        dbapi_conn, encoder.table_name, key, len(rows),
        lambda tail: _execute_many(dbapi_conn, encoder, rows, tail),
        lambda: [row[at] for row in rows],
    )  # fmt: skip
    if skipped is None:
        raise RuntimeError(f"{encoder.table_name}: two of the rows have the same {key}")
    return skipped


def insert_new_sqlite(
    dbapi_conn: Any, table: str, key: str, n: int, insert: Callable[[str], int],
    keys: Callable[[], list[Any]],
) -> list[int] | None:  # fmt: skip
    """n rows inserted into a SQLite table by insert(tail), which appends `tail` (ON CONFLICT
    DO NOTHING) to its statements and returns the rows inserted.

    Returns the positions (in keys(), the rows' keys, asked for only then) of the rows not
    inserted because their key was stored at a rowid from before; None when those do not
    account for every row not inserted (two rows with one key, or a row that was missing).
    """
    last = dbapi_conn.execute(f'SELECT max(rowid) FROM "{table}"').fetchone()[0] or 0
    inserted = insert(f' ON CONFLICT ("{key}") DO NOTHING')
    if inserted == n:
        return []
    values = keys()
    stored: set[Any] = set()
    for i in range(0, len(values), 500):  # under SQLite's limit of bound values
        part = values[i : i + 500]
        stored.update(k for (k,) in dbapi_conn.execute(
            f'SELECT "{key}" FROM "{table}" WHERE rowid <= ? AND "{key}" IN '
            f'({", ".join("?" for _ in part)})', [last, *part]))  # fmt: skip
    skipped = [i for i, k in enumerate(values) if k in stored]
    return skipped if len(skipped) == n - inserted else None


def insert_encoded(conn: Connection, encoder: RowEncoder, rows: list[Any]) -> None:
    """Insert rows built by `encoder` (same table, same dialect) in the caller's transaction."""
    if not rows:
        return
    dbapi_conn = conn.connection.driver_connection
    assert dbapi_conn is not None  # only a closed or invalidated pool entry has none
    cols = ", ".join(f'"{k}"' for k in encoder.keys)
    if encoder.dialect == "postgresql":
        with dbapi_conn.cursor() as cur:
            sql = f'COPY "{encoder.table_name}" ({cols}) FROM STDIN (FORMAT BINARY)'
            with cur.copy(sql) as copy:
                copy.write(SIGNATURE)
                copy.write(b"".join(rows))
                copy.write(TRAILER)
        return
    _execute_many(dbapi_conn, encoder, rows)


def _execute_many(dbapi_conn: Any, encoder: RowEncoder, rows: list[Any], tail: str = "") -> int:
    """INSERT the rows (every column of `encoder`, then `tail`) on SQLite; rows inserted."""
    cols = ", ".join(f'"{k}"' for k in encoder.keys)
    marks = ", ".join("?" for _ in encoder.keys)
    cur = dbapi_conn.cursor()
    try:
        cur.executemany(f'INSERT INTO "{encoder.table_name}" ({cols}) VALUES ({marks}){tail}', rows)
        return int(cur.rowcount)
    finally:
        cur.close()
