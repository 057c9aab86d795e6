"""Label summaries: each work's current labels in brief, stored beside it for the export.

The gold set's label columns (n_labels, annotators, agreement, first and last label time,
the model version shown) depend only on a work's current labels. Reading two million labels
costs more than the rest of a million-row export, so the export keeps each work's summary
in label_summaries, a cache it fills itself: labelling never waits for it.

A stored summary is trusted only when it covers every label row of its work and was made
under the current schema. Labels are only ever added, so for a range of works, equal
totals of stored and actual label rows mean every summary in it is current; otherwise the
per-work counts find the stale ones (works labelled since the last export), which are
recomputed from the labels the same way, used, and stored for the next export.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import Connection, Engine, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from db.engine import write_connection
from db.models import Label, LabelSummary
from labeling.export.label_columns import (
    by_distinct,
    current_labels,
    fetch_columns,
    iso_times,
    label_query,
    scatter,
)
from labeling.schema import Question, Schema

SUMMARY_COLUMNS = ("summary", "first_at", "last_at", "model_version")
STORE_BATCH = 2_000
# A chunk whose id range holds more than this many times its own number of summaries reads
# just its own (by id) instead of the whole range.
SPARSE = 4
# Below this many works a summary is computed in plain Python: Arrow's per-call overhead
# (group-bys especially) costs more than a few works' labels (a chunk in which only some
# works were labelled since the last export).
SMALL = 64
_NO_NAMES = pa.scalar([], type=pa.list_(pa.string()))


# ---------------------------------------------------------------- from labels


def summarise(labels: pa.Table, n: int, n_questions: int, schema_hash: str) -> dict[str, Any]:
    """Summaries of n works from their current labels (labeling.export.label_columns.current_labels
    over every schema question): {summary, first_at, last_at, model_version}, each an array
    of length n; a work without current labels gets nulls."""
    stats = labels.group_by("w", use_threads=False).aggregate(
        [("t", "min"), ("t", "max"), ("t", "count")])  # fmt: skip
    at = stats["w"].to_numpy()
    counts = np.zeros(n, dtype=np.int64)
    counts[at] = stats["t_count"].to_numpy()
    # Sorted distinct annotator ids per work, as "3,7".
    pairs = labels.select(["w", "u"]).group_by(["w", "u"], use_threads=False).aggregate([])
    pairs = pairs.sort_by([("w", "ascending"), ("u", "ascending")])
    users = pairs.group_by("w", use_threads=False).aggregate([("u", "list")])
    joined = pc.binary_join(pc.cast(users["u_list"], pa.list_(pa.string())), ",")
    user_text = scatter(joined.combine_chunks(), users["w"].to_numpy(), n)
    # Per question: agreeing pairs and number of answers, as "p,m;p,m".
    parts: list[Any] = []
    for i in range(n_questions):
        key = f"k{i}"
        agreeing, answers = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        answered = labels.select(["w", key]).filter(pc.is_valid(labels[key]))
        if answered.num_rows:
            same = answered.group_by(["w", key], use_threads=False).aggregate([(key, "count")])
            c = same[f"{key}_count"].to_numpy()
            np.add.at(agreeing, same["w"].to_numpy(), c * (c - 1) // 2)
            np.add.at(answers, same["w"].to_numpy(), c)
        parts += [pa.array(agreeing).cast(pa.string()), ",", pa.array(answers).cast(pa.string())]
        parts.append(";")
    key_text = pc.binary_join_element_wise(
        pa.array(counts).cast(pa.string()), "|", pc.fill_null(user_text, ""), "|",
        *parts[:-1] if parts else [""], "")  # fmt: skip
    key_text = pc.if_else(pc.greater(pa.array(counts), 0), key_text, pa.nulls(n, pa.string()))

    def as_json(key: str | None) -> dict[str, Any]:
        """The stored JSON of one distinct summary key."""
        if key is None:
            return {"summary": None}
        count, who, per_question = key.split("|")
        return {"summary": orjson.dumps({
            "schema": schema_hash, "n": int(count), "users": [int(u) for u in who.split(",")],
            "pairs": [[int(v) for v in q.split(",")] for q in per_question.split(";")]
            if n_questions else [],
        }).decode()}  # fmt: skip

    summary = by_distinct(as_json, {"summary": pa.string()}, key_text)["summary"]
    stamped = labels.filter(pc.is_valid(labels["mv"]))
    ordered = stamped.sort_by([("w", "ascending"), ("t", "ascending"), ("c", "ascending"),
                               ("u", "ascending")])  # fmt: skip
    newest = ordered.group_by("w", use_threads=False).aggregate([("mv", "last")])
    return {
        "summary": summary,
        "first_at": scatter(stats["t_min"].combine_chunks(), at, n),
        "last_at": scatter(stats["t_max"].combine_chunks(), at, n),
        "model_version": scatter(newest["mv_last"].combine_chunks(), newest["w"].to_numpy(), n),
    }


# ---------------------------------------------------------------- to export columns


def label_columns(
    summaries: dict[str, Any],
    current: pa.Array,
    questions: Sequence[Question],
    schema: Schema,
    names: dict[int, str | None],
) -> dict[str, Any]:
    """The export's label columns of a chunk from its summaries (aligned with its works):
    n_labels, annotators, agreement (over `questions`), first/last_labelled_at and the
    model version shown (the newest stamped label's, else the work's current one)."""
    where = {q.name: i for i, q in enumerate(schema.questions)}
    wanted = [where[q.name] for q in questions]

    def columns(text: str | None) -> dict[str, Any]:
        """n_labels, annotators and agreement of one distinct summary."""
        if text is None:
            return {"n_labels": 0, "annotators": [], "agreement": None}
        summary = orjson.loads(text)
        total, counted = 0.0, 0
        for i in wanted:
            agreeing, m = summary["pairs"][i]
            if m >= 2:
                total += agreeing / (m * (m - 1) / 2)
                counted += 1
        who = sorted({name for u in summary["users"] if (name := names.get(u)) is not None})
        agreement = float(np.round(np.float64(total) / counted, 6)) if counted else None
        return {"n_labels": summary["n"], "annotators": who, "agreement": agreement}

    types = {"n_labels": pa.int64(), "annotators": pa.list_(pa.string()),
             "agreement": pa.float64()}  # fmt: skip
    out = by_distinct(columns, types, summaries["summary"])
    out["annotators"] = pc.fill_null(out["annotators"], _NO_NAMES)
    out["first_labelled_at"] = summaries["first_at"]
    out["last_labelled_at"] = summaries["last_at"]
    out["model_version"] = pc.coalesce(summaries["model_version"], current)
    return out


# ---------------------------------------------------------------- stored


def fresh(conn: Connection, schema: Schema, ids: pa.Array) -> dict[str, Any]:
    """Summaries of a chunk's works (ids, sorted) computed from their labels."""
    if len(ids) <= SMALL:
        return summarise_few(conn, schema, ids.to_pylist())
    labels = current_labels(conn, schema.questions, None, ids)
    return summarise(labels, len(ids), len(schema.questions), schema.hash)


def summarise_few(conn: Connection, schema: Schema, ids: list[str]) -> dict[str, Any]:
    """What summarise gives, for a few works, computed row by row from their labels."""
    dialect = conn.dialect.name
    cols = fetch_columns(conn, label_query(dialect, None).where(Label.work_id.in_(ids)), 8)
    times = iso_times(pa.array(cols[5], pa.string()), dialect).to_pylist()
    latest: dict[tuple[str, int, int], tuple] = {}
    for work, c, u, v, skipped, t, mv, answers in zip(*cols[:5], times, *cols[6:], strict=True):
        if (work, c, u) not in latest or v > latest[(work, c, u)][0]:
            latest[(work, c, u)] = (v, skipped, t, mv, answers)
    per_work: dict[str, list[tuple]] = {}
    for (work, c, u), (_, skipped, t, mv, answers) in latest.items():
        if not skipped:
            per_work.setdefault(work, []).append((t, c, u, mv, answers))
    out: dict[str, list[Any]] = {c: [] for c in SUMMARY_COLUMNS}
    for wid in ids:
        labs = per_work.get(wid, [])
        parsed = [orjson.loads(a) if a else {} for *_, a in labs]
        parsed = [a if isinstance(a, dict) else {} for a in parsed]
        pairs = []
        for q in schema.questions:
            same = Counter(orjson.dumps(a[q.name]) for a in parsed if a.get(q.name) is not None)
            pairs.append([sum(c * (c - 1) // 2 for c in same.values()), sum(same.values())])
        stamped = sorted(lab[:4] for lab in labs if lab[3] is not None)
        out["summary"].append(orjson.dumps({
            "schema": schema.hash, "n": len(labs), "users": sorted({lab[2] for lab in labs}),
            "pairs": pairs}).decode() if labs else None)  # fmt: skip
        out["first_at"].append(min(lab[0] for lab in labs) if labs else None)
        out["last_at"].append(max(lab[0] for lab in labs) if labs else None)
        out["model_version"].append(stamped[-1][3] if stamped else None)
    return {c: pa.array(v, pa.string()) for c, v in out.items()}


def stored(
    conn: Connection, schema: Schema, ids: pa.Array
) -> tuple[dict[str, Any], pa.Table | None]:
    """The summaries of a chunk's works (ids, sorted), read from label_summaries where
    current and computed from the labels where not; also those computed ones as rows of
    label_summaries (for store), or None when every stored summary was current."""
    lo, hi = ids[0].as_py(), ids[-1].as_py()
    columns = (LabelSummary.work_id, LabelSummary.label_rows,
               *(getattr(LabelSummary, c) for c in SUMMARY_COLUMNS))  # fmt: skip
    summaries_in = (LabelSummary.work_id >= lo) & (LabelSummary.work_id <= hi)
    labels_in = (Label.work_id >= lo) & (Label.work_id <= hi)
    spread = conn.execute(select(func.count()).where(summaries_in)).scalar_one()
    if spread > SPARSE * len(ids):  # a chunk spread thinly over the table (a small filter)
        wanted = ids.to_pylist()
        summaries_in, labels_in = LabelSummary.work_id.in_(wanted), Label.work_id.in_(wanted)
    work, rows, *values = fetch_columns(conn, select(*columns).where(summaries_in), len(columns))
    at = pc.index_in(pa.array(work, pa.string()), value_set=ids)
    known = pc.is_valid(at)
    found = pc.drop_null(at).to_numpy()
    out = {c: scatter(pa.array(v, pa.string()).filter(known), found, len(ids))
           for c, v in zip(SUMMARY_COLUMNS, values, strict=True)}  # fmt: skip
    total = conn.execute(select(func.count()).where(labels_in)).scalar_one()
    stale = np.zeros(len(ids), dtype=bool)
    have = np.zeros(len(ids), dtype=np.int64)
    have[found] = pa.array(rows, pa.int64()).filter(known).to_numpy()
    real = have
    if total != sum(rows):  # some work gained labels since its summary was written
        counts = conn.execute(select(Label.work_id, func.count()).where(labels_in)
                              .group_by(Label.work_id)).all()  # fmt: skip
        if counts:
            where = pc.index_in(pa.array([w for w, _ in counts], pa.string()), value_set=ids)
            keep = pc.is_valid(where)
            real = np.zeros(len(ids), dtype=np.int64)
            real[pc.drop_null(where).to_numpy()] = pa.array(
                [c for _, c in counts], pa.int64()).filter(keep).to_numpy()  # fmt: skip
            stale |= real != have
        else:
            real = np.zeros(len(ids), dtype=np.int64)
            stale |= have != 0
    # A summary made under another schema counts other questions.
    prefix = f'{{"schema":"{schema.hash}",'
    other = pc.invert(pc.fill_null(pc.starts_with(out["summary"], prefix), True))
    stale |= other.to_numpy(zero_copy_only=False)
    if not stale.any():
        return out, None
    at_stale = pa.array(np.flatnonzero(stale))
    redo = fresh(conn, schema, ids.take(at_stale))
    mask = pa.array(stale)
    for c in SUMMARY_COLUMNS:
        out[c] = pc.if_else(mask, scatter(redo[c], at_stale.to_numpy(), len(ids)), out[c])
    rows_now = pa.array(real).take(at_stale)
    return out, pa.table({"work_id": ids.take(at_stale), "label_rows": rows_now, **redo})


def store(engine: Engine, summaries: pa.Table) -> None:
    """Write summaries computed by an export (see stored) in one write transaction.

    They come from the export's snapshot, which may be older than what another export has
    stored since: a stored summary is replaced only by one counting at least as many label
    rows (labels are only ever added, so more rows means newer).
    """
    dialect = engine.dialect.name
    upsert = (pg_insert if dialect == "postgresql" else sqlite_insert)(LabelSummary)
    upsert = upsert.on_conflict_do_update(
        index_elements=[LabelSummary.work_id],
        set_={c: getattr(upsert.excluded, c) for c in ("label_rows", *SUMMARY_COLUMNS)},
        where=LabelSummary.label_rows <= upsert.excluded.label_rows,
    )
    with write_connection(engine) as conn:
        for batch in summaries.to_batches(max_chunksize=STORE_BATCH):  # bounded parameter lists
            conn.execute(upsert, batch.to_pylist())
        if dialect == "sqlite":  # an export stores many: keep its pages out of the cache
            conn.exec_driver_sql("PRAGMA shrink_memory")
