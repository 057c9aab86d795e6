"""Unchanged lines, found by their stored hash before anyone decodes them.

`works.record_hash` is the sha256 of the stripped line that was stored. For each chunk the
importer reads, once, the stored hashes of the ids its lines seem to carry; a worker then
compares each such line's sha256 with it and skips decoding on a match. The id is read
from the raw bytes, so it may be wrong (an escaped id, "id" not the first key, a duplicate
key): that only costs a skip, never a wrong one, as a line whose sha256 equals the stored
hash of work X is the very line that was stored, and checked, as X.

A stored hash is used only if the row's machine columns and warnings were computed under
the schema in use (`machine_hash`); otherwise the line is decoded and write_batch
recomputes them, as before.
"""

from __future__ import annotations

import codecs
import re

import orjson
from sqlalchemy import Connection, Engine

from labeling.frames.checks import normalize_work_id
from labeling.frames.store import stored_rows

# A frame's lines start with their id (`{"id": "W123", ...`); any other line is decoded.
_LEADING_ID = re.compile(rb'\s*\{\s*"id"\s*:\s*"([^"\\]{1,100})"')

# line number -> (work id, stored record hash, stored warnings)
Known = dict[int, tuple[str, str, list[str]]]


def line_id(number: int, line: bytes) -> str | None:
    """The work id a raw line seems to carry as its first key (None: not found cheaply)."""
    if number == 1:
        line = line.removeprefix(codecs.BOM_UTF8)
    m = _LEADING_ID.match(line)
    if m is None:
        return None
    try:
        return normalize_work_id(m.group(1).decode("utf-8"))
    except UnicodeDecodeError:
        return None


def known_hashes(
    source: Engine | Connection, chunk: list[tuple[int, bytes]], plan_hash: str
) -> Known:
    """The stored hash and warnings of every line of a chunk whose id is stored (one query).

    source: an engine (a pooled connection for this query), or a connection in autocommit
    mode that the caller keeps for its chunks (a parsing worker: checking a pooled connection
    out and back in, with its ping and rollback, cost as much as the query).
    """
    ids: dict[str, int] = {}
    for number, line in chunk:
        work_id = line_id(number, line)
        if work_id is not None:
            ids.setdefault(work_id, number)  # a later duplicate is decoded (and rejected)
    if not ids:
        return {}
    columns = ("id", "record_hash", "machine_hash", "import_warnings")
    if isinstance(source, Connection):  # autocommit: no transaction, no snapshot held
        rows = stored_rows(source, list(ids), columns)
    else:
        with source.connect() as conn:  # a short read transaction: it holds no snapshot open
            rows = stored_rows(conn, list(ids), columns)
    known: Known = {}
    for work_id, record_hash, stored_plan, warnings in rows:
        if stored_plan == plan_hash and warnings is not None:
            known[ids[work_id]] = (work_id, record_hash, orjson.loads(warnings))
    return known
