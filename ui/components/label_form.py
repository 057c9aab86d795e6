"""The label form: the work card and the keyboard form as one client-side component.

assets/label_form.js handles every key in the browser and sends one "action" trigger at a
time: a submit carries the whole label. `form_data` is everything the component shows, as
JSON; `mount` puts it on the page and returns the action the browser sent, if any.
"""

from __future__ import annotations

from typing import Any

from labeling.review import flow
from labeling.review.label_screen import Screen
from labeling.review.progress import Progress
from labeling.review.validation import SKIP_REASONS
from ui.components import component
from ui.components.card_data import card_data, details_data, questions_data, teachers_data

KEY = "lbl_form"
_mount = component("label_form")


def draft_data(draft: flow.Draft | None) -> dict[str, Any] | None:
    """A draft as JSON (answers, confidence, flag, note, active question)."""
    if draft is None:
        return None
    return {
        "answers": draft.answers,
        "confidence": draft.confidence,
        "flagged": draft.flagged,
        "note": draft.note,
        "active": draft.active,
    }


def _feedback(screen: Screen) -> dict[str, Any] | None:
    fb = screen.feedback
    if fb is None or fb.item.card is None:
        return None
    card = fb.item.card
    yours = {} if fb.skip_reason else {q: _answer(v) for q, v in fb.answers.items()}
    return {
        "work_id": fb.item.work_id,
        "title": card.title,
        "yours": yours,
        "skipped": flow.SKIP_LABELS.get(fb.skip_reason, fb.skip_reason) if fb.skip_reason else None,
        "teachers": teachers_data(card, fb.item.questions),
        "details": details_data(card),
    }


def _answer(value: Any) -> str:
    """One answer as the feedback line shows it (a multi-label answer's labels, or none)."""
    if isinstance(value, list):
        return ", ".join(value) or "none"
    return "—" if value is None else str(value)


def _progress(item: flow.ItemView, progress: Progress | None) -> dict[str, Any]:
    p = progress or item.progress
    return {
        "text": p.line(item.campaign_name),
        "fraction": p.fraction,
        "started_fraction": p.started_fraction,
    }


def form_data(screen: Screen) -> dict[str, Any]:
    """Everything the label component shows for the screen's state (after apply_action)."""
    item, draft = screen.shown()
    base: dict[str, Any] = {
        "ack": screen.ack,
        "ack_ok": screen.ack_ok,
        "message": None
        if screen.message is None
        else {"kind": screen.message[0], "text": screen.message[1]},
        "campaigns": [
            {"id": c.id, "name": c.name + (" (blind)" if c.blind else "")} for c in screen.campaigns
        ],
        "campaign": screen.campaign_id,
        "double_press_ms": int(flow.MIN_DWELL * 1000),
        "skip": [{"reason": r, "text": flow.SKIP_LABELS[r]} for r in SKIP_REASONS],
        "feedback": _feedback(screen),
    }
    if item is None:
        return {**base, "state": "empty", "ctx": None}
    editing = item.editing
    ctx = {
        "user": screen.user_id,
        "campaign": item.campaign_id,
        "work": item.work_id,
        "mode": f"edit:{editing.version}" if editing is not None else "queue",
    }
    base.update(
        ctx=ctx,
        progress=_progress(item, screen.progress),
        blind=item.blind,
        scores_visible=item.scores_visible,
    )
    if item.work_id is None:
        return {**base, "state": "notice" if item.notice else "done", "notice": item.notice}
    assert item.card is not None
    keys = flow.question_keys(item.questions)
    visible = item.scores_visible
    return {
        **base,
        "state": "work",
        "work_id": item.work_id,
        "submission_id": item.submission_id,
        "editing": None if editing is None else {"version": editing.version},
        "questions": questions_data(item.questions, keys),
        "draft": draft_data(draft or flow.Draft.fresh(item.questions)),
        "card": card_data(item.card, item.abstract),
        "teachers": teachers_data(item.card, item.questions) if visible else None,
        "details": details_data(item.card) if visible else None,
    }


def mount(data: dict[str, Any], on_action: Any) -> Any:
    """Put the component on the page; `on_action` runs (before the script) on each action."""
    return _mount(key=KEY, data=data, on_action_change=on_action)


def action(state: Any) -> Any:
    """The action the browser sent in this run, from the component's session_state value."""
    value = state.get(KEY) if hasattr(state, "get") else None
    return value.get("action") if value is not None else None
