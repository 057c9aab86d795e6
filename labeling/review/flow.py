"""One annotator's labelling flow: the item on screen, its draft answers, saving, going back."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, select

from db.engine import read_session
from db.models import Campaign, Work, utcnow
from labeling.abstracts.cache import AbstractState, Prefetcher, get_abstracts
from labeling.errors import StorageError, storage_errors
from labeling.inputs import storable
from labeling.review.assist import effective_rate, scores_shown
from labeling.review.card import WorkCard, build_card
from labeling.review.keys import ACTION_KEYS, option_key, question_keys  # noqa: F401
from labeling.review.labels import (
    LabelError,
    LabelResult,
    LabelSubmission,
    LabelView,
    LeaseError,
    edit_label,
    submit_label,
)
from labeling.review.labels import user_labels as _user_labels
from labeling.review.progress import Progress, forget_progress, my_progress  # noqa: F401
from labeling.review.queue import QueueError, claim_next, release_lease, renew_lease, upcoming
from labeling.review.validation import SKIP_REASONS, campaign_questions
from labeling.schema import Question, Schema
from labeling.settings import Settings

CONFIDENCE = ((1, "low"), (2, "medium"), (3, "high"))
SKIP_LABELS = {
    "no_abstract": "no abstract",
    "not_research": "not a research work",
    "out_of_scope": "out of scope",
    "other": "other",
}
LOOKAHEAD = 5
INTERACTIVE_TIMEOUT = 4.0  # a live abstract fetch while the annotator waits
IN_FLIGHT_WAIT = 3.0  # how long to wait for a prefetch already fetching the shown work
# A second submit key this soon after the first, with no other key between, is a double press:
# the label form ignores it (it would otherwise skip or submit the next work unseen).
MIN_DWELL = 0.3

# The keyboard scheme: letters the page's actions use; a question's own key (schema `key`)
# may not take one of these, nor C or R (Streamlit reserves them).


@dataclass
class Draft:
    """The answers being prepared for the item on screen (kept in the browser session)."""

    answers: dict[str, Any]
    confidence: int | None = None
    flagged: bool = False
    note: str = ""
    active: int = 0

    @classmethod
    def fresh(cls, questions: Sequence[Question]) -> Draft:
        """An empty draft: multi-label questions start with no label chosen."""
        return cls({q.name: [] if q.kind == "multi" else None for q in questions})

    @classmethod
    def from_label(cls, label: LabelView, questions: Sequence[Question]) -> Draft:
        """A draft holding a stored label, to edit it."""
        draft = cls.fresh(questions)
        draft.answers.update({k: v for k, v in label.answers.items() if k in draft.answers})
        draft.confidence, draft.flagged = label.confidence, label.flagged
        draft.note = label.note or ""
        return draft

    def choose(self, questions: Sequence[Question], index: int, label: str) -> None:
        """Pick a label: toggles for multi-label; sets and moves on for single and binary."""
        q = questions[index]
        self.active = index
        if q.kind == "multi":
            chosen = set(self.answers.get(q.name) or [])
            chosen ^= {label}
            self.answers[q.name] = [lab for lab in q.labels if lab in chosen]
            return
        self.answers[q.name] = label
        self.move(questions, 1)

    def move(self, questions: Sequence[Question], step: int) -> None:
        """Make the next (step=1) or previous (step=-1) question active, staying in range."""
        self.active = max(0, min(len(questions) - 1, self.active + step))

    def missing(self, questions: Sequence[Question]) -> list[str]:
        """Names of the questions not answered yet."""
        return [q.name for q in questions if self.answers.get(q.name) is None]


@dataclass(frozen=True)
class CampaignChoice:
    """An open campaign an annotator can work on."""

    id: int
    name: str
    blind: bool
    description: str | None


@dataclass(frozen=True)
class ItemView:
    """What the label page shows: a campaign, one work (or none left), and how to save it."""

    campaign_id: int
    campaign_name: str
    blind: bool
    user_id: int
    questions: tuple[Question, ...]
    progress: Progress
    lease_seconds: int = 900
    work_id: str | None = None
    card: WorkCard | None = None
    abstract: AbstractState | None = None
    editing: LabelView | None = None
    back: int = 0
    lease_expires: datetime | None = None
    notice: str = ""
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    shown_at: float = field(default_factory=time.monotonic)

    @property
    def scores_visible(self) -> bool:
        """Scores show unless this assignment is blind (a label being edited was submitted)."""
        return not self.blind or self.editing is not None

    @property
    def submission_id(self) -> str:
        """Idempotency key: one first label per work and user however often it is sent."""
        if self.editing is not None:
            return f"edit:{self.token}"
        return f"first:{self.campaign_id}:{self.user_id}:{self.work_id}"[:64]


@dataclass(frozen=True)
class SaveOutcome:
    """What a save did: saved or not, a sentence for the annotator, and whether to move on."""

    saved: bool
    message: str
    advance: bool
    result: LabelResult | None = None


def open_campaigns(engine: Engine) -> list[CampaignChoice]:
    """Active campaigns, oldest first (no queue counts: this runs on every page load)."""
    with read_session(engine) as session:
        rows = session.execute(
            select(Campaign.id, Campaign.name, Campaign.blind, Campaign.description)
            .where(Campaign.active)
            .order_by(Campaign.id)
        ).all()
    return [CampaignChoice(r.id, r.name, bool(r.blind), r.description) for r in rows]


def _campaign(engine: Engine, campaign_id: int) -> Campaign:
    with read_session(engine) as session:
        row = session.get(Campaign, campaign_id)
        if row is None:
            raise LabelError(f"no campaign numbered {campaign_id}")
        session.expunge(row)
        return row


def _abstract(
    engine: Engine, work_id: str, prefetcher: Prefetcher | None, settings: Settings
) -> AbstractState:
    """The shown work's abstract: cached, else fetched now with a short timeout."""
    quick = settings.model_copy(
        update={
            "openalex_timeout": min(settings.openalex_timeout, INTERACTIVE_TIMEOUT),
            "openalex_retries": 0,
        }
    )
    if prefetcher is not None and prefetcher.in_flight(work_id):
        # Wait no longer than a fetch of our own could take; a prefetch still running then is
        # stuck on a slow API: show "pending" (with its retry button) rather than wait twice.
        deadline = time.monotonic() + min(IN_FLIGHT_WAIT, quick.openalex_timeout)
        while prefetcher.in_flight(work_id) and time.monotonic() < deadline:
            time.sleep(0.02)
        if prefetcher.in_flight(work_id):
            return get_abstracts(engine, [work_id], settings=quick, fetch=False)[work_id]
    return get_abstracts(engine, [work_id], settings=quick)[work_id]


def _load_work(engine: Engine, work_id: str) -> dict[str, Any]:
    with read_session(engine) as session:
        record = session.execute(select(Work.record).where(Work.id == work_id)).scalar_one()
    return record if isinstance(record, dict) else {"id": work_id}


def _view(
    engine: Engine,
    camp: Campaign,
    user_id: int,
    schema: Schema,
    work_id: str | None,
    prefetcher: Prefetcher | None,
    settings: Settings,
    **extra: Any,
) -> ItemView:
    questions = tuple(campaign_questions(camp, schema))
    card = abstract = None
    if work_id is not None:
        card = build_card(_load_work(engine, work_id), schema, questions)
        abstract = _abstract(engine, work_id, prefetcher, settings)
    # Per assignment: a campaign with an assist rate hides the scores from some of them.
    rate = effective_rate(bool(camp.blind), camp.assist_rate)
    shown = scores_shown(rate, camp.assist_seed or 0, camp.id, work_id, user_id)
    return ItemView(
        campaign_id=camp.id,
        campaign_name=camp.name,
        blind=not shown if work_id is not None else bool(camp.blind),
        user_id=user_id,
        questions=questions,
        progress=my_progress(engine, camp.id, user_id),
        lease_seconds=camp.lease_seconds,
        work_id=work_id,
        card=card,
        abstract=abstract,
        **extra,
    )


def next_item(
    engine: Engine,
    campaign_id: int,
    user_id: int,
    schema: Schema,
    *,
    settings: Settings,
    prefetcher: Prefetcher | None = None,
    lookahead: int = LOOKAHEAD,
) -> ItemView:
    """Claim the user's next work (or the one they hold), load its card and abstract, prefetch.

    Args:
        engine: the database.
        campaign_id: the campaign chosen.
        user_id: the annotator.
        schema: the label schema.
        settings: the OpenAlex settings, for the shown work's abstract.
        prefetcher: warms the abstracts of the next works in the background.
        lookahead: how many upcoming works to prefetch.
    """
    camp = _campaign(engine, campaign_id)
    try:
        with storage_errors("No work could be claimed"):
            claim = claim_next(engine, campaign_id, user_id)
    except QueueError as exc:  # persistent contention: say so, the page offers to retry
        return _view(
            engine,
            camp,
            user_id,
            schema,
            None,
            None,
            settings,
            notice=f"The queue is busy, no work could be claimed ({exc}). Try again.",
        )
    except StorageError as exc:  # full disk, read-only database: said, the page offers to retry
        return _view(
            engine,
            camp,
            user_id,
            schema,
            None,
            None,
            settings,
            notice=f"{exc}. Tell an admin; try again once it is fixed.",
        )
    if claim is not None and prefetcher is not None and lookahead > 0:
        prefetcher.submit_later(lambda: upcoming(engine, campaign_id, user_id, lookahead))
    return _view(
        engine,
        camp,
        user_id,
        schema,
        claim.work_id if claim else None,
        prefetcher,
        settings,
        lease_expires=claim.expires_at if claim else None,
    )


def previous_item(
    engine: Engine,
    campaign_id: int,
    user_id: int,
    schema: Schema,
    back: int = 1,
    *,
    settings: Settings,
) -> tuple[ItemView, Draft] | None:
    """The user's back-th most recent label in the campaign, opened for editing, or None.

    Args:
        engine: the database.
        campaign_id: the campaign.
        user_id: the annotator (only their own labels are ever read).
        schema: the label schema.
        back: 1 for the latest label, 2 for the one before, ...
        settings: the OpenAlex settings, for the work's abstract.
    """
    mine = _user_labels(engine, campaign_id, user_id)
    if back < 1 or back > len(mine):
        return None
    label = mine[back - 1]
    camp = _campaign(engine, campaign_id)
    item = _view(
        engine, camp, user_id, schema, label.work_id, None, settings, editing=label, back=back
    )
    return item, Draft.from_label(label, item.questions)


def release(engine: Engine, item: ItemView | None) -> None:
    """Give the shown work back to the queue (the annotator switched campaign)."""
    if item is not None and item.work_id is not None and item.editing is None:
        release_lease(engine, item.campaign_id, item.user_id, item.work_id)


def abstract_of(engine: Engine, work_id: str, *, settings: Settings) -> AbstractState:
    """A work's abstract for a page that shows one work: cached, else fetched now, briefly."""
    return _abstract(engine, work_id, None, settings)


def refresh_abstract(engine: Engine, item: ItemView, *, settings: Settings) -> ItemView:
    """The same item with its abstract looked up again (after an error or offline state)."""
    if item.work_id is None:
        return item
    return replace(item, abstract=_abstract(engine, item.work_id, None, settings))


def keep_lease(engine: Engine, item: ItemView, user_id: int) -> ItemView:
    """Renew the lease once half of it has passed (cheap no-op otherwise)."""
    if item.lease_expires is None or item.editing is not None:
        return item
    now = utcnow()
    if item.lease_expires - now > timedelta(seconds=item.lease_seconds / 2):
        return item
    try:
        with storage_errors("Lease not renewed"):
            expires = renew_lease(engine, item.campaign_id, user_id, item.work_id or "", now=now)
    except StorageError:  # half the lease is left; the submit will say what is wrong
        return item
    return replace(item, lease_expires=expires)


def save(
    engine: Engine,
    item: ItemView,
    draft: Draft,
    *,
    user_id: int,
    schema: Schema,
    skip_reason: str | None = None,
    time_on_item_ms: int | None = None,
) -> SaveOutcome:
    """Write the draft as a label (or a skip, or a new version when editing) in one call.

    Args:
        engine: the database.
        item: the item on screen (its submission id makes a repeat a no-op).
        draft: the answers, confidence, flag and note.
        user_id: the annotator.
        schema: the label schema.
        skip_reason: one of SKIP_REASONS to skip the work instead of labelling it.
        time_on_item_ms: the time the browser measured from showing the work to the submit
            (default: the server's time since the item was built).
    """
    if item.work_id is None:
        return SaveOutcome(False, "There is no work to save.", False)
    skipped = skip_reason is not None
    if skipped and skip_reason not in SKIP_REASONS:
        return SaveOutcome(False, f"Unknown skip reason {skip_reason!r}.", False)
    if not skipped:
        missing = draft.missing(item.questions)
        if missing:
            return SaveOutcome(False, "Answer every question first: " + ", ".join(missing), False)
    if not storable(draft.note):  # PostgreSQL cannot store a NUL: say so, keep the draft
        return SaveOutcome(False, "Not saved: the note contains a NUL character; remove it.", False)
    answers = {k: v for k, v in draft.answers.items() if v is not None}
    writer = edit_label if item.editing is not None else submit_label
    if time_on_item_ms is None:
        time_on_item_ms = int((time.monotonic() - item.shown_at) * 1000)
    submission = LabelSubmission(
        campaign_id=item.campaign_id,
        work_id=item.work_id,
        user_id=user_id,
        answers=answers,
        skipped=skipped,
        skip_reason=skip_reason,
        flagged=draft.flagged,
        note=draft.note.strip() or None,
        confidence=draft.confidence,
        schema_hash=schema.hash,
        scores_visible=item.scores_visible,
        model_version=item.card.model_version if item.card else None,
        time_on_item_ms=time_on_item_ms,
        submission_id=item.submission_id,
    )
    try:
        result = writer(engine, submission, schema=schema)
    except LeaseError as exc:
        return SaveOutcome(False, str(exc), True)
    except LabelError as exc:
        return SaveOutcome(False, f"Not saved: {exc}", False)
    except StorageError as exc:  # rolled back: the answers stay on screen for a later retry
        return SaveOutcome(
            False,
            f"{exc}. Nothing was recorded and your answers are kept here: "
            "tell an admin, then submit again once it is fixed.",
            False,
        )
    what = "Skipped" if skipped else ("Saved a new version of" if item.editing else "Saved")
    if not result.created:
        message = (
            f"{item.work_id} was already saved (from another tab, or a double submit): "
            "the label saved first is kept; this submit stored nothing (B opens your "
            "labels to check or edit)."
        )
    else:
        message = f"{what} {item.work_id} (version {result.version})."
    return SaveOutcome(True, message, True, result)
