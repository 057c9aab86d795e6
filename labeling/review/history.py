"""A work's history: one status event per act that changed (or confirmed) its human side.

Every change of a work's status, validated answers (`final_answers`), `validated_via` or gold
mark goes through `set_state`, which writes the new state and a StatusEvent recording the act,
who, why, and the answers, `validated_via` and gold mark before and after, even when the status
itself stays `human_validated`. `work_history` reads it back (`labeling history`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, insert, select
from sqlalchemy.orm import aliased

from db.engine import read_session
from db.models import Campaign, CampaignVerdict, StatusEvent, User, Work, utcnow
from labeling.errors import NotFound
from labeling.inputs import shown, storable
from labeling.review.status_sql import _SET_STATUS


@dataclass(frozen=True)
class WorkState:
    """The human side of a work: status, validated answers, how validated, gold mark."""

    status: str
    final_answers: dict[str, Any] | None
    validated_via: str | None
    is_gold: bool

    @classmethod
    def of(cls, row: Any) -> WorkState:
        """From a row with status, final_answers, validated_via and is_gold."""
        answers = dict(row.final_answers) if row.final_answers is not None else None
        return cls(row.status, answers, row.validated_via, bool(row.is_gold))


def write_event(
    conn: Connection,
    work_id: str,
    before: WorkState,
    after: WorkState,
    *,
    act: str,
    reason: str,
    campaign_id: int | None,
    user_id: int | None,
    now: datetime,
) -> None:
    """Append one status event recording an act and the state before and after it."""
    conn.execute(
        insert(StatusEvent),
        {
            "work_id": work_id,
            "campaign_id": campaign_id,
            "user_id": user_id,
            "from_status": before.status,
            "to_status": after.status,
            "reason": reason,
            "created_at": now,
            "act": act,
            "answers_before": before.final_answers,
            "answers_after": after.final_answers,
            "via_before": before.validated_via,
            "via_after": after.validated_via,
            "gold_before": before.is_gold,
            "gold_after": after.is_gold,
        },
    )


def set_state(
    conn: Connection,
    work_id: str,
    before: WorkState,
    after: WorkState,
    *,
    act: str,
    reason: str,
    campaign_id: int | None,
    user_id: int | None,
    always_event: bool = False,
) -> bool:
    """Write a work's new human side with its event; False (nothing written) when unchanged.

    Args:
        conn: the connection of the caller's write transaction (the work row locked).
        work_id: the work.
        before: its state as read under the lock.
        after: the state to write.
        act: labeling.vocabulary ACT_* (what did it).
        reason: why, in words (kept on the event).
        campaign_id: the campaign concerned, if any.
        user_id: who did it (None: a file import or the model step).
        always_event: write the event even when nothing changes (an adjudication, a reopen).
    """
    if before == after and not always_event:
        return False
    now = utcnow()
    conn.execute(
        _SET_STATUS,
        {
            "wid": work_id,
            "st": after.status,
            "fa": after.final_answers,
            "via": after.validated_via,
            "gold": after.is_gold,
            "ts": now,
        },
    )
    write_event(
        conn,
        work_id,
        before,
        after,
        act=act,
        reason=reason,
        campaign_id=campaign_id,
        user_id=user_id,
        now=now,
    )
    return True


def work_history(engine: Engine, work_id: str) -> dict[str, Any]:
    """A work's human side now, every status event (oldest first) and other campaigns' verdicts.

    Args:
        engine: the database.
        work_id: the work.

    Returns:
        {work_id, status, validated_via, is_gold, final_answers, events: [{at, act, user,
        campaign, from_status, to_status, answers_before, answers_after, via_before,
        via_after, gold_before, gold_after, reason}], verdicts: [{campaign, outcome, answers,
        differing, against, against_via, at, settled_at, settled_by}]}.

    Raises:
        NotFound: no work has this id.
    """
    events = (
        select(StatusEvent, User.name.label("user"), Campaign.name.label("campaign"))
        .outerjoin(User, User.id == StatusEvent.user_id)
        .outerjoin(Campaign, Campaign.id == StatusEvent.campaign_id)
        .where(StatusEvent.work_id == work_id)
        .order_by(StatusEvent.id)
    )
    settler = aliased(User)
    verdicts = (
        select(CampaignVerdict, Campaign.name.label("campaign"), settler.name.label("settler"))
        .join(Campaign, Campaign.id == CampaignVerdict.campaign_id)
        .outerjoin(settler, settler.id == CampaignVerdict.settled_by)
        .where(CampaignVerdict.work_id == work_id)
        .order_by(CampaignVerdict.id)
    )
    with read_session(engine) as session:
        work = session.get(Work, work_id) if storable(work_id) else None
        if work is None:
            raise NotFound(f"unknown work {shown(work_id)}")
        out: dict[str, Any] = {
            "work_id": work.id,
            "status": work.status,
            "validated_via": work.validated_via,
            "is_gold": work.is_gold,
            "final_answers": work.final_answers,
            "events": [_event_dict(e, u, c) for e, u, c in session.execute(events)],
            "verdicts": [_verdict_dict(v, c, s) for v, c, s in session.execute(verdicts)],
        }
    return out


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


def _event_dict(event: StatusEvent, user: str | None, campaign: str | None) -> dict[str, Any]:
    """One event as plain data (times in ISO 8601)."""
    return {
        "at": _iso(event.created_at),
        "act": event.act,
        "user": user,
        "campaign": campaign,
        "from_status": event.from_status,
        "to_status": event.to_status,
        "answers_before": event.answers_before,
        "answers_after": event.answers_after,
        "via_before": event.via_before,
        "via_after": event.via_after,
        "gold_before": event.gold_before,
        "gold_after": event.gold_after,
        "reason": event.reason,
    }


def _verdict_dict(v: CampaignVerdict, campaign: str, settler: str | None) -> dict[str, Any]:
    """Another campaign's verdict as plain data."""
    return {
        "campaign": campaign,
        "outcome": v.outcome,
        "answers": v.answers,
        "differing": v.differing or [],
        "against": v.against,
        "against_via": v.against_via,
        "at": _iso(v.created_at),
        "settled_at": _iso(v.settled_at),
        "settled_by": settler,
    }
