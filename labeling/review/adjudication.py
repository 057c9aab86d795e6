"""The adjudicate page's server side: the dispute shown, and the one function applying an action.

The browser handles the keys (options, J/K, F, the reason) and sends one action at a time. A
question without a majority starts empty ("no majority"): an adjudication leaving one so is
refused with a message, never stored as "no category". The screen lists the disputed works,
or (the "filter" action, F) the flagged ones (review.flags), which need not be disputed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import Engine

from labeling.abstracts.cache import AbstractState
from labeling.review import disputes
from labeling.review.campaigns import CampaignInfo, list_campaigns
from labeling.review.flags import current_flags, flagged_works
from labeling.review.flow import abstract_of
from labeling.review.validation import (
    AlreadySettled,
    AnswerError,
    ValidationError,
    adjudicate,
    campaign_questions,
    last_act,
)
from labeling.schema import Question, Schema
from labeling.settings import Settings
from labeling.stats.majority import NO_MAJORITY

ACTIONS = ("adjudicate", "move", "campaign", "filter")
DISPUTED, FLAGGED = "disputed", "flagged"
KINDS = (DISPUTED, FLAGGED)  # what the screen lists: disputed works, or flagged works


@dataclass
class DisputeScreen:
    """One lead's adjudicate page in one browser session."""

    user_id: int
    campaign: int = 0  # 0: every campaign
    kind: str = DISPUTED  # one of KINDS
    index: int = 0
    campaigns: list[CampaignInfo] = field(default_factory=list)
    queue: list[disputes.DisputeView] = field(default_factory=list)
    view: disputes.DisputeView | None = None
    questions: list[Question] = field(default_factory=list)
    abstract: AbstractState | None = None
    message: tuple[str, str] | None = None  # (kind, text) for the next render only
    ack: str | None = None
    ack_ok: bool = True


def majority_prefill(
    answers: Iterable[Mapping[str, Any]], questions: Sequence[Question]
) -> dict[str, Any]:
    """Where the form starts: the majority answer per question, None where there is none.

    The one definition (labeling.stats.majority, as the majority rule and `labeling aggregate
    --method majority` use it): strictly more than half of those who answered, no tie-break;
    a multi-label answer is compared whole, as a set ([] when a majority answered "none").

    Args:
        answers: one answers dict per annotator.
        questions: the form's questions.
    """
    return disputes.majority_answers(answers, questions)


def prefill_for(view: disputes.DisputeView, questions: Sequence[Question]) -> dict[str, Any]:
    """A dispute's prefill: the majority of its labels, or across campaigns of its two verdicts
    (so a question where they differ starts with "no majority": the lead must choose)."""
    weighed = [view.answers[k] for k in view.weighed] if view.weighed else view.answers.values()
    return majority_prefill(weighed, questions)


def side_by_side(view: disputes.DisputeView, questions: Sequence[Question]) -> list[dict]:
    """Per question: each annotator's answer, whether they differ, and the majority (text)."""
    names = [q.name for q in questions]
    differ = set(disputes.disagreeing(view.answers, names))
    majority = prefill_for(view, questions)
    return [
        {
            "question": q.name,
            "disagree": q.name in differ,
            "answers": [disputes.fmt_answer(view.answers[who].get(q.name)) for who in view.answers],
            "majority": NO_MAJORITY
            if majority[q.name] is None
            else disputes.fmt_answer(majority[q.name]),
        }
        for q in questions
    ]


def _questions(screen: DisputeScreen, view: disputes.DisputeView, schema: Schema) -> list:
    camp = next((c for c in screen.campaigns if c.id == view.campaign_id), None)
    return campaign_questions(camp, schema) if camp else list(schema.questions)


def _load(
    engine: Engine, screen: DisputeScreen, schema: Schema, settings: Settings
) -> DisputeScreen:
    screen.campaigns = list_campaigns(engine)
    if screen.campaign not in {0, *(c.id for c in screen.campaigns)}:
        screen.campaign, screen.index = 0, 0
    screen.queue = _queue(engine, screen.kind, screen.campaign or None)
    screen.index = min(screen.index, max(len(screen.queue) - 1, 0))
    screen.view = screen.queue[screen.index] if screen.queue else None
    screen.questions = _questions(screen, screen.view, schema) if screen.view else []
    view = screen.view
    screen.abstract = abstract_of(engine, view.work_id, settings=settings) if view else None
    return screen


def _queue(engine: Engine, kind: str, campaign: int | None) -> list[disputes.DisputeView]:
    """The works listed: flagged ones, or disputed ones with their flags, if any."""
    if kind == FLAGGED:
        return flagged_works(engine, campaign)
    queue = disputes.disputed_works(engine, campaign)
    notes: dict[str, list[str]] = {}
    for flag in current_flags(engine, campaign):
        notes.setdefault(flag.work_id, []).append(flag.text)
    return [replace(v, flags=tuple(notes[v.work_id])) if v.work_id in notes else v for v in queue]


def _text(payload: Mapping[str, Any], name: str) -> str:
    value = payload.get(name)
    if not isinstance(value, str):
        raise ValueError(f"the action's {name!r} must be text")
    return value


def _adjudicate(
    engine: Engine, screen: DisputeScreen, payload: Mapping[str, Any], schema: Schema
) -> bool:
    view = screen.view
    work_id = _text(payload, "work_id")
    if view is None or work_id != view.work_id:
        screen.message = (
            "warning",
            f"{work_id} is no longer the {'work' if screen.kind == FLAGGED else 'dispute'} "
            f"shown: last changed by "
            f"{last_act(engine, work_id)}; nothing was recorded.",
        )
        return False
    raw = payload.get("answers")
    if not isinstance(raw, Mapping):
        raise ValueError("the action's 'answers' must be an object")
    questions = _questions(screen, view, schema)
    open_ = [q.name for q in questions if raw.get(q.name) is None]
    if open_:
        screen.message = (
            "error",
            f"{NO_MAJORITY.capitalize()} on {', '.join(open_)}: choose "
            "an answer first. Nothing was recorded.",
        )
        return False
    reason = _text(payload, "reason").strip()
    if not reason:
        screen.message = ("error", "A reason is required to adjudicate.")
        return False
    answers = {q.name: raw[q.name] for q in questions}
    try:
        adjudicate(
            engine, view.work_id, answers, reason, screen.user_id, view.campaign_id, schema=schema
        )
    except AlreadySettled as exc:
        screen.message = ("warning", f"Not adjudicated: {exc}.")
        return False
    except (AnswerError, ValidationError) as exc:
        screen.message = ("error", f"Not adjudicated: {exc}")
        return False
    screen.message = ("success", f"{view.work_id} validated by adjudication.")
    return True


def apply_dispute_action(
    engine: Engine, screen: DisputeScreen, payload: Any, *, schema: Schema, settings: Settings
) -> DisputeScreen:
    """Apply one browser action (None: none sent), then load the dispute to show.

    Args:
        engine: the database.
        screen: the page's state (changed in place and returned).
        payload: the component's trigger value.
        schema: the label schema.
        settings: the OpenAlex settings (the page's), for the dispute's abstract.
    """
    if payload is None:
        return _load(engine, screen, schema, settings)
    _load(engine, screen, schema, settings)
    action_id = payload.get("id") if isinstance(payload, Mapping) else None
    if isinstance(action_id, str) and action_id == screen.ack:
        return screen  # sent twice: applied once already
    screen.ack, screen.message = action_id if isinstance(action_id, str) else None, None
    try:
        if not isinstance(payload, Mapping) or payload.get("type") not in ACTIONS:
            raise ValueError(f"unknown action {payload!r:.80}")
        kind = payload["type"]
        if kind == "move":
            step = payload.get("step")
            if step not in (-1, 1):
                raise ValueError("'step' must be 1 or -1")
            screen.index = (screen.index + step) % max(len(screen.queue), 1)
            screen.ack_ok = True
        elif kind == "campaign":
            cid = payload.get("campaign_id")
            if isinstance(cid, bool) or not isinstance(cid, int):
                raise ValueError("the campaign action needs a whole-number 'campaign_id'")
            screen.campaign, screen.index, screen.ack_ok = cid, 0, True
        elif kind == "filter":
            wanted = payload.get("show")
            if wanted not in KINDS:
                raise ValueError(f"'show' must be one of {', '.join(KINDS)}")
            screen.kind, screen.index, screen.ack_ok = wanted, 0, True
        else:
            screen.ack_ok = _adjudicate(engine, screen, payload, schema)
            if screen.ack_ok and screen.kind == FLAGGED:
                # A flagged work stays listed once adjudicated (its flag stands): go on.
                screen.index = (screen.index + 1) % max(len(screen.queue), 1)
    except ValueError as exc:
        screen.message = ("error", f"The page sent an action the server cannot use: {exc}.")
        screen.ack_ok = False
    return _load(engine, screen, schema, settings)
