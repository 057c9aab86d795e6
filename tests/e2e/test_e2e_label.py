"""End to end in headless Chromium at 1366x768: an annotator labels works by keyboard only.

Keys are typed at a person's fastest pace (30 ms apart, then 0-10 ms, across Enter too); the
stored labels must be exactly the ones the keys make (tests/browser.py's reference model), and
the active question must be on screen after every key.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from db.engine import read_session
from db.models import Label, User
from labeling.schema import load_schema
from labeling.settings import DEFAULT_SCHEMA
from tests.browser import (
    CHROMIUM,
    WATCH_VIEW,
    Typed,
    chromium_page,
    plan_work,
    press,
    settle,
    sign_in,
    streamlit_server,
    title,
    type_work,
    watch_websocket,
)

pytestmark = pytest.mark.e2e
need_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"
)


def demo_db(tmp: Path) -> str:
    """A fresh demo database (the bundled real frame, abstracts cached) in tmp."""
    from labeling.database import init_db
    from labeling.frames.demo import build_demo

    url = f"sqlite:///{tmp / 'demo.db'}"
    engine = init_db(url)
    build_demo(engine, load_schema(DEFAULT_SCHEMA))
    engine.dispose()
    return url


def stored(url: str, user: str) -> list[Label]:
    """The user's label rows, oldest first (detached)."""
    from labeling.database import get_engine

    with read_session(get_engine(url)) as session:
        uid = session.execute(select(User.id).where(User.name == user)).scalar_one()
        rows = list(
            session.execute(select(Label).where(Label.user_id == uid).order_by(Label.id)).scalars()
        )
        session.expunge_all()
    return rows


def wait_for_labels(url: str, user: str, n: int, timeout: float = 30) -> list[Label]:
    """Poll until the user has n label rows (the last submit is stored asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = stored(url, user)
        if len(rows) >= n or time.monotonic() > deadline:
            return rows
        time.sleep(0.1)


def type_keys(page: Any, keys: list[str], gap: tuple[float, float], rng: random.Random) -> None:
    """Press the keys with a random pause in [gap) seconds between them."""
    for key in keys:
        press(page, key)
        time.sleep(rng.uniform(*gap))


def assert_row(row: Label, want: Typed) -> None:
    """A stored label is exactly what the keys typed."""
    got = (row.answers, row.confidence, row.flagged, row.note, row.skipped, row.skip_reason)
    expect = (
        want.answers,
        want.confidence,
        want.flagged,
        want.note,
        want.skip_reason is not None,
        want.skip_reason,
    )
    assert got == expect, f"keys {' '.join(want.keys)}"


@pytest.mark.slow  # over 20 s (pytest --durations)
@need_chromium
def test_ten_works_typed_30ms_apart_are_stored_exactly_as_typed(tmp_path: Path) -> None:
    pytest.importorskip("playwright")
    questions = list(load_schema(DEFAULT_SCHEMA).questions)
    rng = random.Random(11)
    url = demo_db(tmp_path)
    with streamlit_server(url, tmp_path / "streamlit.log") as base, chromium_page() as page:
        sign_in(page, base, "annotator", "demo")  # lands on Label; keys work at once
        page.evaluate(WATCH_VIEW)
        sent = watch_websocket(page)
        plans = [
            plan_work(
                rng,
                questions,
                skip=2 if i == 3 else 0,
                flag=i in (1, 6),
                note="see refs 2" if i == 2 else "",
            )
            for i in range(10)
        ]
        typed = [type_work(keys, questions) for keys in plans]
        titles = [title(page)]
        # One work's keys alone: no message to the server until Enter. D opens the active
        # question's definitions; the next work starts with them closed.
        before = len(sent)
        type_keys(page, ["d", *plans[0][:-1]], (0.03, 0.03), rng)
        assert len(sent) == before, "a key other than Enter reached the server"
        assert page.locator(".lf-codebook").count() == 1
        type_keys(page, plans[0][-1:], (0.03, 0.03), rng)
        page.wait_for_function(f"document.querySelector('.lf-title').textContent !== {titles[0]!r}")
        assert page.locator(".lf-codebook").count() == 0
        edit = ["b", "t", "4", "Enter"]  # after work 6: edit it (domain -> option 4), save
        for i, keys in enumerate(plans[1:], start=1):
            type_keys(page, keys, (0.03, 0.03), rng)
            if i == 5:
                type_keys(page, edit, (0.03, 0.03), rng)
        rows = wait_for_labels(url, "annotator", 11)
        page.wait_for_function("!document.querySelector('.lf-busy')")
        titles.append(title(page))
        views = page.evaluate("window.__views")
    assert len(rows) == 11, [(r.work_id, r.version) for r in rows]
    firsts = [r for r in rows if r.version == 1]
    assert len({r.work_id for r in firsts}) == 10 and titles[0] != titles[1]
    for row, want in zip(firsts, typed, strict=True):
        assert_row(row, want)
    (second,) = [r for r in rows if r.version == 2]
    assert second.work_id == firsts[5].work_id and rows.index(second) == 6  # saved in order
    changed = dict(typed[5].answers, domain=questions[3].labels[3])
    assert second.answers == changed and second.flagged == typed[5].flagged
    assert all(r.time_on_item_ms and r.time_on_item_ms > 0 for r in rows)
    assert all(r.scores_visible for r in rows)
    out_of_view = [v for v in views if v[1] is False]
    assert out_of_view == [] and len(views) >= sum(len(k) for k in plans)


@need_chromium
def test_keys_typed_0_to_10ms_apart_across_enter_all_count(tmp_path: Path) -> None:
    """No pause at all, even between Enter and the next work's keys: every key counts, on the
    work it was meant for; a double Enter stores one label; a campaign picked in the form
    takes keys at once; then a work labelled with the mouse."""
    pytest.importorskip("playwright")
    questions = list(load_schema(DEFAULT_SCHEMA).questions)
    rng = random.Random(5)
    url = demo_db(tmp_path)
    with streamlit_server(url, tmp_path / "streamlit.log") as base, chromium_page() as page:
        sign_in(page, base, "annotator2", "demo")
        page.select_option(".lf-campaign", label="demo-sample")  # the mouse picks a campaign
        page.wait_for_function(
            "document.querySelector('.lf-progress') && document"
            ".querySelector('.lf-progress').textContent"
            ".startsWith('demo-sample')"
        )
        settle(page)
        plans = [plan_work(rng, questions) for _ in range(6)]
        plans[2] = plans[2] + ["Enter"]  # a double Enter: the second is ignored
        typed = [type_work(keys, questions) for keys in plans]
        type_keys(page, [k for keys in plans for k in keys], (0.0, 0.01), rng)
        rows = wait_for_labels(url, "annotator2", 6)
        page.wait_for_function("!document.querySelector('.lf-busy')")
        time.sleep(0.5)
        rows = stored(url, "annotator2")
        shown = page.locator(".lf-msg").inner_text()
        # The mouse works too: click each question, its second option, then Submit.
        by_mouse = {}
        for q in questions:
            page.locator(f'.lf-q[data-q="{q.name}"] .lf-qhead').click()
            page.locator(".lf-q.lf-active .lf-opt").nth(1).click()
            by_mouse[q.name] = [q.labels[1]] if q.kind == "multi" else q.labels[1]
        page.locator(".lf-submit").click()
        mouse_rows = wait_for_labels(url, "annotator2", 7)
    assert len(rows) == 6, [(r.work_id, r.answers) for r in rows]
    for row, want in zip(rows, typed, strict=True):
        assert_row(row, want)
    assert len({r.work_id for r in rows}) == 6
    assert "Saved" in shown
    assert len(mouse_rows) == 7 and mouse_rows[-1].answers == by_mouse


@need_chromium
def test_hostile_title_and_abstract_render_inert(tmp_path: Path) -> None:
    pytest.importorskip("playwright")
    from tests.pages.test_label_page import HOSTILE, PASSWORD, build_label_db

    url = f"sqlite:///{tmp_path / 'hostile.db'}"
    build_label_db(url, tmp_path, hostile_first=True).dispose()
    with streamlit_server(url, tmp_path / "streamlit.log") as base, chromium_page() as page:
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        sign_in(page, base, "annotator", PASSWORD)
        assert title(page) == HOSTILE
        abstract = page.locator(".lf-abstract-text").inner_text()
        assert "<b>not bold</b> [link](javascript:x)" in abstract
        assert page.locator("script:has-text('alert(1)')").count() == 0
        assert page.locator("a[href^='javascript']").count() == 0
        assert page.locator(".lf-abstract b, .lf-title strong").count() == 0
        assert dialogs == []


@pytest.mark.slow  # over 20 s (pytest --durations)
@need_chromium
def test_a_lead_settles_a_dispute_with_a_handful_of_keys(tmp_path: Path) -> None:
    """The annotators differ on one question: the form starts from their majority elsewhere,
    Enter is refused while that question has no majority, then a digit, the reason and Enter
    settle it."""
    pytest.importorskip("playwright")
    from labeling.database import get_engine
    from tests.factories import answers_for, label_next
    from tests.pages.test_label_page import PASSWORD, build_label_db

    url = f"sqlite:///{tmp_path / 'lead.db'}"
    build_label_db(url, tmp_path, n=4).dispose()
    engine = get_engine(url)
    schema = load_schema(DEFAULT_SCHEMA)
    agreed = answers_for(schema, 0)
    work = label_next(engine, schema, "top", "annotator", agreed)
    label_next(engine, schema, "top", "annotator2", dict(agreed, genre="methods"))
    with streamlit_server(url, tmp_path / "streamlit.log") as base, chromium_page() as page:
        page.goto(base + "/")
        page.get_by_role("textbox", name="Name").fill("lead")
        page.get_by_role("textbox", name="Password").fill(PASSWORD)
        page.keyboard.press("Enter")
        page.get_by_role("link", name="Adjudicate").click()
        page.wait_for_selector(".af .lf-title")
        settle(page)
        assert page.locator(".af-table .af-disagree .af-q").all_inner_texts() == ["genre"]
        page.keyboard.press("Enter")  # genre has no majority: refused, said
        page.wait_for_function(
            "document.querySelector('.lf-msg').textContent.startsWith('No majority on genre')"
        )
        for key in ["3", "Tab", *"codebook 4.1", "Enter"]:  # genre -> option 3, reason, Enter
            press(page, key)
        page.wait_for_function(
            "document.querySelector('.lf-msg').textContent.includes('validated by adjudication')"
        )
    from tests.pages.test_lead_pages import work as stored_work

    row = stored_work(url, work)
    genre = schema.question("genre").labels[2]
    assert row.status == "human_validated" and row.final_answers == dict(agreed, genre=genre)
