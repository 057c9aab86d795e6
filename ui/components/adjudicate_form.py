"""The adjudicate form: a disputed (or flagged) work's card, the answers side by side and the
final answer.

assets/adjudicate_form.js handles the keys (options, J/K next/previous, F disputed/flagged
works, Tab to the reason, Enter) and sends one "action" trigger at a time.
"""

from __future__ import annotations

from typing import Any

from labeling.review.adjudication import (
    DISPUTED,
    FLAGGED,
    NO_MAJORITY,
    DisputeScreen,
    prefill_for,
    side_by_side,
)
from labeling.review.card import build_card
from labeling.review.flow import question_keys
from labeling.schema import Schema
from ui.components import component
from ui.components.card_data import card_data, details_data, questions_data, teachers_data

KEY = "adj_form"
NAV_KEYS = {"J", "K", "F"}  # next, previous, disputed/flagged: never a question's key
_mount = component("adjudicate_form")


def form_data(screen: DisputeScreen, schema: Schema) -> dict[str, Any]:
    """Everything the adjudicate component shows for the screen's state."""
    base: dict[str, Any] = {
        "ack": screen.ack,
        "ack_ok": screen.ack_ok,
        "message": None
        if screen.message is None
        else {"kind": screen.message[0], "text": screen.message[1]},
        "campaigns": [{"id": 0, "name": "Every campaign"}]
        + [{"id": c.id, "name": c.name} for c in screen.campaigns],
        "campaign": screen.campaign,
        "kinds": [
            {"id": DISPUTED, "name": "Disputed works"},
            {"id": FLAGGED, "name": "Flagged works"},
        ],
        "kind": screen.kind,
        "total": len(screen.queue),
        "index": screen.index,
        "no_majority": NO_MAJORITY,
    }
    view = screen.view
    if view is None:
        return {**base, "state": "empty"}
    questions = screen.questions
    card = build_card(view.record, schema, questions)
    shown = card_data(card, screen.abstract)
    shown["abstract"]["retry"] = False  # a lead reads what is cached; no retry key here
    keys = [k if k not in NAV_KEYS else None for k in question_keys(questions)]
    return {
        **base,
        "state": "work",
        "ctx": {"user": screen.user_id, "campaign": screen.campaign, "work": view.work_id},
        "work_id": view.work_id,
        "n_labels": view.n_labels,
        "skipped": list(view.skipped),
        "annotators": list(view.answers),
        "rows": side_by_side(view, questions),
        "prefill": prefill_for(view, questions),
        "note": view.note,
        "flags": list(view.flags),
        "status": view.status,
        "questions": questions_data(questions, keys),
        "card": shown,
        "teachers": teachers_data(card, questions),
        "details": details_data(card),
    }


def mount(data: dict[str, Any], on_action: Any) -> Any:
    """Put the component on the page; `on_action` runs (before the script) on each action."""
    return _mount(key=KEY, data=data, on_action_change=on_action)


def action(state: Any) -> Any:
    """The action the browser sent in this run, from the component's session_state value."""
    value = state.get(KEY) if hasattr(state, "get") else None
    return value.get("action") if value is not None else None
