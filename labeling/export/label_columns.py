"""The label side of a gold-set chunk: current labels as Arrow columns, and the long rows.

Labels are read once per chunk of works as plain columns; the current ones (the latest
version of each annotator in each campaign, unless that is a skip) are picked by Arrow and
the answers parsed once per distinct answers text (labeling.export.summaries turns them into
per-work counts, agreement and times).
SQL does no more than read: extra work per row in the database (subqueries, JSON, text
concatenation) costs more than all of this.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import Connection, Integer, Text, cast, exists, func, select
from sqlalchemy.orm import aliased

from db.models import Label
from labeling.export.definitions import long_rows
from labeling.review.flags import flag_note
from labeling.schema import Question


def by_distinct(
    build: Callable[..., dict[str, Any]], types: dict[str, pa.DataType], *columns: Any
) -> dict[str, pa.Array]:
    """Columns computed once per distinct combination of values of text columns of one
    length (lists or Arrow arrays), then spread to every row; Arrow does the hashing.

    build(*combination) returns {name: value} for the names of `types`.
    """
    key = np.zeros(len(columns[0]), dtype=np.int64)
    dictionaries = []
    for column in columns:
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        array = column if isinstance(column, pa.Array) else pa.array(column, pa.string())
        encoded = array.dictionary_encode()
        codes = pc.fill_null(encoded.indices, len(encoded.dictionary)).to_numpy()
        dictionaries.append(encoded.dictionary.to_pylist() + [None])
        key = key * len(dictionaries[-1]) + codes
    unique, inverse = np.unique(key, return_inverse=True)
    built = []
    for code in unique.tolist():
        parts = []
        for values in reversed(dictionaries):
            code, at = divmod(code, len(values))
            parts.append(values[at])
        built.append(build(*reversed(parts)))
    rows = pa.array(inverse)
    return {name: pa.array([b[name] for b in built], t).take(rows) for name, t in types.items()}


def fetch_columns(conn: Connection, query: Any, width: int) -> list[Any]:
    """The result of a query as columns, read through the driver's own cursor.

    SQLAlchemy's row objects cost more than the query itself for the millions of rows of a
    large export; the queries given here have plain parameters only.
    """
    # Expanding parameters (IN lists) rendered out, so the driver gets plain ones.
    compiled = query.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    params: Any = compiled.params
    if compiled.positiontup is not None:
        params = tuple(compiled.params[name] for name in compiled.positiontup)
    cursor = conn.connection.cursor()
    try:
        cursor.execute(str(compiled), params)
        rows = cursor.fetchall()
    finally:
        cursor.close()
    return list(zip(*rows, strict=True)) if rows else [()] * width


def _iso(column: Any, dialect: str) -> Any:
    """PostgreSQL: a timestamp as ISO 8601 UTC text with microseconds (SQLite: raw text)."""
    if dialect == "postgresql":
        return func.to_char(func.timezone("UTC", column), 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')
    return cast(column, Text)


def iso_times(stamps: pa.Array, dialect: str) -> pa.Array:
    """The times read by label_query as ISO 8601 UTC with microseconds: SQLite's naive UTC
    'YYYY-MM-DD HH:MM:SS[.ffffff]' is rewritten, PostgreSQL's are already so."""
    if dialect == "postgresql":
        return stamps
    whole = pc.equal(pc.utf8_length(stamps), 19)  # written without a fraction
    full = pc.if_else(whole, pc.binary_join_element_wise(stamps, ".000000", ""), stamps)
    iso = pc.replace_substring(full, " ", "T", max_replacements=1)
    return pc.binary_join_element_wise(iso, "+00:00", "")


def label_query(dialect: str, campaign_id: int | None) -> Any:
    """Labels as plain columns: work, campaign, annotator, version, skipped (0/1), time
    (see iso_times), model version shown, answers as JSON text."""
    query = select(
        Label.work_id, Label.campaign_id, Label.user_id, Label.version,
        cast(Label.skipped, Integer), _iso(Label.created_at, dialect), Label.model_version,
        cast(Label.answers, Text),
    )  # fmt: skip
    if campaign_id is not None:
        query = query.where(Label.campaign_id == campaign_id)
    return query


def current_labels(
    conn: Connection,
    questions: Sequence[Question],
    campaign_id: int | None,
    ids: pa.Array,
) -> pa.Table:
    """The current labels of a chunk's works (ids, sorted): the latest version of each
    annotator in each campaign, unless it is a skip. Columns: w (position of the work in the
    chunk), t (ISO time), c (campaign), u (annotator), mv (model version shown) and k<i>
    (the answer to question i as canonical JSON text, null when unanswered)."""
    dialect = conn.dialect.name
    query = label_query(dialect, campaign_id).where(
        Label.work_id >= ids[0].as_py(), Label.work_id <= ids[-1].as_py())  # fmt: skip
    types = (pa.string(), pa.int64(), pa.int64(), pa.int64(), pa.int64(), pa.string(),
             pa.string(), pa.string())  # fmt: skip
    table = pa.table(
        [pa.array(c, t) for c, t in zip(fetch_columns(conn, query, 8), types, strict=True)],
        names=["work", "c", "u", "v", "skipped", "t", "mv", "answers"],
    ).sort_by([("work", "ascending"), ("c", "ascending"), ("u", "ascending"),
               ("v", "ascending")])  # fmt: skip
    if table.num_rows:
        # The last row of each (work, campaign, annotator) run is its current version.
        m = table.num_rows
        same = [pc.equal(table[k].slice(0, m - 1), table[k].slice(1)) for k in ("work", "c", "u")]
        followed = pc.and_(pc.and_(same[0], same[1]), same[2])
        last = pa.concat_arrays([pc.invert(followed).combine_chunks(), pa.array([True])])
        table = table.filter(pc.and_(last, pc.equal(pc.fill_null(table["skipped"], 0), 0)))
    table = table.set_column(5, "t", iso_times(table["t"].combine_chunks(), dialect))
    table = table.append_column("w", pc.index_in(table["work"], value_set=ids))
    table = table.filter(pc.is_valid(table["w"]))

    def keys(text: str | None) -> dict[str, Any]:
        """Each question's answer in one distinct answers text, as canonical JSON."""
        answers = orjson.loads(text) if text else {}
        answers = answers if isinstance(answers, dict) else {}
        return {f"k{i}": None if answers.get(q.name) is None
                else orjson.dumps(answers[q.name]).decode()
                for i, q in enumerate(questions)}  # fmt: skip

    names = {f"k{i}": pa.string() for i in range(len(questions))}
    for name, col in by_distinct(keys, names, table["answers"]).items():
        table = table.append_column(name, col)
    return table


def scatter(values: pa.Array, at: np.ndarray, n: int) -> pa.Array:
    """An array of length n with values[i] at position at[i], null elsewhere."""
    where = np.full(n, -1, dtype=np.int64)
    where[at] = np.arange(len(at))
    return values.take(pa.array(where, mask=where < 0))


def long_labels(
    conn: Connection,
    questions: Sequence[Question],
    campaigns: dict[int, Any],
    names: dict[int, str | None],
    campaign_id: int | None,
    ids: list[str],
) -> list[dict[str, Any]]:
    """One row per question of each current label of a chunk's works (the long file)."""
    query = (
        select(
            Label.campaign_id,
            Label.work_id,
            Label.user_id,
            Label.version,
            Label.skipped,
            Label.answers,
            Label.created_at,
            Label.confidence,
            Label.note,
            Label.time_on_item_ms,
            Label.model_version,
            Label.scores_visible,
            Label.schema_hash,
            Label.flagged,
        )  # fmt: skip
        .where(Label.work_id >= ids[0], Label.work_id <= ids[-1])
        .order_by(Label.work_id, Label.campaign_id, Label.user_id, Label.version)
    )
    if campaign_id is not None:
        query = query.where(Label.campaign_id == campaign_id)
    latest: dict[tuple[str, int, int], Any] = {}
    for row in conn.execute(query):
        latest[(row.work_id, row.campaign_id, row.user_id)] = row
    wanted = set(ids)
    per_work: dict[str, list[Any]] = {}
    for row in latest.values():
        if not row.skipped and row.work_id in wanted:
            per_work.setdefault(row.work_id, []).append(row)
    out: list[dict[str, Any]] = []
    for wid in ids:
        labs = sorted(
            per_work.get(wid, []),
            key=lambda lab: (campaigns[lab.campaign_id].name, names.get(lab.user_id) or ""),
        )
        out.extend(long_rows(questions, campaigns, names, wid, labs))
    return out


def flag_columns(
    conn: Connection,
    campaigns: dict[int, Any],
    names: dict[int, str | None],
    campaign_id: int | None,
    ids: list[str],
) -> dict[str, pa.Array]:
    """`flags` (how many current labels of each work are flagged, skips included) and
    `flag_notes` ("annotator: note" of each, by campaign name and annotator) of a chunk's
    works (ids, sorted)."""
    later = aliased(Label)
    query = select(Label.work_id, Label.campaign_id, Label.user_id, Label.note).where(
        Label.work_id >= ids[0],
        Label.work_id <= ids[-1],
        Label.flagged.is_(True),
        # Flags are rare: the newer-version check runs on the flagged rows only.
        ~exists().where(
            later.campaign_id == Label.campaign_id,
            later.work_id == Label.work_id,
            later.user_id == Label.user_id,
            later.version > Label.version,
        ),
    )
    if campaign_id is not None:
        query = query.where(Label.campaign_id == campaign_id)
    found: dict[str, list[tuple[str, str, str]]] = {}
    for wid, cid, uid, note in conn.execute(query):
        who = names.get(uid) or ""
        found.setdefault(wid, []).append((campaigns[cid].name, who, f"{who}: {flag_note(note)}"))
    notes = [[text for *_, text in sorted(found.get(w, []))] for w in ids]
    return {
        "flags": pa.array([len(n) for n in notes], pa.int64()),
        "flag_notes": pa.array(notes, pa.list_(pa.string())),
    }
