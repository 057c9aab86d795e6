"""End to end in headless Chromium at 1366x768: reading a work on the label page by keyboard.

The abstract scrolls from the keyboard (PageDown, PageUp, Space, Shift+Space, End, Home) with
no text field focused and no round trip; a note takes Space as text. In a blind campaign the
feedback on the label just sent is in view next to "Saved". Chosen answers read as done (not
in the error red), the ⚠ says what it means, and a dialog over the page keeps its own keys.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from labeling.schema import load_schema
from labeling.settings import DEFAULT_SCHEMA
from tests.browser import CHROMIUM, chromium_page, settle, sign_in, streamlit_server, title
from tests.browser import watch_websocket as watch
from tests.e2e.test_e2e_label import demo_db

pytestmark = pytest.mark.e2e
need_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"
)

BOX = "document.querySelector('.lf-abstract-text')"
# The visible part of an element: below Streamlit's header, above the bottom edge.
IN_VIEW = """(sel) => {
    const node = document.querySelector(sel);
    const head = document.querySelector('[data-testid="stHeader"]');
    const top = head ? head.getBoundingClientRect().bottom : 0;
    const r = node.getBoundingClientRect();
    return r.height > 0 && r.top >= top - 1 && r.bottom <= innerHeight + 1;
}"""


def scroll(page: Any) -> dict[str, int]:
    """The abstract box's scroll position and size, and the page's own scroll."""
    return page.evaluate(
        f"({{top: Math.round({BOX}.scrollTop), max: {BOX}.scrollHeight - {BOX}.clientHeight,"
        f" height: {BOX}.clientHeight, page: Math.round(window.scrollY)}})"
    )


def every_question_keys() -> list[str]:
    """Keys answering every question with its first option, then Enter."""
    keys: list[str] = []
    for q in load_schema(DEFAULT_SCHEMA).questions:
        keys += ["1", "ArrowDown"] if q.kind == "multi" else ["1"]
    return [*keys, "Enter"]


def long_abstract(page: Any) -> None:
    """Skip ahead (out of scope) until the work shown has an abstract longer than its box."""
    for _ in range(15):
        if page.evaluate(f"{BOX} !== null && {BOX}.scrollHeight > 2 * {BOX}.clientHeight"):
            return
        before = title(page)
        page.wait_for_timeout(350)  # two submit keys within 0.3 s count as one double press
        page.keyboard.press("Alt+3")
        page.wait_for_function(f"document.querySelector('.lf-title').textContent !== {before!r}")
        settle(page)
    raise AssertionError("no work with a long abstract in the demo's first 15")


@pytest.mark.slow  # about 18 s alone, over 20 s on a busy machine
@need_chromium
def test_the_abstract_scrolls_from_the_keyboard_and_blind_feedback_is_in_view(
    tmp_path: Path,
) -> None:
    url = demo_db(tmp_path)
    with streamlit_server(url, tmp_path / "streamlit.log") as base, chromium_page() as page:
        sign_in(page, base, "annotator", "demo")
        long_abstract(page)
        sent = watch(page)
        start = scroll(page)
        assert start["top"] == 0
        page.keyboard.press("PageDown")
        after = scroll(page)
        assert after["top"] == min(round(0.9 * start["height"]), start["max"]), after
        assert after["page"] == start["page"]  # the box scrolled, not the page
        page.keyboard.press("End")
        assert scroll(page)["top"] in (start["max"], start["max"] - 1)
        page.keyboard.press("PageUp")
        assert scroll(page)["top"] < start["max"] - 1
        page.keyboard.press("Home")
        assert scroll(page)["top"] == 0
        page.keyboard.press("Space")
        assert scroll(page)["top"] > 0
        page.keyboard.press("Shift+Space")
        assert scroll(page)["top"] == 0
        assert sent == [], "a scrolling key reached the server"
        # In the note, Space is text: the box stays put and the note gets the space.
        page.keyboard.press("Tab")
        page.keyboard.type("a b")
        assert scroll(page)["top"] == 0
        assert page.locator(".lf-note").input_value() == "a b"
        page.keyboard.press("Escape")

        # A chosen answer in a folded question reads as done: the text colour, not the red.
        page.keyboard.press("T")  # domain
        page.keyboard.press("2")  # a single-choice answer: the next question opens
        answer = page.locator('.lf-q[data-q="domain"] .lf-answer')
        colours = answer.evaluate(
            "(n) => [getComputedStyle(n).color, "
            "getComputedStyle(document.querySelector('.lf-prompt')).color]"
        )
        assert colours[0] == colours[1], colours
        warn = page.locator(".lf-warn")
        if warn.count():
            assert "pick differently" in (warn.first.get_attribute("title") or "")

        # A dialog over the page keeps its keys: the form takes none of them (Esc included).
        page.evaluate(
            """() => {
                const d = document.createElement('div');
                d.setAttribute('role', 'dialog');
                d.textContent = 'a dialog';
                d.id = 'fake-dialog';
                document.body.appendChild(d);
                window.__esc = null;
                window.addEventListener('keydown', (e) => {
                    if (e.key === 'Escape') window.__esc = e.defaultPrevented; });
            }"""
        )
        active = page.locator(".lf-q.lf-active").get_attribute("data-q")
        page.keyboard.press("ArrowDown")
        page.keyboard.press("Escape")
        assert page.locator(".lf-q.lf-active").get_attribute("data-q") == active
        assert page.evaluate("window.__esc") is False
        page.evaluate("document.getElementById('fake-dialog').remove()")

        # Blind: the feedback on the label just sent shows in view, next to "Saved".
        page.select_option(".lf-campaign", label="demo-blind (blind)")
        page.wait_for_function(
            "document.querySelector('.lf-progress').textContent.startsWith('demo-blind')"
        )
        settle(page)
        long_abstract(page)
        before = title(page)
        for key in every_question_keys():
            page.keyboard.press(key)
        page.wait_for_function(f"document.querySelector('.lf-title').textContent !== {before!r}")
        settle(page)
        page.wait_for_selector(".lf-feedback")
        assert page.evaluate(IN_VIEW, ".lf-feedback"), "the blind feedback is out of view"
        assert page.evaluate(IN_VIEW, ".lf-q.lf-active")
        text = page.locator(".lf-feedback").inner_text()
        assert before in text or before[:40] in text
        assert "you: " in text and "Codex: " in text and "Gemma: " in text
