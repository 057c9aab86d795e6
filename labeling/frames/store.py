"""Storing a frame's checked records: inserts, updates, superseded predictions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson
from sqlalchemy import Connection, bindparam, insert, select, update

from db.bulk import RowEncoder, insert_encoded, insert_new_encoded, insert_new_sqlite
from db.models import Prediction, Work, utcnow
from db.staging import Names, StagingError, attach_files, fetch_staged, insert_staged
from db.types import unpack_json

if TYPE_CHECKING:
    from labeling.frames.lines import Parsed

UNVERSIONED = "unversioned"


@dataclass
class StoredCounts:
    """What writing some batches did (counted into the summary once committed)."""

    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    # Of the updated works, those whose content changed under the same model_version.
    content_changed_same_version: int = 0


def write_batch(
    conn: Connection,
    batch: list[Parsed],
    summary: StoredCounts,
    fresh: bool = False,
    stage_dir: str | None = None,
) -> None:
    """Insert new works, update changed ones (keeping the content they replace), count the rest.

    Lines known unchanged by their hash (not decoded) are only counted; a line whose bytes
    differ from the stored ones is unchanged too when its parsed content is the same.
    fresh: the works table was empty when the import started, so the rows are inserted
    without looking their ids up first (see _insert_all). stage_dir: where the rows a line
    has only the ref of (an int) are staged (db/staging.py).
    """
    decoded = [p for p in batch if not p.known]
    summary.unchanged += len(batch) - len(decoded)
    encoder = work_encoder(conn.dialect.name)
    staged = [p for p in decoded if type(p.row) is int]
    names = _attach(conn, stage_dir, staged)
    if fresh and staged and len(staged) == len(decoded):
        decoded = _insert_staged(conn, encoder, names, decoded, summary)  # rows given back
    else:
        _materialise(conn, encoder, names, staged)
        if fresh and decoded:
            decoded = _insert_all(conn, encoder, decoded, summary)
    if not decoded:
        return
    add_rows(decoded, encoder)  # lines parsed without an encoder (in this process)
    # Only checked lines reach the store: each has its id.
    rows = stored_rows(conn, [p.work_id for p in decoded if p.work_id is not None], _STORED)
    existing = {row[0]: _Stored(*row) for row in rows}
    now = utcnow()
    new_works: list[Any] = []
    stale: list[dict[str, Any]] = []
    changed: list[dict[str, Any]] = []  # the UPDATE's parameters, one dict a changed work
    replaced: list[Revision] = []  # the stored content each changed work replaces
    differ = [p for p in decoded if p.work_id in existing
              and existing[p.work_id].record_hash != p.digest]  # fmt: skip
    # Only lines whose bytes changed are compared as parsed JSON with what is stored.
    records = stored_records(conn, [p.work_id for p in differ if p.work_id is not None])
    for p in decoded:
        # Only checked lines reach the store: they have an id and their row.
        assert p.work_id is not None and p.row is not None
        old = existing.get(p.work_id)
        if old is None:
            new_works.append(p.row)
            continue
        cols = None
        if old.record_hash != p.digest:
            cols = {k: v for k, v in encoder.decode(p.row).items() if k not in KEPT}
            # orjson takes a str itself, not RawJSON (a subclass)
            if not same_json(orjson.loads(str(cols["record"])), records.get(p.work_id)):
                cols.update(record_hash=p.digest, updated_at=now)
                replaced.append(Revision(p.work_id, old.model_version or UNVERSIONED,
                                         old.record_hash, records.get(p.work_id)))  # fmt: skip
                if old.model_version == cols["model_version"]:
                    summary.content_changed_same_version += 1
                changed.append({"b_id": p.work_id, **cols})
                continue
        # The stored content (other whitespace, key order or number spelling at most): its
        # row, and so its revision, stays as it is.
        summary.unchanged += 1
        # Imported under another schema, or before the warnings were kept.
        machine = {k: cols[k] for k in _MACHINE} if cols else encoder.decode(p.row, _MACHINE)
        if old.machine_hash != machine["machine_hash"] or old.import_warnings is None:
            stale.append({"b_id": p.work_id, **machine})
    if changed:
        # Every changed work in one statement, after the content it replaces is kept: a
        # statement each (and four for a new model version) took 0.9 ms a work.
        keep_revisions(conn, replaced, now)
        conn.execute(update(Work).where(Work.id == bindparam("b_id")), changed)
        summary.updated += len(changed)
    if new_works:
        insert_encoded(conn, encoder, new_works)
        summary.inserted += len(new_works)
    if stale:
        conn.execute(
            update(Work).where(Work.id == bindparam("b_id"))
            .values(machine=bindparam("machine"), machine_hash=bindparam("machine_hash"),
                    import_warnings=bindparam("import_warnings")),
            stale,
        )  # fmt: skip


def _insert_all(
    conn: Connection, encoder: RowEncoder, decoded: list[Parsed], summary: StoredCounts
) -> list[Parsed]:
    """Insert every line's row without looking its id up first (an id is never repeated
    within a file, the writer rejects the repeats); the lines whose id is stored after all
    (another writer since the import started) come back, not inserted, to be looked up.
    """
    add_rows(decoded, encoder)
    skipped = insert_new_encoded(conn, encoder, [p.row for p in decoded], "id")
    summary.inserted += len(decoded) - len(skipped)
    return [decoded[i] for i in skipped]


def _attach(conn: Connection, stage_dir: str | None, staged: list[Parsed]) -> Names:
    if not staged:
        return {}
    assert stage_dir is not None  # a worker stages rows only when the import gave a place
    return attach_files(_dbapi(conn), stage_dir, [p.row for p in staged])


def _dbapi(conn: Connection) -> Any:
    dbapi = conn.connection.driver_connection
    assert dbapi is not None  # only a closed or invalidated pool entry has none
    return dbapi


def _materialise(conn: Connection, encoder: RowEncoder, names: Names,
                 staged: list[Parsed]) -> None:  # fmt: skip
    """Give staged lines their rows back (read from the staging files)."""
    if not staged:
        return
    rows = fetch_staged(_dbapi(conn), encoder.keys, names, [p.row for p in staged])
    for p, row in zip(staged, rows, strict=True):
        p.row = row


def _insert_staged(conn: Connection, encoder: RowEncoder, names: Names,
                   decoded: list[Parsed], summary: StoredCounts) -> list[Parsed]:  # fmt: skip
    """_insert_all for lines whose rows are staged (db/staging.py): copied in by INSERT ...
    SELECT, in C; the lines whose id is stored after all come back, with their rows."""
    dbapi, table = _dbapi(conn), encoder.table_name
    refs = [p.row for p in decoded]
    skipped = insert_new_sqlite(
        dbapi, table, "id", len(decoded),
        lambda tail: insert_staged(dbapi, table, encoder.keys, names, refs, tail),
        lambda: [p.work_id for p in decoded],
    )  # fmt: skip
    if skipped is None:  # a staged row missing: never carry on without it
        raise StagingError(f"{table}: staged rows not inserted and not stored before")
    summary.inserted += len(decoded) - len(skipped)
    back = [decoded[i] for i in skipped]
    _materialise(conn, encoder, names, back)
    return back


def add_rows(parsed: list[Parsed], encoder: RowEncoder) -> None:
    """Give each accepted line without one its works row (`now` for its timestamps).

    The row replaces the line's columns and its text: it holds them all,
    and a worker sends back each line's row alone (pickling the columns too doubled the
    cost of the way back). write_batch reads what it needs from the row (RowEncoder.decode).
    """
    todo = [p for p in parsed if p.columns is not None and p.row is None]
    for p in todo:
        assert p.columns is not None
        p.columns["record"], p.columns["record_hash"] = p.text, p.digest
    rows = encoder.encode([p.columns for p in todo if p.columns is not None], utcnow())
    for p, row in zip(todo, rows, strict=True):
        p.row, p.columns, p.text = row, None, None  # the text is in the row (packed)


_encoders: dict[str, RowEncoder] = {}


def work_encoder(dialect: str) -> RowEncoder:
    """The works table's row encoder for a dialect (one per process)."""
    if dialect not in _encoders:
        _encoders[dialect] = RowEncoder(Work.__table__, dialect, unset=UNSET)
    return _encoders[dialect]


_MARKS = 10_000


class _Stored(NamedTuple):
    """What write_batch reads of a stored work."""

    id: str
    record_hash: str
    model_version: str | None
    machine_hash: str | None
    import_warnings: str | None


_STORED = ("id", "record_hash", "model_version", "machine_hash", "import_warnings")
# What a line whose record is unchanged may still update (computed under another schema).
_MACHINE = ("machine", "machine_hash", "import_warnings")
# The works columns a re-import never overwrites: the human side, and when it first came.
KEPT = frozenset({"status", "final_answers", "validated_via", "is_gold", "imported_at"})
# The human side a new work starts without: left out of the rows, NULL.
UNSET = ("final_answers", "validated_via")


def stored_rows(
    conn: Connection, ids: list[str], columns: tuple[str, ...]
) -> list[tuple[Any, ...]]:
    """Columns of the works with these ids (tuples), in one query on the driver's cursor.

    A Core `IN` of thousands of ids costs more to compile than the lookup costs to run (a
    bind parameter each), and a Core result fetches row by row: one array parameter on
    PostgreSQL, plain marks on SQLite, and one fetchall.
    """
    if not ids:
        return []
    names = ", ".join(columns)
    cur = _dbapi(conn).cursor()
    try:
        if conn.dialect.name == "postgresql":
            cur.execute(f"SELECT {names} FROM works WHERE id = ANY(%s)", (ids,))
            return list(cur.fetchall())
        rows: list[tuple[Any, ...]] = []
        for start in range(0, len(ids), _MARKS):  # SQLite takes at most 32,766 of them
            part = tuple(ids[start : start + _MARKS])
            marks = ", ".join("?" * len(part))
            cur.execute(f"SELECT {names} FROM works WHERE id IN ({marks})", part)
            rows += cur.fetchall()
        return rows
    finally:
        cur.close()


class Revision(NamedTuple):
    """A work's stored content that a re-import replaces, kept in predictions."""

    work_id: str
    model_version: str
    revision: str  # its record_hash
    record: dict[str, Any] | None


def stored_records(conn: Connection, ids: list[str]) -> dict[str, dict[str, Any]]:
    """The stored records of these works, decoded (read on the driver's cursor)."""
    return {work_id: orjson.loads(unpack_json(record))
            for work_id, record in stored_rows(conn, ids, ("id", "record"))}  # fmt: skip


def same_json(a: Any, b: Any) -> bool:
    """Whether two decoded JSON values are the same content: key order and number spelling
    aside (1 and 1.0 are one number), but true is not 1, as Python's == would have it."""
    if a != b:  # == is looser than the content: a difference is one
        return False
    return _strict(a, b)


def _strict(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict):
        return isinstance(b, dict) and all(_strict(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return isinstance(b, list) and all(_strict(x, y) for x, y in zip(a, b, strict=True))
    return True  # equal already (a != b was False), numbers, text or null


def keep_revisions(conn: Connection, replaced: list[Revision], now: Any) -> None:
    """Copy the content being replaced into predictions, once per (work, version, revision).

    Every change keeps the content it replaces, under the same model_version too: labels
    name the revision they were made on (labels.revision), and reports compare them with it.
    """
    if not replaced:
        return
    ids = sorted({r.work_id for r in replaced})
    kept: set[tuple[str, str, str | None]] = set()
    for start in range(0, len(ids), _MARKS):
        part = ids[start : start + _MARKS]
        query = select(Prediction.work_id, Prediction.model_version, Prediction.revision)
        kept.update(
            (w, v, rev) for w, v, rev in conn.execute(query.where(Prediction.work_id.in_(part)))
        )
    rows = []
    for r in replaced:
        if (r.work_id, r.model_version, r.revision) in kept:
            continue  # the content came back since: it is kept already
        kept.add((r.work_id, r.model_version, r.revision))
        record = r.record or {}
        rows.append({"work_id": r.work_id, "model_version": r.model_version,
                     "revision": r.revision, "record": r.record, "imported_at": now,
                     "prediction": record.get("prediction"),
                     "machine_scores": record.get("machine_scores")})  # fmt: skip
    if rows:
        conn.execute(insert(Prediction), rows)


def prediction_history(conn: Connection, work_id: str) -> dict[str, dict[str, Any]]:
    """Every model_version's machine output for a work, the current one included."""
    out: dict[str, dict[str, Any]] = {}
    for row in conn.execute(
        select(Prediction.model_version, Prediction.prediction, Prediction.machine_scores)
        .where(Prediction.work_id == work_id)
        .order_by(Prediction.id)
    ):
        out[row.model_version] = {
            "prediction": row.prediction,
            "machine_scores": row.machine_scores,
        }
    current = conn.execute(select(Work.record).where(Work.id == work_id)).scalar()
    if current is not None:
        version = (current.get("prediction") or {}).get("model_version") or UNVERSIONED
        out[version] = {
            "prediction": current.get("prediction"),
            "machine_scores": current.get("machine_scores"),
        }
    return out
