"""End to end in headless Chromium: sign in and label works with the keyboard only."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from db.engine import read_session
from db.models import Label, User
from labeling.schema import Question, load_schema
from labeling.settings import DEFAULT_SCHEMA
from tests.servers import app_server, wait_healthy

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
DWELL = 0.35  # the page ignores a submit less than 0.3 s after an item appears (double click)

pytestmark = pytest.mark.e2e


@contextmanager
def streamlit_server(db_url: str, log: Path) -> Iterator[str]:
    """`streamlit run app.py` on a free port against db_url (offline); yields the base URL."""
    with app_server(db_url, log) as (base, proc):
        wait_healthy(base, proc, log)
        yield base


@contextmanager
def chromium_page(width: int = 1600, height: int = 1400) -> Iterator[Any]:
    """A Playwright page in the system's headless Chromium."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(20_000)
            yield page
        finally:
            browser.close()


def settle(page: Any) -> None:
    """Wait until the script run is over and no stale element remains."""
    page.wait_for_selector(IDLE, state="attached")
    page.wait_for_function("!document.querySelector('[data-testid=\"stSkeleton\"]')")


def sign_in(page: Any, base: str, name: str, password: str) -> None:
    """Type name, Tab, password, Enter on the login form, then open the Label page."""
    page.goto(base + "/")
    page.get_by_role("textbox", name="Name").focus()
    page.keyboard.type(name)
    page.keyboard.press("Tab")
    page.keyboard.type(password)
    page.keyboard.press("Enter")
    link = page.get_by_role("link", name="Label")
    link.focus()
    page.keyboard.press("Enter")
    page.wait_for_selector(".st-key-work_title")
    settle(page)
    # Keys typed while a link or input has focus go to it; the labelling itself starts
    # from the page (as after clicking anywhere on it).
    page.evaluate("document.activeElement && document.activeElement.blur()")


def title(page: Any) -> str:
    """The shown work's title."""
    return page.locator(".st-key-work_title").inner_text()


def press_and_wait(page: Any, key: str, selector: str) -> None:
    """Press a key, then wait until the selector is on the page and the rerun is over."""
    page.keyboard.press(key)
    page.wait_for_selector(selector, state="attached")
    settle(page)


def answer_by_keyboard(page: Any, questions: list[Question]) -> dict[str, Any]:
    """Answer every question with the keyboard; returns the answers given."""
    answers: dict[str, Any] = {}
    for qi, q in enumerate(questions):
        li = 1 if q.kind == "binary" else 0  # "no" for binary questions, else the first label
        chosen = f'.st-key-opt_{qi}_{li} [data-testid*="primary"]'
        following = f".st-key-qactive .st-key-goto_{qi + 1}"
        last = qi + 1 == len(questions)
        # Single-choice and binary answers move on to the next question by themselves.
        press_and_wait(page, str(li + 1), chosen if q.kind == "multi" or last else following)
        answers[q.name] = [q.labels[li]] if q.kind == "multi" else q.labels[li]
        if q.kind == "multi" and not last:
            press_and_wait(page, "ArrowDown", following)
    return answers


WATCH_NEXT = """([t, a]) => {
    // Cheap checks only (textContent, no layout), once per animation frame, so that the
    // measurement does not slow the page down; the time is taken one frame after the new
    // title and abstract are in the document, i.e. once that frame has been painted.
    window.__t0 = window.__t1 = undefined;
    document.addEventListener('keydown', e => { window.__t0 = e.timeStamp; },
                              {capture: true, once: true});
    const text = sel => { const e = document.querySelector(sel); return e ? e.textContent : null; };
    const tick = () => {
        const ti = text('.st-key-work_title'), ab = text('.st-key-abstract_box');
        const body = document.querySelector('.st-key-abstract_box [data-testid="stText"],'
                                            + '.st-key-abstract_box [data-testid="stAlert"]');
        if (ti !== null && ab !== null && ti !== t && ab !== a && body) {
            requestAnimationFrame(() => { window.__t1 = performance.now(); });
        } else {
            requestAnimationFrame(tick);
        }
    };
    requestAnimationFrame(tick);
}"""


def submit_by_keyboard(page: Any) -> float:
    """Press Enter; wait for the next work's title and abstract; return the seconds it took."""
    before = page.evaluate(
        "[document.querySelector('.st-key-work_title').textContent,"
        " document.querySelector('.st-key-abstract_box').textContent]"
    )
    page.evaluate(WATCH_NEXT, before)
    page.keyboard.press("Enter")
    page.wait_for_function("window.__t1 !== undefined")
    elapsed = page.evaluate("(window.__t1 - window.__t0) / 1000")
    settle(page)
    return float(elapsed)


def label_items(page: Any, n: int) -> tuple[list[str], list[dict[str, Any]], list[float]]:
    """Label n works in a row with the keyboard: titles seen, answers given, submit latencies."""
    questions = list(load_schema(DEFAULT_SCHEMA).questions)
    titles, given, times = [title(page)], [], []
    for _ in range(n):
        shown = time.monotonic()
        given.append(answer_by_keyboard(page, questions))
        time.sleep(max(0.0, DWELL - (time.monotonic() - shown)))
        times.append(submit_by_keyboard(page))
        titles.append(title(page))
    return titles, given, times


def demo_db(tmp: Path) -> str:
    """A fresh demo database (the bundled real frame, abstracts cached) in tmp."""
    from labeling.database import init_db
    from labeling.demo import build_demo

    url = f"sqlite:///{tmp / 'demo.db'}"
    engine = init_db(url)
    build_demo(engine, load_schema(DEFAULT_SCHEMA))
    engine.dispose()
    return url


need_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"
)


@need_chromium
def test_three_works_labelled_with_the_keyboard_only(tmp_path: Path) -> None:
    pytest.importorskip("playwright")
    from labeling.database import get_engine

    url = demo_db(tmp_path)
    with streamlit_server(url, tmp_path / "streamlit.log") as base, chromium_page() as page:
        sign_in(page, base, "annotator", "demo")
        titles, given, _ = label_items(page, 2)
        # The third one with a note: keys typed in the note are text, not shortcuts; Tab
        # leaves the note for the submit button and Enter submits once.
        questions = list(load_schema(DEFAULT_SCHEMA).questions)
        shown = time.monotonic()
        given.append(answer_by_keyboard(page, questions))
        page.locator('[data-testid="stTextInput"] input').focus()  # reached with Tab
        page.keyboard.type("flag 2 see refs")
        page.keyboard.press("Enter")  # keeps the note; does not submit
        settle(page)
        assert page.locator(".st-key-flag [data-testid*='primary']").count() == 0
        page.keyboard.press("Tab")
        time.sleep(max(0.0, DWELL - (time.monotonic() - shown)))
        submit_by_keyboard(page)
        titles.append(title(page))
    assert len(set(titles)) == 4  # three works labelled, a fourth one waiting
    engine = get_engine(url)
    with read_session(engine) as session:
        uid = session.execute(select(User.id).where(User.name == "annotator")).scalar_one()
        rows = session.execute(select(Label).order_by(Label.id)).scalars().all()
        assert [(r.user_id, r.version, r.skipped) for r in rows] == [(uid, 1, False)] * 3
        assert len({r.work_id for r in rows}) == 3
        assert [r.answers for r in rows] == given
        assert all(r.scores_visible and r.time_on_item_ms > 0 for r in rows)
        assert all(r.submission_id.startswith("first:") for r in rows)
        assert [r.note for r in rows] == [None, None, "flag 2 see refs"]
        assert not any(r.flagged for r in rows)


@need_chromium
def test_hostile_title_and_abstract_render_inert(tmp_path: Path) -> None:
    pytest.importorskip("playwright")
    from tests.test_label_page import HOSTILE, PASSWORD, build_label_db

    url = f"sqlite:///{tmp_path / 'hostile.db'}"
    build_label_db(url, tmp_path, hostile_first=True).dispose()
    with streamlit_server(url, tmp_path / "streamlit.log") as base, chromium_page() as page:
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        sign_in(page, base, "annotator", PASSWORD)
        assert title(page) == HOSTILE
        abstract = page.locator('.st-key-abstract_box [data-testid="stText"]').inner_text()
        assert "<b>not bold</b> [link](javascript:x)" in abstract
        assert page.locator("script:has-text('alert(1)')").count() == 0
        assert page.locator("a[href^='javascript']").count() == 0
        assert page.locator(".st-key-abstract_box b, .st-key-work_title strong").count() == 0
        assert dialogs == []
