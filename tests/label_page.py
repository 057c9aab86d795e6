"""The label component's browser side, faked for AppTest: read what the page mounted, send
actions as the component's JS would (one trigger per action, the whole label on submit)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

_ids = itertools.count(1)


def form(at: AppTest, name: str = "label_form") -> dict[str, Any]:
    """The data the page gave a component (the label form by default) in its last run."""
    found = [e for e in at.get("bidi_component") if e.proto.component_name.endswith(name)]
    assert found, f"the {name} component is not on the page"
    return json.loads(found[-1].proto.json)


def first_answers(data: dict[str, Any]) -> dict[str, Any]:
    """Every question answered with its first option (a list for multi-label questions)."""
    return {q["name"]: [q["labels"][0]] if q["kind"] == "multi" else q["labels"][0]
            for q in data["questions"]}


class Browser:
    """Stands in for a component's JS (assets/<name>.js): each `send` is one trigger and one
    rerun."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str = "label_form") -> None:
        import importlib

        module = importlib.import_module(f"ui.components.{name}")
        self.queue: list[Any] = []
        self.sent: list[Any] = []
        monkeypatch.setattr(module, "action", lambda state: self._next())

    def _next(self) -> Any:
        return self.queue.pop(0) if self.queue else None

    def send(self, at: AppTest, kind: str, **fields: Any) -> AppTest:
        """Send one action (a fresh id unless given) and run the page."""
        payload = {"id": f"a{next(_ids)}", "type": kind, **fields}
        return self.resend(at, payload)

    def resend(self, at: AppTest, payload: Any) -> AppTest:
        """Send this exact payload (a repeat, or a malformed one) and run the page."""
        self.queue.append(payload)
        self.sent.append(payload)
        at.run()
        assert not at.exception, at.exception
        return at

    def submit(self, at: AppTest, answers: dict[str, Any] | None = None, *,
               skip: str | None = None, confidence: int | None = None, flagged: bool = False,
               note: str = "", ms: int = 1200) -> AppTest:
        """Submit the shown work with these answers (default: every first option)."""
        data = form(at)
        if answers is None:
            answers = {} if skip else first_answers(data)
        return self.send(at, "submit", submission_id=data["submission_id"],
                         work_id=data["work_id"], answers=answers, confidence=confidence,
                         flagged=flagged, note=note, skip_reason=skip, time_on_item_ms=ms,
                         scores_visible=data["scores_visible"])
