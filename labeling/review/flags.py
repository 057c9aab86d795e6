"""Flagged works: the current labels annotators flagged for a lead, with their notes.

A flag counts while it is on an annotator's current label of a work in a campaign (the
latest version; a skip can carry one too): an edit without the flag withdraws it. Flags
never change a work's status or answers; a lead opens the flagged works on Adjudicate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pandas as pd
from sqlalchemy import Engine, exists, select
from sqlalchemy.orm import aliased

from db.engine import read_session
from db.models import Campaign, Label, User, Work
from labeling.review.disputes import DisputeView, latest_labels
from labeling.review.verdicts import open_disputes
from labeling.vocabulary import STATUS_VALIDATED

NO_NOTE = "(no note)"
TABLE_COLUMNS = ["work_id", "title", "annotator", "note", "flagged_at", "status", "campaign"]


@dataclass(frozen=True)
class Flag:
    """One flag: an annotator's current label of a work, flagged, with its note."""

    work_id: str
    title: str
    status: str
    campaign_id: int
    campaign: str
    annotator: str
    note: str | None
    flagged_at: datetime
    skipped: bool

    @property
    def text(self) -> str:
        """The flag as "annotator: note" (the export's flag_notes, the Adjudicate card)."""
        return f"{self.annotator}: {flag_note(self.note)}"


def flag_note(note: str | None) -> str:
    """A flag's note as shown: stripped, or "(no note)" when there is none."""
    return (note or "").strip() or NO_NOTE


def current_flags(engine: Engine, campaign_id: int | None = None) -> list[Flag]:
    """Every flag on a current label, by work id, then time and annotator.

    Args:
        engine: the database.
        campaign_id: only labels of this campaign (None: every campaign).
    """
    later = aliased(Label)
    newer = exists().where(
        later.campaign_id == Label.campaign_id,
        later.work_id == Label.work_id,
        later.user_id == Label.user_id,
        later.version > Label.version,
    )
    query = (
        select(
            Label.work_id,
            Work.title,
            Work.status,
            Label.campaign_id,
            Campaign.name,
            User.name.label("annotator"),
            Label.note,
            Label.created_at,
            Label.skipped,
        )  # fmt: skip
        .join(Work, Work.id == Label.work_id)
        .join(User, User.id == Label.user_id)
        .join(Campaign, Campaign.id == Label.campaign_id)
        .where(Label.flagged.is_(True), ~newer)
        .order_by(Label.work_id, Label.created_at, User.name, Label.campaign_id)
    )
    if campaign_id is not None:
        query = query.where(Label.campaign_id == campaign_id)
    with read_session(engine) as session:
        rows = session.execute(query).all()
    return [
        Flag(
            r.work_id,
            r.title or "(no title)",
            r.status,
            r.campaign_id,
            r.name,
            r.annotator,
            r.note,
            r.created_at,
            bool(r.skipped),
        )  # fmt: skip
        for r in rows
    ]


def flagged_table(engine: Engine, campaign_id: int) -> pd.DataFrame:
    """A campaign's flagged works for the Monitor: work_id, title, annotator, note,
    flagged_at (UTC), status and campaign, one row per flag, newest first.

    Args:
        engine: the database.
        campaign_id: the campaign.
    """
    flags = current_flags(engine, campaign_id)
    rows = [
        (f.work_id, f.title, f.annotator, flag_note(f.note), f.flagged_at, f.status, f.campaign)
        for f in flags
    ]
    out = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    out["flagged_at"] = pd.to_datetime(out["flagged_at"], utc=True)
    return out.sort_values(["flagged_at", "work_id"], ascending=[False, True], ignore_index=True)


def flagged_works(engine: Engine, campaign: int | None = None) -> list[DisputeView]:
    """Works with a flag on a current label, each as Adjudicate shows it (by work id).

    A work's answers side by side are the current labels of the campaign of its latest flag
    (or of `campaign`), after its validated answers when it is validated (which the form
    then starts from); `flags` lists every flag as "annotator: note".

    Args:
        engine: the database.
        campaign: only flags on labels of this campaign (None: every campaign).
    """
    flags = current_flags(engine, campaign)
    per_work: dict[str, list[Flag]] = {}
    for f in flags:
        per_work.setdefault(f.work_id, []).append(f)
    ids = sorted(per_work)
    labels: list[Any] = []
    works: dict[str, Any] = {}
    with read_session(engine) as session:
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            labels += session.execute(latest_labels(campaign, part)).all()
            works.update(
                (w.id, w)
                for w in session.execute(
                    select(Work.id, Work.record, Work.final_answers, Work.validated_via).where(
                        Work.id.in_(part)
                    )
                )
            )
        disputed = {r.work_id for r in open_disputes(session, ids)} if ids else set()
    out = []
    for wid in ids:
        mine = per_work[wid]
        latest = max(mine, key=lambda f: f.flagged_at)
        cid = campaign if campaign is not None else latest.campaign_id
        rows = [r for r in labels if r.work_id == wid and r.campaign_id == cid]
        out.append(_view(works[wid], latest, cid, mine, rows, wid in disputed))
    return out


def _view(
    work: Any, latest: Flag, cid: int, flags: Sequence[Flag], rows: Sequence[Any], open_: bool
) -> DisputeView:
    """The Adjudicate view of one flagged work."""
    answers: dict[str, dict[str, Any]] = {}
    weighed: tuple[str, ...] = ()
    note = None
    if latest.status == STATUS_VALIDATED:
        via = work.validated_via or "?"
        weighed = (f"validated ({via})",)
        answers[weighed[0]] = dict(work.final_answers or {})
        if not open_:  # adjudicate refuses a settled work: its answers change only by reopen
            note = (f"validated ({via}); the flag does not change its answers: reopen it "
                    "below to review them again, or move on")  # fmt: skip
    answers.update((r.name, dict(r.answers)) for r in rows if not r.skipped)
    return DisputeView(
        work_id=latest.work_id,
        campaign_id=cid,
        title=latest.title,
        record=dict(work.record or {}),
        annotators=tuple(answers),
        answers=answers,
        skipped=tuple(r.name for r in rows if r.skipped),
        note=note,
        weighed=weighed,
        flags=tuple(f.text for f in flags),
        status=latest.status,
    )
