"""Campaigns: which works are queued, in what order, with what sample design and rule."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import Engine, exists, false, func, insert, literal, null, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, aliased

from db.engine import read_session, write_session
from db.models import Campaign, CampaignItem, Label, Lease, Work, utcnow
from labeling.errors import CampaignError
from labeling.inputs import row_id, storable
from labeling.numbers import INT32_MAX, SEED_MAX, whole_in
from labeling.review.assist import check_rate
from labeling.review.filters import SCORE_STRATEGIES, filter_clauses, validate_filter
from labeling.review.sampling import draw_sample, validate_bins
from labeling.review.validation import MODEL_RULE, RULES
from labeling.schema import Schema

SAMPLE_STRATEGIES = ("random", "stratified")
MANUAL = "manual"
STRATEGIES = (*SCORE_STRATEGIES, *SAMPLE_STRATEGIES, MANUAL)
_CHUNK = 5_000


@dataclass(frozen=True)
class CampaignInfo:
    """A campaign row, detached from the session, with its queue counts."""

    id: int
    name: str
    description: str | None
    strategy: str
    filter: dict[str, Any] | None
    sample: dict[str, Any] | None
    is_probability_sample: bool
    overlap: int
    blind: bool
    questions: tuple[str, ...] | None
    lease_seconds: int
    assist_rate: float | None
    rule: str
    gold_rate: float
    active: bool
    created_by: int | None
    created_at: datetime
    n_items: int = 0
    n_done: int = 0


def _info(c: Campaign, n_items: int = 0, n_done: int = 0) -> CampaignInfo:
    """The detached view of a Campaign row with its counts."""
    return CampaignInfo(
        id=c.id,
        name=c.name,
        description=c.description,
        strategy=c.strategy,
        filter=c.filter,
        sample=c.sample,
        is_probability_sample=c.is_probability_sample,
        overlap=c.overlap,
        blind=c.blind,
        questions=tuple(c.questions) if c.questions else None,
        assist_rate=c.assist_rate,
        lease_seconds=c.lease_seconds,
        rule=c.rule,
        gold_rate=c.gold_rate,
        active=c.active,
        created_by=c.created_by,
        created_at=c.created_at,
        n_items=int(n_items or 0),
        n_done=int(n_done or 0),
    )


def _population(session: Session, filter: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Ids and score_max of the filtered works, in id order (NaN for no score)."""
    rows = session.execute(
        select(Work.id, Work.score_max).where(*filter_clauses(filter)).order_by(Work.id)
    ).all()
    ids = np.array([r[0] for r in rows], dtype=object)
    scores = np.array([np.nan if r[1] is None else r[1] for r in rows], dtype=float)
    return ids, scores


def _materialise_order(
    session: Session, campaign_id: int, filter: dict[str, Any], strategy: str, n: int | None
) -> None:
    """INSERT ... SELECT the filtered works in score order (ROW_NUMBER for positions)."""
    column = getattr(Work, strategy)
    rank = func.row_number().over(order_by=(column.desc().nulls_last(), Work.id))
    ranked = select(Work.id.label("work_id"), rank.label("position")).where(*filter_clauses(filter))
    if n is not None:
        sub = ranked.subquery()
        ranked = select(sub.c.work_id, sub.c.position).where(sub.c.position <= n)
    sub = ranked.subquery()
    source = select(
        literal(campaign_id),
        sub.c.work_id,
        sub.c.position,
        null(),
        null(),
        literal(0),
        false(),
        false(),
    )
    cols = [
        "campaign_id",
        "work_id",
        "position",
        "stratum",
        "inclusion_prob",
        "n_labels",
        "done",
        "is_gold",
    ]
    session.execute(insert(CampaignItem).from_select(cols, source))


DEFAULT_POSTERIOR = 0.95


def stored_rule(rule: str, posterior: float | None = None) -> str:
    """The rule column's value: the rule's name, and the dawid-skene rule's threshold."""
    if rule not in RULES:
        raise CampaignError(f"unknown rule {rule!r}: expected one of {', '.join(RULES)}")
    if rule != MODEL_RULE:
        if posterior is not None:
            raise CampaignError(f"a posterior threshold applies to the {MODEL_RULE} rule only")
        return rule
    p = DEFAULT_POSTERIOR if posterior is None else float(posterior)
    if not 0.5 < p <= 1.0:  # at most 0.5 a yes/no question would validate on a coin toss
        raise CampaignError(f"the posterior threshold must be above 0.5 and at most 1, not {p}")
    return f"{MODEL_RULE}:p={p:g}"


def create_campaign(
    engine: Engine,
    *,
    name: str,
    strategy: str = "score_max",
    filter: dict[str, Any] | None = None,
    overlap: int = 1,
    blind: bool = False,
    assist_rate: float | None = None,
    questions: Sequence[str] | None = None,
    lease_seconds: int = 900,
    sample_size: int | None = None,
    allocation: str | int = "proportional",
    bins: Sequence[float] | None = None,
    seed: int = 0,
    rule: str = "unanimous",
    posterior: float | None = None,
    gold_rate: float = 0.0,
    created_by: int | None = None,
    description: str | None = None,
    schema: Schema | None = None,
) -> CampaignInfo:
    """Create a campaign and materialise its queue, all in one transaction.

    Args:
        engine: the database.
        name: unique campaign name.
        strategy: a score order (score_opus, score_gpt, score_max, score_spread,
            teacher_disagreement, threshold_uncertainty: descending, ties by work id), a
            probability sample ("random", "stratified") or "manual" (empty; items added later).
        filter: which works (see validate_filter); None = every work.
        overlap: independent labels wanted per work (k of the rule).
        blind: hide machine scores until the label is submitted.
        assist_rate: 0 < R < 1 randomises, per (work, annotator) and seeded by `seed`, whether
            the scores are shown before submit (labeling/review/assist.py); None = blind decides.
        questions: names of the schema questions asked (None = all).
        lease_seconds: how long a claimed work stays with its annotator.
        sample_size: sample size for samples; for score orders, keep only the top n.
        allocation: stratified allocation: "proportional", "equal" or n per stratum.
        bins: score_max edges of the strata (default sampling.DEFAULT_BINS).
        seed: random seed of the draw and of the queue order of samples.
        rule: validation rule, "unanimous", "majority" or "dawid-skene" (posterior >= P
            with k labels, applied by `labeling aggregate --validate`).
        posterior: P of the dawid-skene rule (default 0.95; stored in the rule column).
        gold_rate: probability of offering a gold work instead of the next one.
        created_by: user id of the lead.
        description: free text.
        schema: when given, question names are checked against it.
    """
    if not isinstance(name, str) or not name.strip() or len(name) > 128:
        raise CampaignError("a campaign needs a name of 1 to 128 characters")
    if strategy not in STRATEGIES:
        known = ", ".join(STRATEGIES)
        raise CampaignError(f"unknown strategy {strategy!r}: expected one of {known}")
    # Whole numbers that reach Integer columns (or a LIMIT) stay within 32 bits, on SQLite as
    # on PostgreSQL, which would refuse them only at the insert.
    if not whole_in(overlap, 1, INT32_MAX):
        raise CampaignError(
            f"overlap must be a whole number from 1 to {INT32_MAX}, not {overlap!r}"
        )
    if not whole_in(seed, 0, SEED_MAX):
        raise CampaignError(f"seed must be a whole number from 0 to {SEED_MAX}, not {seed!r}")
    rule = stored_rule(rule, posterior)
    try:
        check_rate(assist_rate, blind)
    except ValueError as exc:
        raise CampaignError(str(exc)) from exc
    if not 0.0 <= float(gold_rate) <= 1.0:
        raise CampaignError("gold_rate must be between 0 and 1")
    if not whole_in(int(lease_seconds), 1, INT32_MAX):
        raise CampaignError(f"lease_seconds must be from 1 to {INT32_MAX}")
    if sample_size is not None and not whole_in(sample_size, 1, INT32_MAX):
        raise CampaignError(f"sample_size must be a whole number from 1 to {INT32_MAX}")
    if strategy == "random" and sample_size is None:
        raise CampaignError("a random sample needs sample_size")
    if strategy == "stratified" and sample_size is None and not isinstance(allocation, int):
        raise CampaignError("a stratified sample needs sample_size (or n per stratum)")
    if questions is not None:
        questions = list(questions)
        if not questions or not all(isinstance(q, str) for q in questions):
            raise CampaignError("questions must be a non-empty list of question names")
        if schema is not None:
            unknown = [q for q in questions if q not in schema.names]
            if unknown:
                raise CampaignError(f"unknown questions: {', '.join(unknown)}")
    clean = validate_filter(filter)
    edges = validate_bins(bins) if strategy == "stratified" else None
    try:
        with write_session(engine) as session:
            if session.execute(select(Campaign.id).where(Campaign.name == name)).first():
                raise CampaignError(f"a campaign named '{name}' already exists")
            # JSON columns are only set when there is a value: None would be stored as 'null'.
            optional = {"filter": clean or None, "questions": questions}
            row = Campaign(
                name=name,
                description=description,
                strategy=strategy,
                is_probability_sample=strategy in SAMPLE_STRATEGIES,
                overlap=overlap,
                blind=blind,
                assist_rate=float(assist_rate) if assist_rate is not None else None,
                assist_seed=int(seed) if assist_rate is not None else None,
                lease_seconds=int(lease_seconds),
                rule=rule,
                gold_rate=float(gold_rate),
                active=True,
                created_by=created_by,
                created_at=utcnow(),
                **{k: v for k, v in optional.items() if v is not None},
            )
            session.add(row)
            session.flush()
            if strategy in SCORE_STRATEGIES:
                _materialise_order(session, row.id, clean, strategy, sample_size)
            elif strategy in SAMPLE_STRATEGIES:
                items, design = draw_sample(
                    *_population(session, clean),
                    strategy,
                    sample_size,
                    allocation,
                    edges or [],
                    seed,
                )
                row.sample = design
                for i in range(0, len(items), _CHUNK):
                    chunk = [
                        dict(r, campaign_id=row.id, n_labels=0, done=False, is_gold=False)
                        for r in items[i : i + _CHUNK]
                    ]
                    session.execute(insert(CampaignItem), chunk)
            campaign_id = row.id
    except IntegrityError as exc:
        raise CampaignError(f"a campaign named '{name}' already exists") from exc
    return get_campaign(engine, campaign_id)


def _counts(session: Session, campaign_ids: list[int]) -> dict[int, tuple[int, int]]:
    """Items and done items per campaign."""
    rows = session.execute(
        select(
            CampaignItem.campaign_id,
            func.count(),
            func.count().filter(CampaignItem.done),
        )
        .where(CampaignItem.campaign_id.in_(campaign_ids))
        .group_by(CampaignItem.campaign_id)
    ).all()
    return {r[0]: (r[1], r[2]) for r in rows}


def find_campaign(engine: Engine, name_or_id: str | int) -> CampaignInfo | None:
    """The campaign with this name (or id), or None."""
    with read_session(engine) as session:
        row = None
        if isinstance(name_or_id, str) and storable(name_or_id):
            row = session.execute(
                select(Campaign).where(Campaign.name == name_or_id)
            ).scalar_one_or_none()
        if row is None and (number := row_id(name_or_id)) is not None:
            row = session.get(Campaign, number)
        if row is None:
            return None
        n_items, n_done = _counts(session, [row.id]).get(row.id, (0, 0))
        return _info(row, n_items, n_done)


def get_campaign(engine: Engine, name_or_id: str | int) -> CampaignInfo:
    """The campaign with this name or id; CampaignError when there is none.

    Args:
        engine: the database.
        name_or_id: the campaign's name, or its id (int or digits).
    """
    info = find_campaign(engine, name_or_id)
    if info is None:
        raise CampaignError(unknown_campaign(engine, name_or_id))
    return info


def unknown_campaign(engine: Engine, name_or_id: str | int) -> str:
    """The message for a campaign that is not there, with the closest name when one is near."""
    import difflib

    typed = str(name_or_id)
    if row_id(name_or_id) is not None:
        return f"no campaign named or numbered {typed!r}"
    # Long input is cut: a message is one line, whatever was typed.
    cut = typed if len(typed) <= 80 else typed[:77] + "..."
    with read_session(engine) as session:
        names = list(session.execute(select(Campaign.name)).scalars())
    near = difflib.get_close_matches(typed, names, n=1) if len(typed) <= 200 else []
    hint = f"; did you mean {near[0]!r}?" if near else " (`labeling campaigns list` lists them)"
    return f"no campaign named {cut!r}{hint}"


def list_campaigns(engine: Engine) -> list[CampaignInfo]:
    """Every campaign, newest first, with item and done counts."""
    with read_session(engine) as session:
        rows = session.execute(select(Campaign).order_by(Campaign.id.desc())).scalars().all()
        counts = _counts(session, [r.id for r in rows]) if rows else {}
        return [_info(r, *counts.get(r.id, (0, 0))) for r in rows]


def get_or_create_campaign(engine: Engine, name: str, **defaults: Any) -> CampaignInfo:
    """The campaign called `name`, created with `defaults` (see create_campaign) if missing."""
    found = find_campaign(engine, name)
    if found is not None and found.name == name:
        return found
    try:
        return create_campaign(engine, name=name, **defaults)
    except CampaignError:
        found = find_campaign(engine, name)
        if found is None:
            raise
        return found


def set_active(engine: Engine, campaign_id: int, active: bool) -> None:
    """Open or close a campaign (a closed campaign serves no more work)."""
    with write_session(engine) as session:
        row = session.get(Campaign, campaign_id)
        if row is None:
            raise CampaignError(f"no campaign numbered {campaign_id}")
        row.active = active


def add_items(
    session: Session, campaign_id: int, work_ids: Sequence[str], *, is_gold: bool = False
) -> int:
    """Append works not yet in a campaign to the end of its queue; returns how many were added.

    Args:
        session: an open write session.
        campaign_id: the campaign.
        work_ids: works to add (ones already queued are left as they are).
        is_gold: mark the new items as gold checks.
    """
    wanted = list(dict.fromkeys(work_ids))
    present: set[str] = set()
    for i in range(0, len(wanted), 500):
        present |= set(
            session.execute(
                select(CampaignItem.work_id).where(
                    CampaignItem.campaign_id == campaign_id,
                    CampaignItem.work_id.in_(wanted[i : i + 500]),
                )
            ).scalars()
        )
    new = [w for w in wanted if w not in present]
    if not new:
        return 0
    top = session.execute(
        select(func.coalesce(func.max(CampaignItem.position), 0)).where(
            CampaignItem.campaign_id == campaign_id
        )
    ).scalar_one()
    session.execute(
        insert(CampaignItem),
        [
            {
                "campaign_id": campaign_id,
                "work_id": w,
                "position": top + i + 1,
                "n_labels": 0,
                "done": False,
                "is_gold": is_gold,
            }
            for i, w in enumerate(new)
        ],
    )
    return len(new)


def campaign_progress(engine: Engine, campaign_id: int, *, now: datetime | None = None) -> dict:
    """Counts for a lead's progress view.

    Args:
        engine: the database.
        campaign_id: the campaign.
        now: the clock for "in progress" (unexpired leases); default now.

    Returns:
        {"items", "done", "remaining", "labels" (counted towards overlap), "skips",
        "in_progress", "annotators", "gold_items", "fraction_done"}.
    """
    now = now or utcnow()
    with read_session(engine) as session:
        items, done, labels, gold = session.execute(
            select(
                func.count(),
                func.count().filter(CampaignItem.done),
                func.coalesce(func.sum(CampaignItem.n_labels), 0),
                func.count().filter(CampaignItem.is_gold),
            ).where(CampaignItem.campaign_id == campaign_id)
        ).one()
        in_progress = session.execute(
            select(func.count())
            .select_from(Lease)
            .where(Lease.campaign_id == campaign_id, Lease.expires_at > now)
        ).scalar_one()
        # Current skips: skipped versions with no newer version (an index probe each, where
        # grouping every label of the campaign by work and user cost most of this function).
        newer = aliased(Label)
        skips = session.execute(
            select(func.count())
            .select_from(Label)
            .where(
                Label.campaign_id == campaign_id,
                Label.skipped,
                ~exists().where(
                    newer.campaign_id == Label.campaign_id,
                    newer.work_id == Label.work_id,
                    newer.user_id == Label.user_id,
                    newer.version > Label.version,
                ),
            )
        ).scalar_one()
        annotators = session.execute(
            select(func.count(func.distinct(Label.user_id))).where(Label.campaign_id == campaign_id)
        ).scalar_one()
    return {
        "items": items,
        "done": done,
        "remaining": items - done,
        "labels": int(labels),
        "skips": skips,
        "in_progress": in_progress,
        "annotators": annotators,
        "gold_items": gold,
        "fraction_done": (done / items) if items else 0.0,
    }
