"""The gold set as Arrow tables: per chunk of works, two reads and vectorised columns.

A chunk is a run of works in id order. The works come from one query (on SQLite, for one
status, from the covering index `ix_works_export`) as id, DOI, title, year, the machine
scores, and one packed text of the columns that repeat across works (status, validated_via,
model version, final answers, stored machine columns), parsed once per distinct value; the
current labels from a second query (labeling.export.label_columns). Python touches single rows only
for the rare works whose machine side must come from the full record (stored columns missing
or computed under another schema) or from `predictions` (labelled on an earlier revision of
the record, or under an older version); the stored record's calls and scores are given
beside them (`<column>_current`).
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import Connection, Text, cast, select

from db.models import Campaign, CampaignItem, CampaignVerdict, Prediction, User, Work
from labeling.export.definitions import (
    CURRENT,
    Pseudonymizer,
    arrow_schema,
    current_columns,
    validation_fields,
)
from labeling.export.label_columns import by_distinct, current_labels, flag_columns, long_labels
from labeling.export.plan import ExportPlan
from labeling.export.summaries import label_columns, stored, summarise
from labeling.frames.machine_columns import (
    SCORE_COLUMNS,
    SCORE_FROM_WORK,
    MachinePlan,
    as_list,
    as_text,
    call_columns,
    machine_hash,
    machine_plan,
)
from labeling.frames.revisions import labelled_revisions
from labeling.schema import Question, Schema
from labeling.vocabulary import STATUS_VALIDATED, VERDICT_CORROBORATED, VERDICT_DISPUTED

_ANSWER = {"multi": as_list, "single": as_text, "binary": as_text}
_VALIDATION = ("validation_method", "validation_rule", "validation_campaign", "validated_by",
               "validated_via")  # fmt: skip


@dataclass
class GoldChunk:
    """One chunk of the gold set: its wide rows as a table, and the long label rows."""

    table: pa.Table
    labels: list[dict[str, Any]] = field(default_factory=list)
    # Summaries the chunk recomputed because the stored ones were stale (see label_summary).
    stale: pa.Table | None = None


@dataclass
class _Context:
    """What every chunk needs: questions, names, campaigns, machine plan, scope."""

    schema: Schema
    questions: list[Question]
    names: dict[int, str | None]
    campaigns: dict[int, Any]
    sample_ids: list[int]
    campaign_id: int | None
    pseudo: Pseudonymizer
    plan: MachinePlan
    plan_hash: str
    schema_arrow: pa.Schema
    human_types: dict[str, pa.DataType]  # columns made once per distinct (status, answers, via)
    machine_types: dict[str, pa.DataType]  # columns made once per distinct works.machine
    current: list[str]  # the machine columns also given as the stored record's (CURRENT)


def iter_tables(
    conn: Connection, plan: ExportPlan, *, id_range: tuple[str | None, str | None] = (None, None)
) -> Generator[GoldChunk, None, None]:
    """Stream the gold set in chunks of plan.chunk_size works ordered by id, inside the
    caller's transaction (one snapshot), with each chunk's current labels if plan.long.

    id_range: only works with lo <= id < hi (None: unbounded), for a share of the export.
    """
    ctx = _context(conn, plan)
    chunk_size = plan.chunk_size
    query = select(
        Work.id, Work.doi, Work.title, Work.year, Work.status,
        cast(Work.final_answers, Text), Work.validated_via, Work.model_version,
        Work.machine_hash, Work.machine, *(getattr(Work, c) for c in SCORE_FROM_WORK.values()),
    ).where(*plan.conditions()).order_by(Work.id)  # fmt: skip
    lo, hi = id_range
    if lo is not None:
        query = query.where(Work.id >= lo)
    if hi is not None:
        query = query.where(Work.id < hi)
    if conn.dialect.name == "sqlite":
        # SQLite's cursor steps through the result on demand, so rows can come straight from
        # it: every column here is a plain value that needs no result processing, and
        # SQLAlchemy's row objects would cost about a second per million rows.
        result = conn.execute(query)
        parts: Iterable[Any] = iter(lambda: result.cursor.fetchmany(chunk_size), [])
    else:  # a server-side cursor, which SQLAlchemy reads ahead of us
        result = conn.execution_options(stream_results=True, yield_per=chunk_size).execute(query)
        parts = result.partitions(chunk_size)
    try:
        for part in parts:
            yield _chunk(conn, ctx, part, plan.long)
    finally:
        result.close()


def _context(conn: Connection, plan: ExportPlan) -> _Context:
    """Display names, campaigns and the machine plan of an export, read in its snapshot."""
    schema, questions, campaign_id = plan.schema, list(plan.questions), plan.campaign_id
    campaigns = {c.id: c for c in conn.execute(
        select(Campaign.id, Campaign.name, Campaign.is_probability_sample))}  # fmt: skip
    # Design columns belong to one (work, sample) pair: filled only for the sample named.
    sample_ids: list[int] = []
    if campaign_id is not None and campaigns[campaign_id].is_probability_sample:
        sample_ids.append(campaign_id)
    pseudonymizer = Pseudonymizer(None)
    if plan.pseudonymize:
        pseudonymizer = Pseudonymizer.for_database(conn)
    users = dict(conn.execute(select(User.id, User.name)).all())
    names = {uid: pseudonymizer(name) for uid, name in users.items()}
    wide = arrow_schema(list(plan.columns))
    mplan = machine_plan(schema)
    machine = [c for c, _ in call_columns(schema, questions) + SCORE_COLUMNS
               if c not in SCORE_FROM_WORK]  # fmt: skip
    human = ["human_status", *(f"human_{q.name}" for q in questions), *_VALIDATION]
    return _Context(
        schema, questions, names, campaigns, sample_ids, campaign_id, pseudonymizer, mplan,
        machine_hash(schema),
        wide, {c: wide.field(c).type for c in human}, {c: wide.field(c).type for c in machine},
        [c.removesuffix(CURRENT) for c, _ in current_columns(schema, questions)],
    )  # fmt: skip


# ---------------------------------------------------------------- one chunk


def _chunk(conn: Connection, ctx: _Context, rows: Any, with_labels: bool) -> GoldChunk:
    """The wide table (and long label rows) of one chunk of works."""
    (ids, dois, titles, years, statuses, finals, vias, versions, hashes, machines,
     *scores) = (list(c) for c in zip(*rows, strict=True))  # fmt: skip
    n = len(ids)
    id_arr = pa.array(ids, pa.string())
    current = pa.array(versions, pa.string())
    stale = None
    if ctx.campaign_id is None:  # the stored summaries cover every campaign's labels
        summaries, stale = stored(conn, ctx.schema, id_arr)
    else:
        labels = current_labels(conn, ctx.schema.questions, ctx.campaign_id, id_arr)
        summaries = summarise(labels, n, len(ctx.schema.questions), ctx.schema.hash)
    label_cols = label_columns(summaries, current, ctx.questions, ctx.schema, ctx.names)
    shown = label_cols["model_version"]
    _recompute_stale(conn, ctx, ids, machines, hashes, scores)
    now_machines, now_scores = list(machines), [list(col) for col in scores]
    replaced = _labelled(conn, ctx, ids, machines, scores, shown, current)
    cols: dict[str, Any] = {"work_id": id_arr, "doi": pa.array(dois, pa.string()),
                            "title": pa.array(titles, pa.string()),
                            "year": pa.array(years, pa.int64()),
                            "model_version_current": current}  # fmt: skip
    cols.update(label_cols)
    cols.update(by_distinct(lambda *v: _human(ctx, *v), ctx.human_types, statuses, finals, vias))
    cols.update(by_distinct(lambda t: _stored_machine(ctx, t), ctx.machine_types, machines))
    for k, col in enumerate(SCORE_FROM_WORK):
        cols[col] = pa.array(scores[k], pa.float64())
    # The stored record's calls and scores: the same as above unless a label's was replaced.
    now = cols
    if replaced:
        now = by_distinct(lambda t: _stored_machine(ctx, t), ctx.machine_types, now_machines)
        now.update((col, pa.array(now_scores[k], pa.float64()))
                   for k, col in enumerate(SCORE_FROM_WORK))  # fmt: skip
    cols.update({col + CURRENT: now[col] for col in ctx.current})
    cols.update(_samples(conn, ctx, ids))
    cols.update(_verdicts(conn, ctx, ids, statuses))
    cols.update(flag_columns(conn, ctx.campaigns, ctx.names, ctx.campaign_id, ids))
    table = pa.table({f.name: cols[f.name] for f in ctx.schema_arrow}, schema=ctx.schema_arrow)
    long = (long_labels(conn, ctx.questions, ctx.campaigns, ctx.names, ctx.campaign_id, ids)
            if with_labels else [])  # fmt: skip
    return GoldChunk(table, long, stale)


def _human(ctx: _Context, status: str, final: str | None, via: str | None) -> dict[str, Any]:
    """Status, final answers and how the work was validated, for one distinct combination."""
    validated = status == STATUS_VALIDATED
    answers = orjson.loads(final) if validated and final else {}
    answers = answers if isinstance(answers, dict) else {}
    out: dict[str, Any] = {"human_status": status}
    out.update({f"human_{q.name}": _ANSWER[q.kind](answers.get(q.name)) for q in ctx.questions})
    out.update(validation_fields(ctx.campaigns, ctx.pseudo, via if validated else None))
    return out


def _stored_machine(ctx: _Context, text: str | None) -> dict[str, Any]:
    """The machine columns (other than the scores) of one distinct works.machine text."""
    values = orjson.loads(text) if text else []
    values = values if isinstance(values, list) else []
    return {col: values[k] if k < len(values) else None
            for k, col in enumerate(ctx.plan.stored) if col in ctx.machine_types}  # fmt: skip


def _recompute_stale(
    conn: Connection,
    ctx: _Context,
    ids: list[str],
    machines: list[str | None],
    hashes: list[str | None],
    scores: list[list],
) -> None:
    """Rewrite, in place, the machine side of works whose stored columns are missing or from
    another schema, from their record."""
    stale = [i for i, (t, h) in enumerate(zip(machines, hashes, strict=True))
             if t is None or h != ctx.plan_hash]  # fmt: skip
    if stale:
        wanted = [ids[i] for i in stale]
        records: dict[str, Any] = dict(
            conn.execute(select(Work.id, Work.record).where(Work.id.in_(wanted))).all()
        )
        _rewrite(ctx, {i: records.get(ids[i]) for i in stale}, machines, scores)


def _labelled(
    conn: Connection,
    ctx: _Context,
    ids: list[str],
    machines: list[str | None],
    scores: list[list],
    shown: pa.Array,
    current: pa.Array,
) -> bool:
    """Rewrite, in place, the machine side of works whose labels were made on an earlier
    revision of their record (the latest of them: from predictions, kept with it) or, for
    labels of before revisions were recorded, under an older model version (from
    predictions). Whether any was rewritten."""
    earlier = labelled_revisions(conn, campaign_id=ctx.campaign_id,
                                 conditions=[Work.id >= ids[0], Work.id <= ids[-1]])  # fmt: skip
    redo: dict[int, Any] = {}  # row -> the record-shaped dict to compute its columns from
    redo.update((i, earlier[w][1]) for i, w in enumerate(ids) if w in earlier)
    older = pc.fill_null(pc.not_equal(shown, current), pc.is_valid(shown))
    flags = pc.fill_null(older, False).to_numpy(zero_copy_only=False)
    older_at = [int(i) for i in np.flatnonzero(flags) if int(i) not in redo]
    if older_at:
        versions = shown.to_pylist()
        old = _history(conn, {(ids[i], versions[i]) for i in older_at})
        redo.update((i, old[(ids[i], versions[i])]) for i in older_at
                    if (ids[i], versions[i]) in old)  # fmt: skip
    _rewrite(ctx, redo, machines, scores)
    return bool(redo)


def _rewrite(ctx: _Context, redo: dict[int, Any], machines: list[str | None],
             scores: list[list]) -> None:  # fmt: skip
    """Rows' machine columns computed from record-shaped dicts {row: record}."""
    for i, record in redo.items():
        columns = ctx.plan.columns(record)
        machines[i] = orjson.dumps([columns[c] for c in ctx.plan.stored]).decode()
        for k, col in enumerate(SCORE_FROM_WORK):
            scores[k][i] = columns[col]


def _history(conn: Connection, wanted: set[tuple[str, str]]) -> dict[tuple[str, str], dict]:
    """Superseded predictions {(work, model_version): record-shaped dict}: of several kept
    under one version, the first (the one kept before revisions were, if any)."""
    ids = sorted({w for w, _ in wanted})
    rows = conn.execute(
        select(
            Prediction.work_id,
            Prediction.model_version,
            Prediction.prediction,
            Prediction.machine_scores,
        )
        .where(Prediction.work_id.in_(ids))
        .order_by(Prediction.id.desc())  # fmt: skip
    )
    return {
        (r.work_id, r.model_version): {"prediction": r.prediction or {},
                                       "machine_scores": r.machine_scores or {}}
        for r in rows if (r.work_id, r.model_version) in wanted
    }  # fmt: skip


def _verdicts(
    conn: Connection, ctx: _Context, ids: list[str], statuses: list[str]
) -> dict[str, Any]:
    """Per validated work: whether another campaign's differing verdict is open (the answers
    stand until a lead decides), and the campaigns whose verdicts corroborate the answers."""
    open_: dict[str, bool] = {}
    agree: dict[str, list[str]] = {}
    rows = conn.execute(
        select(
            CampaignVerdict.work_id,
            CampaignVerdict.campaign_id,
            CampaignVerdict.outcome,
            CampaignVerdict.settled_at,
        )
        .where(CampaignVerdict.work_id >= ids[0], CampaignVerdict.work_id <= ids[-1])
        .order_by(CampaignVerdict.work_id, CampaignVerdict.campaign_id)
    )
    for wid, cid, outcome, settled in rows:
        if outcome == VERDICT_DISPUTED and settled is None:
            open_[wid] = True
        elif outcome == VERDICT_CORROBORATED:
            agree.setdefault(wid, []).append(ctx.campaigns[cid].name)
    validated = [s == STATUS_VALIDATED for s in statuses]
    return {
        "dispute_open": pa.array(
            [open_.get(w, False) if v else None for w, v in zip(ids, validated, strict=True)],
            pa.bool_(),
        ),
        "corroborated_by": pa.array(
            [agree.get(w, []) if v else None for w, v in zip(ids, validated, strict=True)],
            pa.list_(pa.string()),
        ),
    }


def _samples(conn: Connection, ctx: _Context, ids: list[str]) -> dict[str, Any]:
    """Sample campaign, stratum, inclusion probability and weight per work: those of the
    probability sample the export is filtered to (--campaign), else empty (see README)."""
    n = len(ids)
    campaign: list[str | None] = [None] * n
    stratum: list[str | None] = [None] * n
    prob: list[float | None] = [None] * n
    if ctx.sample_ids:
        (cid,) = ctx.sample_ids
        items = {item.work_id: item for item in conn.execute(
            select(CampaignItem.work_id, CampaignItem.stratum, CampaignItem.inclusion_prob)
            .where(CampaignItem.campaign_id == cid,
                   CampaignItem.work_id >= ids[0], CampaignItem.work_id <= ids[-1])
        )}  # fmt: skip
        for i, wid in enumerate(ids):
            if (item := items.get(wid)) is not None:
                campaign[i], stratum[i] = ctx.campaigns[cid].name, item.stratum
                prob[i] = item.inclusion_prob
    probs = pa.array(prob, pa.float64())
    weight = pc.if_else(pc.greater(probs, 0), pc.divide(1.0, probs), pa.nulls(n, pa.float64()))
    return {"sample_campaign": pa.array(campaign, pa.string()),
            "stratum": pa.array(stratum, pa.string()), "inclusion_prob": probs,
            "weight": weight}  # fmt: skip
