"""Other campaigns' verdicts on a validated work: they corroborate it or open a dispute.

A label in another campaign never replaces a validated answer (README, "Ground truth"). What
counts there is that campaign's verdict under its own rule; when it concludes, it is compared
with the validated answers on the questions it asked: the same answers corroborate them, a
different answer opens a dispute across campaigns. Either is kept in `campaign_verdicts` (one
row per work and campaign, the campaign's latest verdict) and as a status event; the work
stays `human_validated` with its answers until a lead adjudicates or reopens it, which
settles its open disputes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from db.engine import affected_rows
from db.models import Campaign, CampaignVerdict, utcnow
from labeling.review.history import WorkState, write_event
from labeling.vocabulary import (
    ACT_CORROBORATION,
    ACT_CROSS_DISPUTE,
    STATUS_VALIDATED,
    VERDICT_CORROBORATED,
    VERDICT_DISPUTED,
)


def answer_key(value: Any) -> Any:
    """A comparable form of an answer (multi-label lists become sets)."""
    return frozenset(value) if isinstance(value, list | tuple | set | frozenset) else value


def differing(
    answers: Mapping[str, Any], validated: Mapping[str, Any] | None, questions: Sequence[str]
) -> list[str]:
    """The questions on which a verdict's answers are not the validated ones.

    A question the validated answers lack differs too: adding an answer to validated ground
    truth is a lead's decision, not a side effect of another campaign's labels.

    Args:
        answers: the other campaign's concluded answers.
        validated: the work's validated answers.
        questions: the questions that campaign asks.
    """
    validated = validated or {}
    return [
        q
        for q in questions
        if q in answers and answer_key(answers[q]) != answer_key(validated.get(q))
    ]


def record_verdict(
    session: Session,
    work_id: str,
    campaign: Any,
    answers: Mapping[str, Any],
    questions: Sequence[str],
    state: WorkState,
    user_id: int | None,
) -> str | None:
    """Keep another campaign's concluded verdict on a validated work; the outcome if new.

    Args:
        session: the caller's write transaction (the work row locked).
        work_id: the validated work.
        campaign: the campaign whose verdict it is (id, name, rule, overlap).
        answers: its concluded answers.
        questions: the names of the questions it asks.
        state: the work's state (validated) as read under the lock.
        user_id: whose label led to the verdict (None: a file import).

    Returns:
        "corroborated" or "disputed" when this verdict is recorded now; None when the same
        verdict against the same validated answers was recorded before (nothing written).
    """
    diff = differing(answers, state.final_answers, questions)
    outcome = VERDICT_DISPUTED if diff else VERDICT_CORROBORATED
    kept = {q: answers[q] for q in questions if q in answers}
    against = {q: state.final_answers.get(q) for q in questions} if state.final_answers else None
    prior = session.execute(
        select(CampaignVerdict).where(
            CampaignVerdict.work_id == work_id, CampaignVerdict.campaign_id == campaign.id
        )
    ).scalar_one_or_none()
    if prior is not None and (prior.outcome, prior.answers, prior.against) == (
        outcome,
        kept,
        against,
    ):
        return None
    now = utcnow()
    if prior is None:
        prior = CampaignVerdict(work_id=work_id, campaign_id=campaign.id)
        session.add(prior)
    prior.outcome, prior.answers, prior.differing = outcome, kept, diff or None
    prior.against, prior.against_via, prior.created_at = against, state.validated_via, now
    prior.settled_at = prior.settled_by = None
    session.flush()
    label = f"campaign '{campaign.name}' ({campaign.rule}, k={campaign.overlap})"
    if diff:
        shown = "; ".join(
            f"{q}: {_fmt(kept.get(q))} where the validated answer is "
            f"{_fmt((state.final_answers or {}).get(q))}"
            for q in diff
        )
        reason = (
            f"{label} differs from the validated answers ({state.validated_via}) on {shown}; "
            "the answers stay until a lead adjudicates or reopens the work"
        )
        act = ACT_CROSS_DISPUTE
    else:
        reason = f"{label} corroborates the validated answers ({state.validated_via})"
        act = ACT_CORROBORATION
    write_event(
        session.connection(),
        work_id,
        state,
        state,
        act=act,
        reason=reason,
        campaign_id=campaign.id,
        user_id=user_id,
        now=now,
    )
    return outcome


def _fmt(value: Any) -> str:
    """An answer in a sentence."""
    if value is None:
        return "none given"
    if isinstance(value, list):
        return ", ".join(map(str, value)) if value else "no label"
    return str(value)


def open_disputes(session: Session, work_ids: Sequence[str] | None = None) -> list[CampaignVerdict]:
    """The open disputes across campaigns (all, or of these works), oldest first."""
    query = select(CampaignVerdict).where(
        CampaignVerdict.outcome == VERDICT_DISPUTED, CampaignVerdict.settled_at.is_(None)
    )
    if work_ids is not None:
        query = query.where(CampaignVerdict.work_id.in_(list(work_ids)))
    return list(session.execute(query.order_by(CampaignVerdict.id)).scalars())


def settle(session: Session, work_id: str, user_id: int | None, now: datetime) -> int:
    """Mark a work's open disputes across campaigns settled (by a lead, or by the validating
    campaign's own new verdict); how many were open."""
    result = session.execute(
        update(CampaignVerdict)
        .where(
            CampaignVerdict.work_id == work_id,
            CampaignVerdict.outcome == VERDICT_DISPUTED,
            CampaignVerdict.settled_at.is_(None),
        )
        .values(settled_at=now, settled_by=user_id)
    )
    return affected_rows(result)


def recompare(session: Session, work_id: str, state: WorkState, user_id: int | None) -> None:
    """Hold other campaigns' verdicts against a work's new validated answers.

    Called when the campaign that validated the work changes its answers (review.validation):
    each kept verdict is compared again (it may now corroborate, or dispute anew); when the
    work is no longer validated, its open disputes are moot and are settled.
    """
    rows = session.execute(
        select(CampaignVerdict, Campaign)
        .join(Campaign, Campaign.id == CampaignVerdict.campaign_id)
        .where(CampaignVerdict.work_id == work_id)
        .order_by(CampaignVerdict.id)
    ).all()
    if state.status != STATUS_VALIDATED:
        if any(v.outcome == VERDICT_DISPUTED and v.settled_at is None for v, _ in rows):
            settle(session, work_id, user_id, utcnow())
        return
    for verdict, campaign in rows:
        answers = dict(verdict.answers)
        record_verdict(session, work_id, campaign, answers, list(answers), state, user_id)
