"""The label page's server side: what is on screen, and the one function applying a browser action.

The browser handles every key itself and sends one action at a time (a submit with the whole
label, or a navigation); `apply_action` checks it, stores a label durably when asked, and
leaves the screen ready to render. Nothing here imports Streamlit: tests drive it directly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from labeling.abstracts.cache import Prefetcher
from labeling.errors import InputError
from labeling.review import flow
from labeling.review.progress import Progress, my_progress
from labeling.review.queue import held_campaign
from labeling.review.validation import SKIP_REASONS
from labeling.schema import Question, Schema
from labeling.settings import Settings

ACTIONS = ("submit", "back", "resume", "again", "retry_abstract", "campaign")
MAX_NOTE = 20_000  # characters; a longer note is refused with a message, never cut
MAX_TIME_MS = 24 * 3600 * 1000


class ActionError(InputError):
    """A browser action that cannot be applied (malformed, or for a work no longer shown)."""


@dataclass(frozen=True)
class Action:
    """One checked browser action; the label fields are set for "submit" only."""

    kind: str
    id: str
    campaign_id: int | None = None
    submission_id: str | None = None
    work_id: str | None = None
    draft: flow.Draft | None = None
    skip_reason: str | None = None
    time_on_item_ms: int | None = None


@dataclass(frozen=True)
class Feedback:
    """Blind campaigns: the last submitted work and its answers, shown after the label."""

    item: flow.ItemView
    answers: dict[str, Any]
    skip_reason: str | None


@dataclass
class Screen:
    """One annotator's label page in one browser session."""

    user_id: int
    campaigns: list[flow.CampaignChoice] = field(default_factory=list)
    campaign_id: int | None = None
    item: flow.ItemView | None = None  # the queue's work (or the "none left" / notice view)
    draft: flow.Draft | None = None  # its answers as the server last saw them
    edit: tuple[flow.ItemView, flow.Draft] | None = None  # an earlier label being edited
    feedback: Feedback | None = None
    message: tuple[str, str] | None = None  # (kind, text) for the next render only
    ack: str | None = None  # id of the last action applied
    ack_ok: bool = True  # whether it did what it asked (saved, opened, moved on)
    progress: Progress | None = None  # counted on every run: never behind the database

    def shown(self) -> tuple[flow.ItemView | None, flow.Draft | None]:
        """The item on screen: a previous label being edited, else the queue's item."""
        return self.edit if self.edit is not None else (self.item, self.draft)


def _text(payload: Mapping[str, Any], name: str, *, optional: bool = False) -> str | None:
    value = payload.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ActionError(f"the action's {name!r} must be text, not {type(value).__name__}")
    return value


def _answers(raw: Any, questions: Sequence[Question]) -> dict[str, Any]:
    """The answers of a submit, shaped like Draft.answers (values are checked when stored)."""
    if not isinstance(raw, Mapping):
        raise ActionError("the action's 'answers' must be an object of question: answer")
    names = {q.name for q in questions}
    unknown = sorted(str(k) for k in raw if k not in names)
    if unknown:
        raise ActionError(f"answers name questions this campaign does not ask: {unknown}")
    out: dict[str, Any] = {}
    for q in questions:
        value = raw.get(q.name)
        if q.kind == "multi":
            value = [] if value is None else value
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ActionError(f"the answer to {q.name!r} must be a list of labels")
        elif value is not None and not isinstance(value, str):
            raise ActionError(f"the answer to {q.name!r} must be one label or null")
        out[q.name] = value
    return out


def parse_action(payload: Any, questions: Sequence[Question]) -> Action:
    """Check a browser action and turn it into an Action; ActionError says what is wrong.

    Args:
        payload: the component's trigger value (decoded JSON).
        questions: the questions of the item on screen (to shape a submit's answers).
    """
    if not isinstance(payload, Mapping):
        raise ActionError(f"an action must be an object, not {type(payload).__name__}")
    kind = _text(payload, "type")
    if kind not in ACTIONS:
        raise ActionError(f"unknown action type {kind!r}; expected one of {', '.join(ACTIONS)}")
    action_id = _text(payload, "id") or ""
    if not 0 < len(action_id) <= 64:
        raise ActionError("an action needs an id of 1 to 64 characters")
    if kind == "campaign":
        cid = payload.get("campaign_id")
        if isinstance(cid, bool) or not isinstance(cid, int):
            raise ActionError("the campaign action needs a whole-number 'campaign_id'")
        return Action(kind, action_id, campaign_id=cid)
    if kind != "submit":
        return Action(kind, action_id)
    confidence = payload.get("confidence")
    if confidence not in (None, *(v for v, _ in flow.CONFIDENCE)) or isinstance(confidence, bool):
        raise ActionError(f"confidence must be 1, 2, 3 or null, not {confidence!r}")
    flagged = payload.get("flagged", False)
    if not isinstance(flagged, bool):
        raise ActionError("'flagged' must be true or false")
    note = _text(payload, "note", optional=True) or ""
    if len(note) > MAX_NOTE:
        raise ActionError(f"the note has {len(note):,} characters; at most {MAX_NOTE:,} fit")
    skip = _text(payload, "skip_reason", optional=True)
    if skip is not None and skip not in SKIP_REASONS:
        raise ActionError(f"unknown skip reason {skip!r}")
    ms = payload.get("time_on_item_ms")
    if ms is not None and (isinstance(ms, bool) or not isinstance(ms, int | float)
                           or not 0 <= ms <= MAX_TIME_MS):  # fmt: skip
        raise ActionError(f"time_on_item_ms must be 0 to {MAX_TIME_MS} milliseconds")
    draft = flow.Draft(_answers(payload.get("answers"), questions), confidence, flagged, note)
    return Action(
        kind,
        action_id,
        submission_id=_text(payload, "submission_id"),
        work_id=_text(payload, "work_id"),
        draft=draft,
        skip_reason=skip,
        time_on_item_ms=None if ms is None else int(ms),
    )


def load(
    engine: Engine,
    screen: Screen,
    schema: Schema,
    *,
    settings: Settings,
    prefetcher: Prefetcher | None = None,
) -> Screen:
    """Make the screen ready to render: an open campaign chosen and its next work claimed.

    Args:
        engine: the database.
        screen: the page's state (changed in place and returned).
        schema: the label schema.
        settings: the OpenAlex settings, for the shown work's abstract.
        prefetcher: warms upcoming abstracts in the background.
    """
    if not screen.campaigns or screen.item is None:
        screen.campaigns = flow.open_campaigns(engine)
    ids = [c.id for c in screen.campaigns]
    if screen.campaign_id not in ids:
        _drop_item(engine, screen)
        # A new page (a reload, another tab) goes back to the work the user holds, if any.
        held = held_campaign(engine, screen.user_id, ids) if screen.campaign_id is None else None
        screen.campaign_id = held or (ids[0] if ids else None)
    if screen.campaign_id is None:
        return screen
    if screen.item is not None and screen.item.campaign_id != screen.campaign_id:
        _drop_item(engine, screen)
    if screen.item is None:
        screen.item = flow.next_item(
            engine,
            screen.campaign_id,
            screen.user_id,
            schema,
            settings=settings,
            prefetcher=prefetcher,
        )
        screen.draft = flow.Draft.fresh(screen.item.questions)
        screen.progress = screen.item.progress
    else:
        screen.item = flow.keep_lease(engine, screen.item, screen.user_id)
        screen.progress = my_progress(engine, screen.campaign_id, screen.user_id)
    return screen


def _drop_item(engine: Engine, screen: Screen) -> None:
    """Give the queue's work back and forget everything tied to the campaign."""
    flow.release(engine, screen.item)
    screen.item = screen.draft = screen.edit = screen.feedback = None


def _submit(engine: Engine, screen: Screen, action: Action, schema: Schema) -> bool:
    item, _ = screen.shown()
    if (
        item is None
        or item.work_id is None
        or action.work_id != item.work_id
        or action.submission_id != item.submission_id
    ):
        screen.message = (
            "warning",
            f"Not saved: that label was for {action.work_id}, which is "
            "no longer on screen. Nothing was recorded; check the work shown.",
        )
        return False
    assert action.draft is not None
    out = flow.save(
        engine,
        item,
        action.draft,
        user_id=screen.user_id,
        schema=schema,
        skip_reason=action.skip_reason,
        time_on_item_ms=action.time_on_item_ms,
    )
    if not out.advance:  # the answers sent stay on screen with the reason
        action.draft.active = 0
        if screen.edit is not None:
            screen.edit = (item, action.draft)
        else:
            screen.draft = action.draft
        screen.message = ("error", out.message)
        return False
    fresh = out.saved and out.result is not None and out.result.created
    screen.message = ("success" if fresh else "warning", out.message)
    if item.blind and item.editing is None and out.saved:
        screen.feedback = Feedback(item, dict(action.draft.answers), action.skip_reason)
    if screen.edit is not None:
        screen.edit = None
    else:
        screen.item = screen.draft = None
    return True


def _back(engine: Engine, screen: Screen, schema: Schema, settings: Settings) -> bool:
    back = (screen.edit[0].back if screen.edit else 0) + 1
    found = None
    if screen.campaign_id is not None:
        found = flow.previous_item(
            engine, screen.campaign_id, screen.user_id, schema, back, settings=settings
        )
    if found is None:
        screen.message = ("info", "No earlier label of yours in this campaign.")
        return False
    screen.edit = found
    return True


def apply_action(
    engine: Engine,
    screen: Screen,
    payload: Any,
    *,
    schema: Schema,
    settings: Settings,
    prefetcher: Prefetcher | None = None,
) -> Screen:
    """Apply one browser action to the screen, then load what shows next.

    A repeated action (same id) changes nothing. A submit is stored before the next work is
    claimed; when it cannot be stored, its answers stay on screen with the reason.

    Args:
        engine: the database.
        screen: the page's state (changed in place and returned).
        payload: the component's trigger value (None: nothing sent, just load).
        schema: the label schema.
        settings: the OpenAlex settings (the page's or the CLI's), for abstracts.
        prefetcher: warms upcoming abstracts in the background.
    """
    if payload is None:  # a run the browser did not ask for: just what shows now
        return load(engine, screen, schema, settings=settings, prefetcher=prefetcher)
    shown, _ = screen.shown()
    questions = shown.questions if shown is not None else ()
    try:
        action = parse_action(payload, questions)
    except ActionError as exc:
        screen.message = ("error", f"The page sent an action the server cannot use: {exc}.")
        screen.ack_ok = False
        if isinstance(payload, Mapping) and isinstance(payload.get("id"), str):
            screen.ack = payload["id"][:64]
        return load(engine, screen, schema, settings=settings, prefetcher=prefetcher)
    if action.id == screen.ack:  # sent twice (a reconnect): applied once already
        return load(engine, screen, schema, settings=settings, prefetcher=prefetcher)
    screen.ack, screen.message = action.id, None
    if action.kind == "submit":
        screen.ack_ok = _submit(engine, screen, action, schema)
    elif action.kind == "back":
        screen.ack_ok = _back(engine, screen, schema, settings)
    elif action.kind == "resume":
        screen.ack_ok, screen.edit = screen.edit is not None, None
    elif action.kind == "again":
        _drop_item(engine, screen)
        screen.campaigns, screen.ack_ok = [], True
    elif action.kind == "retry_abstract":
        screen.ack_ok = _retry_abstract(engine, screen, settings)
    else:
        screen.ack_ok = _switch(engine, screen, action.campaign_id)
    return load(engine, screen, schema, settings=settings, prefetcher=prefetcher)


def _retry_abstract(engine: Engine, screen: Screen, settings: Settings) -> bool:
    if screen.edit is not None:
        item, draft = screen.edit
        screen.edit = (flow.refresh_abstract(engine, item, settings=settings), draft)
    elif screen.item is not None:
        screen.item = flow.refresh_abstract(engine, screen.item, settings=settings)
    else:
        return False
    return True


def _switch(engine: Engine, screen: Screen, campaign_id: int | None) -> bool:
    if campaign_id not in {c.id for c in flow.open_campaigns(engine)}:
        screen.message = (
            "error",
            f"Campaign {campaign_id} is not open (closed meanwhile?): pick another one.",
        )
        screen.campaigns = []
        return False
    _drop_item(engine, screen)
    screen.campaign_id, screen.campaigns = campaign_id, []
    return True
