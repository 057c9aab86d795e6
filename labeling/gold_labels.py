"""The label side of a gold-set chunk: current labels, their counts, agreement and times.

Labels are read once per chunk of works as plain columns; the current ones (the latest
version of each annotator in each campaign, unless that is a skip) are picked by Arrow, the
answers parsed once per distinct answers text, and everything per work is an Arrow group-by.
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
from sqlalchemy import Connection, Integer, Text, cast, func, select

from db.models import Label
from labeling.export_rows import long_rows
from labeling.schema import Question

_NO_NAMES = pa.scalar([], type=pa.list_(pa.string()))


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
    compiled = query.compile(dialect=conn.dialect)
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


def _iso_sqlite(stamps: pa.Array) -> pa.Array:
    """SQLite's naive UTC 'YYYY-MM-DD HH:MM:SS[.ffffff]' as ISO 8601 with microseconds."""
    whole = pc.equal(pc.utf8_length(stamps), 19)  # written without a fraction
    full = pc.if_else(whole, pc.binary_join_element_wise(stamps, ".000000", ""), stamps)
    iso = pc.replace_substring(full, " ", "T", max_replacements=1)
    return pc.binary_join_element_wise(iso, "+00:00", "")


def current_labels(
    conn: Connection, questions: Sequence[Question], campaign_id: int | None, ids: pa.Array,
) -> pa.Table:
    """The current labels of a chunk's works (ids, sorted): the latest version of each
    annotator in each campaign, unless it is a skip. Columns: w (position of the work in the
    chunk), t (ISO time), c (campaign), u (annotator), mv (model version shown) and k<i>
    (the answer to question i as canonical JSON text, null when unanswered)."""
    dialect = conn.dialect.name
    query = (
        select(Label.work_id, Label.campaign_id, Label.user_id, Label.version,
               cast(Label.skipped, Integer), _iso(Label.created_at, dialect), Label.model_version,
               cast(Label.answers, Text))
        .where(Label.work_id >= ids[0].as_py(), Label.work_id <= ids[-1].as_py())
    )  # fmt: skip
    if campaign_id is not None:
        query = query.where(Label.campaign_id == campaign_id)
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
    if dialect != "postgresql":
        table = table.set_column(5, "t", _iso_sqlite(table["t"].combine_chunks()))
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


def label_stats(
    labels: pa.Table, n: int, n_questions: int, user_ids: pa.Array, user_names: pa.Array
) -> dict[str, Any]:
    """n_labels, annotators (sorted display names), agreement, first and last label time."""
    stats = labels.group_by("w", use_threads=False).aggregate(
        [("t", "min"), ("t", "max"), ("t", "count")])  # fmt: skip
    at = stats["w"].to_numpy()
    counts = np.zeros(n, dtype=np.int64)
    counts[at] = stats["t_count"].to_numpy()
    names = pa.table({"w": labels["w"],
                      "name": user_names.take(pc.index_in(labels["u"], value_set=user_ids))})
    names = names.sort_by([("w", "ascending"), ("name", "ascending")])
    if names.num_rows > 1:  # one entry per (work, name)
        m = names.num_rows
        repeat = pc.and_(pc.equal(names["w"].slice(1), names["w"].slice(0, m - 1)),
                         pc.equal(names["name"].slice(1), names["name"].slice(0, m - 1)))
        keep = pa.concat_arrays([pa.array([True]), pc.invert(repeat).combine_chunks()])
        names = names.filter(pc.fill_null(keep, True))
    lists = names.group_by("w", use_threads=False).aggregate([("name", "list")])
    annotators = scatter(lists["name_list"].combine_chunks(), lists["w"].to_numpy(), n)
    return {
        "n_labels": pa.array(counts), "annotators": pc.fill_null(annotators, _NO_NAMES),
        "agreement": agreement(labels, n, n_questions),
        "first_labelled_at": scatter(stats["t_min"].combine_chunks(), at, n),
        "last_labelled_at": scatter(stats["t_max"].combine_chunks(), at, n),
    }  # fmt: skip


def agreement(labels: pa.Table, n: int, n_questions: int) -> pa.Array:
    """Per work, the mean over questions of the share of annotator pairs answering alike.

    For a question answered by m labels, with c_v of them giving answer v, the share of
    agreeing pairs is sum_v c_v(c_v - 1)/2 over m(m - 1)/2; questions answered fewer than
    twice do not count; a work with no such question gets null.
    """
    total, counted = np.zeros(n), np.zeros(n, dtype=np.int64)
    for i in range(n_questions):
        key = f"k{i}"
        answered = labels.select(["w", key]).filter(pc.is_valid(labels[key]))
        if not answered.num_rows:
            continue
        same = answered.group_by(["w", key], use_threads=False).aggregate([(key, "count")])
        c = same[f"{key}_count"].to_numpy().astype(np.float64)
        per_work = pa.table({"w": same["w"], "pairs": c * (c - 1) / 2, "m": c}).group_by(
            "w", use_threads=False).aggregate([("pairs", "sum"), ("m", "sum")])  # fmt: skip
        at, m = per_work["w"].to_numpy(), per_work["m_sum"].to_numpy()
        ok = m >= 2
        total[at[ok]] += per_work["pairs_sum"].to_numpy()[ok] / (m[ok] * (m[ok] - 1) / 2)
        counted[at[ok]] += 1
    has = counted > 0
    mean = np.round(np.divide(total, counted, out=np.zeros(n), where=has), 6)
    return pa.array(mean, pa.float64(), mask=~has)


def labelled_versions(labels: pa.Table, current: pa.Array) -> pa.Array:
    """The model version recorded with each work's most recent stamped label, where it
    differs from the work's current version (null elsewhere: the current one applies)."""
    n = len(current)
    stamped = labels.filter(pc.is_valid(labels["mv"]))
    differs = pc.fill_null(pc.not_equal(stamped["mv"], current.take(stamped["w"])), True)
    if not pc.any(differs).as_py():  # the usual case: every label saw the current version
        return pa.nulls(n, pa.string())
    # Only works with a label under another version need the newest label found.
    works = pc.unique(stamped.filter(differs)["w"])
    stamped = stamped.filter(pc.is_in(stamped["w"], value_set=works))
    ordered = stamped.sort_by([("w", "ascending"), ("t", "ascending"), ("c", "ascending"),
                               ("u", "ascending")])  # fmt: skip
    newest = ordered.group_by("w", use_threads=False).aggregate([("mv", "last")])
    return scatter(newest["mv_last"].combine_chunks(), newest["w"].to_numpy(), n)


def long_labels(
    conn: Connection, questions: Sequence[Question], campaigns: dict[int, Any],
    names: dict[int, str | None], campaign_id: int | None, ids: list[str],
) -> list[dict[str, Any]]:
    """One row per question of each current label of a chunk's works (the long file)."""
    query = (
        select(Label.campaign_id, Label.work_id, Label.user_id, Label.version, Label.skipped,
               Label.answers, Label.created_at, Label.confidence, Label.note,
               Label.time_on_item_ms, Label.model_version, Label.scores_visible,
               Label.schema_hash)  # fmt: skip
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
        labs = sorted(per_work.get(wid, []), key=lambda lab: (
            campaigns[lab.campaign_id].name, names.get(lab.user_id) or ""))
        out.extend(long_rows(questions, campaigns, names, wid, labs))
    return out
