"""Disputed works side by side for a lead, majority prefills, and gold marking."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import pandas as pd
from sqlalchemy import Engine, func, select

from db.engine import read_session, write_session
from db.models import Campaign, CampaignItem, Label, User, Work
from labeling.inputs import shown, storable
from labeling.review.history import WorkState, set_state
from labeling.review.validation import LEAD_ROLES, ValidationError, rule_campaign
from labeling.review.verdicts import open_disputes
from labeling.schema import Question
from labeling.stats.majority import NO_MAJORITY, majority
from labeling.vocabulary import ACT_GOLD, STATUS_DISPUTED, STATUS_VALIDATED

NO_ANSWER = "—"


@dataclass(frozen=True)
class DisputeView:
    """One disputed work: every annotator's current answers side by side (leads only)."""

    work_id: str
    campaign_id: int | None
    title: str
    record: dict[str, Any]
    annotators: tuple[str, ...]
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)  # annotator -> answers
    skipped: tuple[str, ...] = ()
    # A dispute across campaigns: "validated (how)" and "campaign NAME" verdicts first in
    # `answers` (the prefill weighs these two only), then each campaign's labels as
    # "NAME: annotator"; `note` says what is disputed.
    across: bool = False
    note: str | None = None
    weighed: tuple[str, ...] = ()
    # A flagged work (review.flags): each flag as "annotator: note", and the work's status
    # (a flagged work need not be disputed).
    flags: tuple[str, ...] = ()
    status: str | None = None

    @property
    def n_labels(self) -> int:
        """How many annotators' non-skipped answers the dispute rests on (a dispute across
        campaigns also shows its two verdicts beside them: not labels)."""
        return len(self.answers) - len(self.weighed)


def _key(value: Any) -> Any:
    """A comparable form of an answer (lists become frozensets)."""
    return frozenset(value) if isinstance(value, list | tuple | set | frozenset) else value


def fmt_answer(value: Any) -> str:
    """One answer as text: a label, yes/no, labels joined by ", " or "none"; dash if missing."""
    if value is None:
        return NO_ANSWER
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(str(v) for v in value) if value else "none"
    return str(value)


def disagreeing(answers: Mapping[str, Mapping[str, Any]], questions: Sequence[str]) -> list[str]:
    """Questions on which the given annotators' answers are not all equal.

    Args:
        answers: annotator -> {question: value}.
        questions: question names, in display order.
    """
    out = []
    for q in questions:
        values = {_key(a.get(q)) for a in answers.values() if a.get(q) is not None}
        if len(values) > 1:
            out.append(q)
    return out


def majority_answers(
    answers: Iterable[Mapping[str, Any]], questions: Sequence[Question]
) -> dict[str, Any]:
    """The prefill of an adjudication form: the majority answer per question
    (labeling.stats.majority: strictly more than half of those who answered, no tie-break).

    Args:
        answers: one answers dict per annotator.
        questions: the schema questions of the form.

    Returns:
        {question: value}, None where no answer has a majority; a multi-label answer is
        compared whole, as a set, and given as its labels in schema order ([] = "none").
    """
    answers = list(answers)
    out: dict[str, Any] = {}
    for q in questions:
        found = majority(a.get(q.name) for a in answers)
        if isinstance(found, frozenset):  # labels in schema order, then any others
            out[q.name] = [lab for lab in q.labels if lab in found] + sorted(found - set(q.labels))
        else:
            out[q.name] = found
    return out


def unanswered(answers: Mapping[str, Any], questions: Sequence[Question]) -> list[str]:
    """Single and binary questions left without an answer (an empty multi answer is "none").

    Args:
        answers: {question: value} from the form.
        questions: the form's questions.
    """
    return [q.name for q in questions if q.kind != "multi" and answers.get(q.name) is None]


def dispute_table(view: DisputeView, questions: Sequence[Question]) -> pd.DataFrame:
    """Questions as rows, annotators as columns, plus whether they disagree and the majority.

    Args:
        view: the disputed work.
        questions: the questions to show (schema order).
    """
    names = [q.name for q in questions]
    differ = set(disagreeing(view.answers, names))
    prefill = majority_answers(view.answers.values(), questions)
    rows = []
    for q in questions:
        row: dict[str, Any] = {"question": q.name}
        for who in view.answers:
            row[who] = fmt_answer(view.answers[who].get(q.name))
        row["disagree"] = q.name in differ
        row["majority"] = (
            fmt_answer(prefill[q.name]) if prefill[q.name] is not None else NO_MAJORITY
        )
        rows.append(row)
    return pd.DataFrame(rows, columns=["question", *view.answers, "disagree", "majority"])


def latest_labels(campaign_id: int | None, work_ids: Sequence[str]) -> Any:
    """Each annotator's latest label version on the given works (in one campaign or any)."""
    latest = select(
        Label.campaign_id, Label.work_id, Label.user_id, func.max(Label.version).label("v")
    ).where(Label.work_id.in_(work_ids))
    if campaign_id is not None:
        latest = latest.where(Label.campaign_id == campaign_id)
    sub = latest.group_by(Label.campaign_id, Label.work_id, Label.user_id).subquery()
    return (
        select(Label.campaign_id, Label.work_id, User.name, Label.answers, Label.skipped, Label.id)
        .join(
            sub,
            (Label.campaign_id == sub.c.campaign_id)
            & (Label.work_id == sub.c.work_id)
            & (Label.user_id == sub.c.user_id)
            & (Label.version == sub.c.v),
        )
        .join(User, User.id == Label.user_id)
        .order_by(Label.work_id, Label.id)
    )


def disputed_works(engine: Engine, campaign: int | None = None) -> list[DisputeView]:
    """Every disputed work with each annotator's current answers (names: for leads only),
    then the validated works with a dispute across campaigns open (cross_disputed_works).

    Args:
        engine: the database.
        campaign: a campaign id (its works with labels in it, and those labels only); None =
            every campaign, each work shown with the labels of the campaign it was last
            labelled in.
    """
    query = select(Work.id, Work.title, Work.record).where(Work.status == STATUS_DISPUTED)
    if campaign is not None:
        query = query.join(CampaignItem, CampaignItem.work_id == Work.id).where(
            CampaignItem.campaign_id == campaign
        )
    with read_session(engine) as session:
        works = session.execute(query.order_by(Work.id)).all()
        labels: list[Any] = []
        ids = [w.id for w in works]
        for i in range(0, len(ids), 500):
            labels += session.execute(latest_labels(campaign, ids[i : i + 500])).all()
    last_campaign: dict[str, int] = {}
    for row in labels:  # ordered by label id: the last one wins
        last_campaign[row.work_id] = row.campaign_id
    grouped: dict[str, list[Any]] = {}
    for row in labels:
        if row.campaign_id == last_campaign[row.work_id]:
            grouped.setdefault(row.work_id, []).append(row)
    out = []
    for w in works:
        rows = grouped.get(w.id, [])
        if campaign is not None and not rows:
            continue  # queued here too, but disputed on another campaign's labels
        out.append(
            DisputeView(
                work_id=w.id,
                campaign_id=last_campaign.get(w.id, campaign),
                title=w.title or "(no title)",
                record=dict(w.record or {}),
                annotators=tuple(r.name for r in rows),
                answers={r.name: dict(r.answers) for r in rows if not r.skipped},
                skipped=tuple(r.name for r in rows if r.skipped),
            )
        )
    return out + cross_disputed_works(engine, campaign)


class _OpenDispute(NamedTuple):
    work_id: str
    campaign_id: int
    answers: dict[str, Any]
    differing: list[str]


def cross_disputed_works(engine: Engine, campaign: int | None = None) -> list[DisputeView]:
    """Validated works whose validated answers another campaign's verdict disputes.

    Each is shown with the validated answers and the other campaign's verdict side by side,
    then the current labels behind each (the validating campaign's and the other's).

    Args:
        engine: the database.
        campaign: only disputes raised by this campaign's verdicts (None: all).
    """
    with read_session(engine) as session:
        rows = [
            _OpenDispute(r.work_id, r.campaign_id, dict(r.answers), list(r.differing or []))
            for r in open_disputes(session)
            if campaign is None or r.campaign_id == campaign
        ]
        if not rows:
            return []
        ids = sorted({r.work_id for r in rows})
        works = {
            w.id: w
            for w in session.execute(
                select(
                    Work.id, Work.title, Work.record, Work.final_answers, Work.validated_via
                ).where(Work.id.in_(ids), Work.status == STATUS_VALIDATED)
            )
        }
        names = dict(session.execute(select(Campaign.id, Campaign.name)).all())
        labels = session.execute(latest_labels(None, ids)).all()
    out = []
    for row in rows:
        w = works.get(row.work_id)
        if w is None:
            continue
        via = w.validated_via or "?"
        owner_id = rule_campaign(w.validated_via)
        mine = f"campaign {names.get(row.campaign_id, row.campaign_id)}"
        answers: dict[str, dict[str, Any]] = {
            f"validated ({via})": dict(w.final_answers or {}),
            mine: dict(row.answers),
        }
        skipped = []
        for lab in labels:
            if lab.work_id != w.id or lab.campaign_id not in (row.campaign_id, owner_id):
                continue
            who = f"{names.get(lab.campaign_id, lab.campaign_id)}: {lab.name}"
            if lab.skipped:
                skipped.append(who)
            else:
                answers[who] = dict(lab.answers)
        differ = ", ".join(row.differing or [])
        out.append(
            DisputeView(
                work_id=w.id,
                campaign_id=row.campaign_id,
                title=w.title or "(no title)",
                record=dict(w.record or {}),
                annotators=tuple(answers),
                answers=answers,
                skipped=tuple(skipped),
                across=True,
                note=f"validated ({via}), but the verdict of {mine} differs on {differ}: "
                "adjudicating settles it (the other questions keep their validated answers)",
                weighed=(f"validated ({via})", mine),
            )
        )
    return out


def validated_works(engine: Engine, campaign: int | None = None, limit: int = 200) -> pd.DataFrame:
    """The most recently changed validated works, with how they were validated and gold flag.

    Args:
        engine: the database.
        campaign: only works queued in this campaign (None = all).
        limit: at most this many rows.
    """
    query = select(Work.id, Work.title, Work.validated_via, Work.is_gold, Work.updated_at).where(
        Work.status == STATUS_VALIDATED
    )
    if campaign is not None:
        query = query.join(CampaignItem, CampaignItem.work_id == Work.id).where(
            CampaignItem.campaign_id == campaign
        )
    with read_session(engine) as session:
        rows = session.execute(query.order_by(Work.updated_at.desc(), Work.id).limit(limit)).all()
    return pd.DataFrame(
        rows, columns=["work_id", "title", "validated_via", "is_gold", "updated_at"]
    )


def work_status(engine: Engine, work_id: str) -> str | None:
    """A work's status, or None when there is no such work.

    Args:
        engine: the database.
        work_id: the work.
    """
    if not storable(work_id):  # e.g. a NUL: no work has such an id (PostgreSQL refuses it)
        return None
    with read_session(engine) as session:
        return session.execute(select(Work.status).where(Work.id == work_id)).scalar()


def parse_work_ids(text: str) -> list[str]:
    """Work ids typed by a lead (commas, spaces or new lines between them), deduplicated."""
    parts = text.replace(",", " ").replace(";", " ").split()
    return list(dict.fromkeys(p.strip().upper() for p in parts if p.strip()))


def _set_gold(engine: Engine, work_ids: Sequence[str], lead_user_id: int, gold: bool) -> int:
    """Mark or unmark works as gold in one transaction; how many changed."""
    ids = list(dict.fromkeys(work_ids))
    if not ids:
        return 0
    with write_session(engine) as session:
        lead = session.get(User, lead_user_id)
        if lead is None or lead.role not in LEAD_ROLES:
            raise ValidationError("only leads can mark or unmark gold works")
        rows = session.execute(
            select(Work.id, Work.status, Work.final_answers, Work.validated_via, Work.is_gold)
            .where(Work.id.in_([w for w in ids if storable(w)]))
            .with_for_update()
        ).all()
        found = {row.id: WorkState.of(row) for row in rows}
        unknown = [w for w in ids if w not in found]
        if unknown:
            raise ValidationError(f"unknown work {', '.join(shown(w) for w in unknown)}")
        if gold:
            open_ = [w for w in ids if found[w].status != STATUS_VALIDATED]
            if open_:
                raise ValidationError(
                    f"only validated works can become gold; not validated: {', '.join(open_)}"
                )
        changed = 0
        for wid in ids:
            before = found[wid]
            reason = f"{'marked' if gold else 'unmarked'} as gold by {lead.name}"
            after = replace(before, is_gold=gold)
            changed += set_state(
                session.connection(),
                wid,
                before,
                after,
                act=ACT_GOLD,
                reason=reason,
                campaign_id=None,
                user_id=lead.id,
            )
        return changed


def mark_gold(engine: Engine, work_ids: Sequence[str], lead_user_id: int) -> int:
    """Make validated works gold checks (all or none, one transaction); returns how many changed.

    Args:
        engine: the database.
        work_ids: the works; every one must exist and be validated.
        lead_user_id: the lead (or admin) doing it.
    """
    return _set_gold(engine, work_ids, lead_user_id, True)


def unmark_gold(engine: Engine, work_ids: Sequence[str], lead_user_id: int) -> int:
    """Stop using works as gold checks (one transaction); returns how many changed.

    Args:
        engine: the database.
        work_ids: the works; every one must exist.
        lead_user_id: the lead (or admin) doing it.
    """
    return _set_gold(engine, work_ids, lead_user_id, False)
