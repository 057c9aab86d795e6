"""Headless Chromium helpers for the end-to-end tests and bench/browser.py.

Also the reference model of the label form's keys: `type_work` turns a plan of key presses
into the label the form must store, with the same rules as labeling.review.flow.Draft.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labeling.review.flow import Draft, question_keys
from labeling.schema import Question
from tests.servers import app_server, wait_healthy

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
SKIPS = ("no_abstract", "not_research", "out_of_scope", "other")


@contextmanager
def streamlit_server(db_url: str, log: Path) -> Iterator[str]:
    """`streamlit run app.py` on a free port against db_url (offline); yields the base URL."""
    with app_server(db_url, log) as (base, proc):
        wait_healthy(base, proc, log)
        yield base


@contextmanager
def chromium() -> Iterator[Any]:
    """The system's headless Chromium (a Playwright Browser; its contexts share nothing)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def chromium_page(width: int = 1366, height: int = 768) -> Iterator[Any]:
    """A Playwright page in the system's headless Chromium (1366x768 by default)."""
    with chromium() as browser:
        page = browser.new_page(viewport={"width": width, "height": height})
        page.set_default_timeout(20_000)
        yield page


def settle(page: Any) -> None:
    """Wait until the script run is over and no stale element remains."""
    page.wait_for_selector(IDLE, state="attached")
    page.wait_for_function("!document.querySelector('[data-testid=\"stSkeleton\"]')")


def sign_in(page: Any, base: str, name: str, password: str) -> None:
    """Type name, Tab, password, Enter on the login form; an annotator lands on Label."""
    page.goto(base + "/")
    page.get_by_role("textbox", name="Name").focus()
    page.keyboard.type(name)
    page.keyboard.press("Tab")
    page.keyboard.type(password)
    page.keyboard.press("Enter")
    page.wait_for_selector(".lf-title")
    settle(page)


def title(page: Any) -> str:
    """The shown work's title."""
    return page.locator(".lf-title").inner_text()


# Records, after each key has been handled, whether the active question is on screen (below
# Streamlit's header, above the bottom edge). A window capture listener runs before the form's
# document listener; the check waits for the form's handler with a zero timeout.
WATCH_VIEW = """() => {
    window.__views = [];
    window.addEventListener('keydown', (e) => setTimeout(() => {
        const q = document.querySelector('.lf-q.lf-active');
        if (!q) { window.__views.push([e.key, null]); return; }
        const head = document.querySelector('[data-testid="stHeader"]');
        const top = head ? head.getBoundingClientRect().bottom : 0;
        const r = q.getBoundingClientRect();
        window.__views.push([e.key, r.top >= top - 1 && r.bottom <= innerHeight + 1,
                             Math.round(r.top), Math.round(r.bottom)]);
    }, 0), true);
}"""


def watch_websocket(page: Any) -> list[float]:
    """Times (monotonic) of every websocket frame the page sends to the server."""
    import time

    sent: list[float] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda _: sent.append(time.monotonic())))
    return sent


# ------------------------------------------------------------------ the reference model of keys


@dataclass
class Typed:
    """One work typed by keyboard: the keys, and the label they must store."""

    keys: list[str]
    answers: dict[str, Any]
    confidence: int | None = None
    flagged: bool = False
    note: str | None = None
    skip_reason: str | None = None
    text: list[str] = field(default_factory=list)  # key-by-key, for messages


def _digit(index: int) -> str:
    """The Playwright key of option `index` (0-based): 1..9, 0, Shift+1...Shift+0."""
    d = str((index + 1) % 10)
    return d if index < 10 else f"Shift+{d}"


def type_work(keys: list[str], questions: list[Question]) -> Typed:
    """What the form stores for these keys (Enter / Alt+n end the work), by Draft's rules."""
    draft = Draft.fresh(questions)
    letters = question_keys(questions)
    typed = Typed(keys=list(keys), answers={})
    note: list[str] | None = None
    for key in keys:
        if note is not None:  # in the note: text until Escape / Enter / Tab
            if key in ("Escape", "Enter", "Tab"):
                draft.note, note = "".join(note), None
            else:
                note.append(" " if key == "Space" else key)
            continue
        q = questions[draft.active]
        if key == "Tab":
            note = list(draft.note)
        elif key in ("ArrowUp", "ArrowDown"):
            draft.move(questions, -1 if key == "ArrowUp" else 1)
        elif key.upper() in letters:
            draft.active = letters.index(key.upper())
        elif key.upper() in ("L", "M", "H"):
            value = "LMH".index(key.upper()) + 1
            draft.confidence = None if draft.confidence == value else value
        elif key.upper() == "F":
            draft.flagged = not draft.flagged
        elif key.startswith("Alt+"):
            typed.skip_reason = SKIPS[int(key[4:]) - 1]
            break
        elif key == "Enter":
            break
        else:
            digit = int(key[-1])
            index = (9 if digit == 0 else digit - 1) + (10 if key.startswith("Shift+") else 0)
            if index < len(q.labels):
                draft.choose(questions, draft.active, q.labels[index])
    typed.answers = {k: v for k, v in draft.answers.items() if v is not None}
    typed.confidence, typed.flagged = draft.confidence, draft.flagged
    typed.note = draft.note.strip() or None
    return typed


def plan_work(
    rng: random.Random,
    questions: list[Question],
    *,
    skip: int = 0,
    flag: bool = False,
    note: str = "",
) -> list[str]:
    """A realistic key plan for one work: every question answered in order (multi-label
    options toggled, sometimes twice), now and then a jump back, a confidence; Enter."""
    letters = question_keys(questions)
    keys: list[str] = []
    for qi, q in enumerate(questions):
        if q.kind == "multi":
            picks = rng.sample(range(len(q.labels)), rng.randint(1, 3))
            for i in picks:
                keys.append(_digit(i))
            if rng.random() < 0.4:
                keys += [_digit(picks[0])] * 2  # toggled off and on again
            if qi + 1 < len(questions):
                keys.append(letters[qi + 1] or "ArrowDown" if rng.random() < 0.5 else "ArrowDown")
        else:
            keys.append(_digit(rng.randrange(len(q.labels))))
    if rng.random() < 0.5 and letters[1]:  # go back and change a binary answer
        keys += [letters[1].lower(), _digit(rng.randrange(2))]
    keys.append(rng.choice(["L", "M", "H", "h"]))
    if flag:
        keys.append("F")
    if note:
        keys += ["Tab", *note, "Enter"]
    if skip:
        return keys[: len(keys) // 2] + [f"Alt+{skip}"]
    return keys + ["Enter"]


def press(page: Any, key: str) -> None:
    """Press one key (a note's space as Space)."""
    page.keyboard.press("Space" if key == " " else key)
