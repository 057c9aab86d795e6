"""Gold-set rows: filters, columns, and the streaming query that builds one row per work."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from itertools import combinations
from typing import Any

import orjson
from sqlalchemy import Connection, exists, func, select

from db.models import (
    STATUS_VALIDATED,
    Campaign,
    CampaignItem,
    Label,
    Prediction,
    User,
    Work,
)
from labeling.schema import Question, Schema, get_path

STATUS_FILTERS = ("validated", "labelled", "all")
CHUNK = 2_000
_VIA_CAMPAIGN = re.compile(r"^rule:([a-z]+:k=\d+):c(\d+)$")
PSEUDONYM_KEY_TAG = b"labeling-pseudonym-key-v1"
# (column, kind): kind is str, int, float, bool, list (of str) or, for answers, by question.
BASE_COLUMNS = [("work_id", "str"), ("doi", "str"), ("title", "str"), ("year", "int"),
                ("status", "str")]  # fmt: skip
PROVENANCE_COLUMNS = [
    ("validation_method", "str"), ("validation_rule", "str"), ("validation_campaign", "str"),
    ("validated_by", "str"), ("validated_via", "str"), ("n_labels", "int"),
    ("annotators", "list"), ("agreement", "float"), ("first_labelled_at", "str"),
    ("last_labelled_at", "str"), ("model_version", "str"), ("model_version_current", "str"),
]
SCORE_COLUMNS = [
    ("score_opus", "float"), ("score_gpt", "float"), ("score_spread", "float"),
    ("scores_provisional", "bool"), ("scores_baseline", "bool"),
    ("scores_maturity_gate_passed", "bool"), ("validation_status", "str"), ("scores_note", "str"),
    ("prediction_status", "str"), ("teacher_disagreement_score", "float"),
    ("threshold_uncertainty_score", "float"),
]
SAMPLE_COLUMNS = [("sample_campaign", "str"), ("stratum", "str"), ("inclusion_prob", "float"),
                  ("weight", "float")]  # fmt: skip
LONG_COLUMNS = [
    ("work_id", "str"), ("annotator", "str"), ("question", "str"), ("value", "answer"),
    ("created_at", "str"), ("confidence", "int"), ("note", "str"), ("campaign", "str"),
    ("version", "int"), ("time_on_item_ms", "int"), ("model_version", "str"),
    ("scores_visible", "bool"), ("schema_hash", "str"),
]


class ExportError(ValueError):
    """An export that cannot be made (bad filter, unknown campaign or question)."""


@dataclass(frozen=True)
class ExportFilters:
    """Which works a gold set holds.

    status: "validated" (default), "labelled" (at least one non-skipped label) or "all";
    campaign: a campaign name or id (its items and only its labels); questions: the schema
    questions to export (None = all); since/until: keep works with a label created on or
    after `since` and on or before `until` (whole UTC days).
    """

    status: str = "validated"
    campaign: str | None = None
    questions: tuple[str, ...] | None = None
    since: date | None = None
    until: date | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (dates as ISO strings)."""
        return {
            "status": self.status, "campaign": self.campaign,
            "questions": list(self.questions) if self.questions else None,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
        }


class Pseudonymizer:
    """Stable annotator pseudonyms: HMAC-SHA256 of the name under a per-database key.

    The key is the SHA-256 of a fixed tag and the earliest users row (id, name, created_at
    to the microsecond): users are never deleted, so the key, and every pseudonym, stays
    the same for the life of the database, while differing between databases. Someone who
    holds only the export cannot reverse or recompute the pseudonyms.
    """

    def __init__(self, key: bytes | None) -> None:
        """Keep the key; None means pass names through unchanged."""
        self.key = key
        self._cache: dict[str, str] = {}

    @classmethod
    def for_database(cls, conn: Connection) -> Pseudonymizer:
        """The database's pseudonymizer (see the class docstring for the key)."""
        first = conn.execute(
            select(User.id, User.name, User.created_at).order_by(User.id).limit(1)
        ).first()
        seed = "" if first is None else f"{first.id}\0{first.name}\0{first.created_at.isoformat()}"
        return cls(hashlib.sha256(PSEUDONYM_KEY_TAG + b"\0" + seed.encode("utf-8")).digest())

    def __call__(self, name: str | None) -> str | None:
        """The pseudonym of `name` (the name itself without a key)."""
        if name is None or self.key is None:
            return name
        if name not in self._cache:
            digest = hmac.new(self.key, name.encode("utf-8"), hashlib.sha256).hexdigest()
            self._cache[name] = "annotator-" + digest[:12]
        return self._cache[name]


def select_questions(schema: Schema, names: Sequence[str] | None) -> list[Question]:
    """The schema questions to export, in schema order; ExportError names unknown ones."""
    if not names:
        return list(schema.questions)
    unknown = [n for n in names if n not in schema.names]
    if unknown:
        raise ExportError(f"unknown questions {', '.join(unknown)}: the schema has "
                          f"{', '.join(schema.names)}")  # fmt: skip
    return [q for q in schema.questions if q.name in set(names)]


def wide_columns(schema: Schema, questions: Sequence[Question]) -> list[tuple[str, str]]:
    """(name, kind) of every gold-set column, in file order."""
    answer_kind = {"multi": "list", "single": "str", "binary": "str"}
    cols = list(BASE_COLUMNS)
    cols += [(f"human_{q.name}", answer_kind[q.kind]) for q in questions]
    cols += PROVENANCE_COLUMNS
    for q in questions:
        for who in (*schema.teachers, "candidate", "consensus"):
            cols.append((f"machine_{q.name}_{who}", answer_kind[q.kind]))
    return cols + SCORE_COLUMNS + SAMPLE_COLUMNS


def resolve_campaign(conn: Connection, name_or_id: str | None) -> Any:
    """The campaign row named (or numbered) `name_or_id`, or None; ExportError if unknown."""
    if name_or_id is None:
        return None
    query = select(Campaign.id, Campaign.name)
    row = conn.execute(query.where(Campaign.name == str(name_or_id))).first()
    if row is None and str(name_or_id).isdigit():
        row = conn.execute(query.where(Campaign.id == int(name_or_id))).first()
    if row is None:
        raise ExportError(f"no campaign named or numbered {name_or_id!r}")
    return row


def work_conditions(filters: ExportFilters, campaign_id: int | None) -> list[Any]:
    """SQL conditions on works for the filters."""
    if filters.status not in STATUS_FILTERS:
        raise ExportError(f"status must be one of {', '.join(STATUS_FILTERS)}, "
                          f"not {filters.status!r}")  # fmt: skip
    if filters.since and filters.until and filters.since > filters.until:
        raise ExportError(f"since ({filters.since}) is after until ({filters.until})")
    in_scope = [Label.work_id == Work.id]
    if campaign_id is not None:
        in_scope.append(Label.campaign_id == campaign_id)
    conds: list[Any] = []
    if filters.status == "validated":
        conds.append(Work.status == STATUS_VALIDATED)
    elif filters.status == "labelled":
        conds.append(exists().where(*in_scope, Label.skipped.is_(False)))
    if campaign_id is not None:
        conds.append(exists().where(CampaignItem.campaign_id == campaign_id,
                                    CampaignItem.work_id == Work.id))  # fmt: skip
    if filters.since or filters.until:
        when = list(in_scope)
        if filters.since:
            when.append(Label.created_at >= datetime.combine(filters.since, time()))
        if filters.until:
            when.append(Label.created_at < datetime.combine(filters.until + timedelta(1), time()))
        conds.append(exists().where(*when))
    return conds


def status_counts(conn: Connection, conds: list[Any]) -> dict[str, int]:
    """Number of matching works per status."""
    rows = conn.execute(
        select(Work.status, func.count()).where(*conds).group_by(Work.status).order_by(Work.status)
    )
    return {status: int(n) for status, n in rows}


# ---------------------------------------------------------------- value coercion


def _as_list(value: Any) -> list[str] | None:
    """A call as a list of labels (None stays None)."""
    if value is None:
        return None
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    return [str(value)]


def _as_str(value: Any) -> str | None:
    """A call or text as a string; booleans become yes/no like the human answers."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _as_float(value: Any) -> float | None:
    """A number as float, else None."""
    kind = type(value)
    if kind is float:
        return value
    return float(value) if kind is int else None


def _as_bool(value: Any) -> bool | None:
    """A flag as bool, else None."""
    return value if isinstance(value, bool) else None


def _thresholded(q: Question) -> Callable[[Any], Any]:
    """A teacher's call from its scores: labels at or above the threshold, or yes/no."""

    labels, threshold, multi = q.labels, q.threshold, q.kind == "multi"

    def call(scores: Any) -> Any:
        """The call made from one score vector (multi) or score (binary)."""
        if multi and type(scores) is list and len(scores) == len(labels):
            try:
                return [lab for lab, v in zip(labels, scores, strict=True) if v >= threshold]
            except TypeError:  # a non-number among the scores
                return None
        if not multi and _as_float(scores) is not None:
            return "yes" if scores >= threshold else "no"
        return None

    return call


_SCORE_FIELDS = [
    ("score_opus", "machine_scores.score_opus", _as_float),
    ("score_gpt", "machine_scores.score_gpt", _as_float),
    ("score_spread", "machine_scores.score_spread", _as_float),
    ("scores_provisional", "machine_scores.provisional", _as_bool),
    ("scores_baseline", "machine_scores.baseline", _as_bool),
    ("scores_maturity_gate_passed", "machine_scores.maturity_gate_passed", _as_bool),
    # Verbatim: the frame's text as it is (a non-string is kept as its text).
    ("validation_status", "machine_scores.validation_status", _as_str),
    ("scores_note", "machine_scores.note", _as_str),
    ("prediction_status", "prediction.prediction_status", _as_str),
    ("teacher_disagreement_score", "prediction.teacher_disagreement_score", _as_float),
    ("threshold_uncertainty_score", "prediction.threshold_uncertainty_score", _as_float),
]


@dataclass(frozen=True)
class MachinePlan:
    """The record paths the machine columns read, and how each column is made from them."""

    paths: list[str]
    steps: list[tuple[str, int, Callable[[Any], Any]]]

    def values(self, record: Any) -> list[Any]:
        """The plan's path values from a record-shaped dict (plus a trailing None)."""
        root = record if isinstance(record, dict) else {}
        return [get_path(root, p) for p in self.paths] + [None]

    def columns(self, values: list[Any]) -> dict[str, Any]:
        """The machine columns from path values (see values)."""
        return {col: fn(values[i]) for col, i, fn in self.steps}


def machine_plan(schema: Schema, questions: Sequence[Question]) -> MachinePlan:
    """How to read the machine columns from a record, for the exported questions.

    Each teacher's call comes from its call path, else from its scores thresholded at the
    question's threshold (multi and binary); candidate and consensus from their paths; the
    machine scores, validation status (verbatim) and prediction status from the record.
    """
    paths: list[str] = []
    steps: list[tuple[str, int, Callable[[Any], Any]]] = []

    def at(path: str) -> int:
        """The index of a path in the plan (added on first use)."""
        if path not in paths:
            paths.append(path)
        return paths.index(path)

    conv = {"multi": _as_list, "single": _as_str, "binary": _as_str}
    for q in questions:
        for who in (*schema.teachers, "candidate", "consensus"):
            col = f"machine_{q.name}_{who}"
            if who in q.calls:
                steps.append((col, at(q.calls[who]), conv[q.kind]))
            elif who in q.scores and q.kind in ("multi", "binary"):
                steps.append((col, at(q.scores[who]), _thresholded(q)))
            else:
                steps.append((col, -1, _as_str))
    steps += [(col, at(path), fn) for col, path, fn in _SCORE_FIELDS]
    return MachinePlan(paths, steps)


def _sql_paths(plan: MachinePlan) -> Any:
    """SQLite: every plan path read by one json_extract (a JSON array, one parse per row)."""
    quoted = ["$" + "".join(f'."{part}"' for part in p.split(".")) for p in plan.paths]
    return func.json_extract(Work.record, *quoted).label("machine")


def agreement(labels: Sequence[dict[str, Any]], questions: Sequence[Question]) -> float | None:
    """Mean over questions of the share of annotator pairs giving the same answer."""
    if len(labels) < 2:
        return None
    shares = []
    for q in questions:
        values = [lab.get(q.name) for lab in labels]
        values = [v for v in values if v is not None]
        if len(values) == 2:
            shares.append(float(values[0] == values[1]))
        elif len(values) > 2:
            pairs = list(combinations(values, 2))
            shares.append(sum(a == b for a, b in pairs) / len(pairs))
    return round(sum(shares) / len(shares), 6) if shares else None


def _iso(stamp: datetime | None) -> str | None:
    """A UTC timestamp as ISO 8601 text."""
    return stamp.isoformat(timespec="microseconds") if stamp is not None else None


# ---------------------------------------------------------------- streaming


@dataclass
class _Context:
    """What every chunk needs: questions, names, campaigns, pseudonymizer, scope."""

    schema: Schema
    questions: list[Question]
    users: dict[int, str]
    campaigns: dict[int, Any]
    sample_ids: list[int]
    campaign_id: int | None
    pseudo: Pseudonymizer
    plan: MachinePlan
    in_sql: bool


@dataclass
class GoldChunk:
    """One chunk of the gold set: wide rows and the current labels behind them."""

    rows: list[dict[str, Any]]
    labels: list[dict[str, Any]]


_WORK_COLUMNS = (Work.id, Work.doi, Work.title, Work.year, Work.status, Work.final_answers,
                 Work.validated_via, Work.model_version)  # fmt: skip


def iter_chunks(
    conn: Connection, schema: Schema, filters: ExportFilters, *, pseudonymize: bool = False,
    chunk_size: int = CHUNK, with_labels: bool = False,
) -> Iterator[GoldChunk]:
    """Stream the gold set in chunks of works ordered by id, inside the caller's transaction.

    Args:
        conn: an open connection (one transaction, so the export sees one snapshot).
        schema: the label schema.
        filters: which works and questions.
        pseudonymize: replace annotator and lead names by stable pseudonyms.
        chunk_size: works per chunk.
        with_labels: also return each chunk's current labels (for the long file).
    """
    questions = select_questions(schema, filters.questions)
    camp = resolve_campaign(conn, filters.campaign)
    campaign_id = camp.id if camp is not None else None
    conds = work_conditions(filters, campaign_id)
    campaigns = {c.id: c for c in conn.execute(
        select(Campaign.id, Campaign.name, Campaign.is_probability_sample))}  # fmt: skip
    sample_ids = sorted(c for c, row in campaigns.items() if row.is_probability_sample)
    if campaign_id is not None:
        sample_ids = [c for c in sample_ids if c == campaign_id]
    ctx = _Context(
        schema, questions, dict(conn.execute(select(User.id, User.name)).all()), campaigns,
        sample_ids, campaign_id,
        Pseudonymizer.for_database(conn) if pseudonymize else Pseudonymizer(None),
        machine_plan(schema, questions), conn.dialect.name == "sqlite",
    )
    # SQLite extracts the machine paths itself (no full record parse in Python).
    machine = _sql_paths(ctx.plan) if ctx.in_sql else Work.record
    query = select(*_WORK_COLUMNS, machine).where(*conds).order_by(Work.id)
    if ctx.in_sql and (pk := _sqlite_pk_index(conn)):
        # Walk the primary key in order: with the status index SQLite would sort the whole
        # result in a temporary B-tree first (all rows in memory before the first one).
        query = query.with_hint(Work, f"INDEXED BY {pk}", "sqlite")
    result = conn.execution_options(stream_results=True, yield_per=chunk_size).execute(query)
    try:
        for part in result.partitions(chunk_size):
            yield _build_chunk(conn, ctx, part, with_labels)
    finally:
        result.close()


def _sqlite_pk_index(conn: Connection) -> str | None:
    """The name of SQLite's automatic index on works.id (None when there is none)."""
    return conn.exec_driver_sql(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'works' "
        "AND name LIKE 'sqlite_autoindex_works_%' ORDER BY name LIMIT 1"
    ).scalar()


def _current_labels(conn: Connection, ctx: _Context, lo: str, hi: str) -> dict[str, list[Any]]:
    """The latest non-skipped label of each (campaign, annotator) per work in [lo, hi]."""
    query = (
        select(Label.campaign_id, Label.work_id, Label.user_id, Label.version, Label.skipped,
               Label.answers, Label.created_at, Label.confidence, Label.note,
               Label.time_on_item_ms, Label.model_version, Label.scores_visible,
               Label.schema_hash)  # fmt: skip
        .where(Label.work_id >= lo, Label.work_id <= hi)
        .order_by(Label.work_id, Label.campaign_id, Label.user_id, Label.version)
    )
    if ctx.campaign_id is not None:
        query = query.where(Label.campaign_id == ctx.campaign_id)
    latest: dict[tuple[str, int, int], Any] = {}
    for row in conn.execute(query):
        latest[(row.work_id, row.campaign_id, row.user_id)] = row
    out: dict[str, list[Any]] = {}
    for row in latest.values():
        if not row.skipped:
            out.setdefault(row.work_id, []).append(row)
    return out


def _samples(conn: Connection, ctx: _Context, lo: str, hi: str) -> dict[str, dict[int, Any]]:
    """Probability-sample items per work in [lo, hi]: {work: {campaign: item}}."""
    out: dict[str, dict[int, Any]] = {}
    for cid in ctx.sample_ids:
        for item in conn.execute(
            select(CampaignItem.work_id, CampaignItem.stratum, CampaignItem.inclusion_prob)
            .where(CampaignItem.campaign_id == cid, CampaignItem.work_id >= lo,
                   CampaignItem.work_id <= hi)  # fmt: skip
        ):
            out.setdefault(item.work_id, {})[cid] = item
    return out


def _history(conn: Connection, wanted: set[tuple[str, str]]) -> dict[tuple[str, str], dict]:
    """Superseded predictions {(work, model_version): record-shaped dict}."""
    if not wanted:
        return {}
    ids = sorted({w for w, _ in wanted})
    rows = conn.execute(
        select(Prediction.work_id, Prediction.model_version, Prediction.prediction,
               Prediction.machine_scores).where(Prediction.work_id.in_(ids))  # fmt: skip
    )
    return {
        (r.work_id, r.model_version): {"prediction": r.prediction or {},
                                       "machine_scores": r.machine_scores or {}}
        for r in rows if (r.work_id, r.model_version) in wanted
    }  # fmt: skip


def _labelled_version(labels: list[Any]) -> str | None:
    """The model version shown with the most recent label that recorded one."""
    stamped = [lab for lab in labels if lab.model_version]
    if not stamped:
        return None
    newest = max(stamped, key=lambda lab: (lab.created_at, lab.campaign_id, lab.user_id))
    return newest.model_version


def _build_chunk(
    conn: Connection, ctx: _Context, works: Sequence[Any], with_labels: bool
) -> GoldChunk:
    """Wide rows (and long label rows) for one chunk of works."""
    lo, hi = works[0].id, works[-1].id
    labels = _current_labels(conn, ctx, lo, hi)
    samples = _samples(conn, ctx, lo, hi) if ctx.sample_ids else {}
    versions = {w.id: _labelled_version(labels.get(w.id, [])) or w.model_version for w in works}
    history = _history(conn, {(w.id, versions[w.id]) for w in works
                              if versions[w.id] and versions[w.id] != w.model_version})
    rows, long_rows = [], []
    for w in works:
        labs = sorted(labels.get(w.id, []), key=lambda lab: (
            ctx.campaigns[lab.campaign_id].name, ctx.pseudo(ctx.users.get(lab.user_id)) or ""))
        rows.append(_wide_row(ctx, w, labs, samples.get(w.id, {}), versions[w.id],
                              history.get((w.id, versions[w.id]))))  # fmt: skip
        if with_labels:
            long_rows.extend(_long_rows(ctx, w.id, labs))
    return GoldChunk(rows, long_rows)


def _validation(ctx: _Context, via: str | None) -> dict[str, Any]:
    """How a work was validated, from its validated_via."""
    out = {"validation_method": None, "validation_rule": None, "validation_campaign": None,
           "validated_by": None, "validated_via": via}  # fmt: skip
    if not via:
        return out
    if via.startswith("adjudicated:"):
        lead = ctx.pseudo(via.removeprefix("adjudicated:"))
        out.update(validation_method="adjudicated", validated_by=lead,
                   validated_via=f"adjudicated:{lead}")  # fmt: skip
    elif match := _VIA_CAMPAIGN.match(via):
        camp = ctx.campaigns.get(int(match.group(2)))
        out.update(validation_method="rule", validation_rule=match.group(1),
                   validation_campaign=camp.name if camp is not None else None)  # fmt: skip
    else:
        out["validation_method"] = via.split(":", 1)[0]
    return out


def _wide_row(
    ctx: _Context, w: Any, labs: list[Any], samples: dict[int, Any], version: str | None,
    old: dict[str, Any] | None,
) -> dict[str, Any]:
    """One work's gold-set row."""
    row: dict[str, Any] = {"work_id": w.id, "doi": w.doi, "title": w.title, "year": w.year,
                           "status": w.status}  # fmt: skip
    final = w.final_answers if w.status == STATUS_VALIDATED and w.final_answers else {}
    for q in ctx.questions:
        row[f"human_{q.name}"] = final.get(q.name)
    row.update(_validation(ctx, w.validated_via if w.status == STATUS_VALIDATED else None))
    stamps = [lab.created_at for lab in labs]
    row.update({
        "n_labels": len(labs),
        "annotators": sorted({ctx.pseudo(ctx.users.get(lab.user_id)) or "" for lab in labs}),
        "agreement": agreement([lab.answers for lab in labs], ctx.questions),
        "first_labelled_at": _iso(min(stamps)) if stamps else None,
        "last_labelled_at": _iso(max(stamps)) if stamps else None,
        "model_version": version, "model_version_current": w.model_version,
    })
    if old is not None:
        values = ctx.plan.values(old)
    elif ctx.in_sql:
        blank = [None] * len(ctx.plan.paths)
        values = (orjson.loads(w.machine) if w.machine else blank) + [None]
    else:
        values = ctx.plan.values(w.record)
    row.update(ctx.plan.columns(values))
    item = None
    if samples:
        via = _VIA_CAMPAIGN.match(w.validated_via or "")
        cid = int(via.group(2)) if via and int(via.group(2)) in samples else min(samples)
        item = samples[cid]
    prob = item.inclusion_prob if item is not None else None
    row.update({
        "sample_campaign": ctx.campaigns[cid].name if item is not None else None,
        "stratum": item.stratum if item is not None else None,
        "inclusion_prob": prob, "weight": 1.0 / prob if prob else None,
    })
    return row


def _long_rows(ctx: _Context, work_id: str, labs: list[Any]) -> list[dict[str, Any]]:
    """One row per question of each current label (the format import-labels reads)."""
    out = []
    for lab in labs:
        for q in ctx.questions:
            if q.name not in lab.answers:
                continue
            out.append({
                "work_id": work_id, "annotator": ctx.pseudo(ctx.users.get(lab.user_id)),
                "question": q.name, "value": lab.answers[q.name],
                "created_at": _iso(lab.created_at), "confidence": lab.confidence,
                "note": lab.note, "campaign": ctx.campaigns[lab.campaign_id].name,
                "version": lab.version, "time_on_item_ms": lab.time_on_item_ms,
                "model_version": lab.model_version, "scores_visible": lab.scores_visible,
                "schema_hash": lab.schema_hash,
            })
    return out
