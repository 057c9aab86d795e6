"""End to end in headless Chromium: a reload never costs an annotator their sign-in or their
unsaved answers; a second tab never stores a work twice; a bad cookie gives the sign-in page.

Keys are typed 30 ms apart with no wait after each. One server and database for the module;
each test uses its own annotator and its own browser contexts (cookies, localStorage).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from db.models import utcnow
from labeling.auth.login_sessions import COOKIE_NAME, create_session, new_token
from labeling.auth.users import add_user, get_user, set_active
from labeling.database import get_engine
from labeling.schema import load_schema
from labeling.settings import DEFAULT_SCHEMA
from tests.browser import CHROMIUM, chromium, plan_work, settle, sign_in, streamlit_server, title
from tests.browser import type_work as model
from tests.e2e.test_e2e_label import assert_row, stored, type_keys, wait_for_labels
from tests.label_page import PASSWORD, build_label_db

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"
    ),
]
DRAFTS = "() => Object.keys(localStorage).filter((k) => k.startsWith('labeling.draft|'))"
SIGN_IN = "h1:has-text('Sign in')"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A label database (one work in 4 without abstract) and `streamlit run` on it."""
    pytest.importorskip("playwright")
    tmp = tmp_path_factory.mktemp("continuity")
    url = f"sqlite:///{tmp / 'label.db'}"
    build_label_db(url, tmp, n=12, cache_all=True).dispose()
    with streamlit_server(url, tmp / "streamlit.log") as base:
        yield base, url


@pytest.fixture(scope="module")
def browser(server: tuple[str, str]) -> Iterator[Any]:
    """One headless Chromium for the module."""
    with chromium() as b:
        yield b


def new_page(context: Any) -> Any:
    """A page of the context at 1366x768."""
    page = context.new_page()
    page.set_viewport_size({"width": 1366, "height": 768})
    page.set_default_timeout(20_000)
    return page


def login_cookie(context: Any) -> dict[str, Any] | None:
    """The login cookie the context holds, or None."""
    found = [c for c in context.cookies() if c["name"] == COOKIE_NAME]
    return found[0] if found else None


def wait_cookie_gone(context: Any, timeout: float = 10) -> None:
    """Poll until the login cookie is deleted."""
    deadline = time.monotonic() + timeout
    while login_cookie(context) is not None:
        assert time.monotonic() < deadline, "the login cookie was not deleted"
        time.sleep(0.1)


def reload(page: Any) -> None:
    """Reload the page and wait for the label form or the sign-in page."""
    page.reload()
    page.wait_for_selector(f".lf-title, {SIGN_IN}")
    settle(page)


def chosen(page: Any) -> list[str]:
    """The labels chosen on screen, question by question."""
    return page.locator(".lf-opt.lf-chosen .lf-opt-label").all_inner_texts()


def test_reload_keeps_the_sign_in_and_the_unsaved_answers(
    server: tuple[str, str], browser: Any
) -> None:
    base, url = server
    questions = list(load_schema(DEFAULT_SCHEMA).questions)
    keys = plan_work(random.Random(13), questions, flag=True, note="ok")[:-1]  # no Enter
    context = browser.new_context()
    page = new_page(context)
    sign_in(page, base, "annotator", PASSWORD)
    first = login_cookie(context)
    assert first is not None and first["sameSite"] == "Strict" and first["path"] == "/"
    assert not first["secure"] and abs(first["expires"] - time.time() - 120 * 60) < 120
    work = title(page)
    page.locator(".lf-title").click()  # the page has the focus, keys go to the form
    type_keys(page, keys, (0.03, 0.03), random.Random(0))
    before = chosen(page)
    assert before and len(page.evaluate(DRAFTS)) == 1
    # Reload: still signed in, on the same work, the answers back; the token was rotated.
    reload(page)
    assert title(page) == work and chosen(page) == before
    assert "were restored" in page.locator(".lf-msg").inner_text()
    assert login_cookie(context)["value"] != first["value"]
    assert first["value"] not in page.url
    # Submit the restored answers: exactly what was typed is stored.
    page.locator(".lf-title").click()
    page.keyboard.press("Enter")
    page.wait_for_function(f"document.querySelector('.lf-title').textContent !== {work!r}")
    (row,) = wait_for_labels(url, "annotator", 1)
    assert_row(row, model([*keys, "Enter"], questions))
    assert page.evaluate(DRAFTS) == []
    # Reload after the submit: the next work, fresh.
    after = title(page)
    reload(page)
    assert title(page) == after != work and chosen(page) == []
    # Unsaved answers, then sign out: the sign-in page; the cookie and the drafts are gone.
    page.locator(".lf-title").click()
    type_keys(page, ["1", "2"], (0.03, 0.03), random.Random(0))
    assert len(page.evaluate(DRAFTS)) == 1
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_selector(SIGN_IN)
    wait_cookie_gone(context)
    assert page.evaluate(DRAFTS) == []
    reload(page)
    assert page.locator(SIGN_IN).count() == 1 and page.locator(".lf-title").count() == 0
    assert len(stored(url, "annotator")) == 1
    context.close()


def test_a_second_tab_never_stores_a_work_twice(server: tuple[str, str], browser: Any) -> None:
    base, url = server
    context = browser.new_context()  # both tabs share the cookie and localStorage
    one = new_page(context)
    sign_in(one, base, "annotator2", PASSWORD)
    work = title(one)
    one.locator(".lf-title").click()
    type_keys(one, ["1", "ArrowDown", "1", "1", "1", "1", "1", "L"], (0.03, 0.03), random.Random(0))
    two = new_page(context)
    two.goto(base + "/")  # a new tab: signed in from the cookie
    two.wait_for_selector(".lf-title")
    settle(two)
    assert title(two) == work and chosen(two) == chosen(one)  # the leased work, its draft
    one.bring_to_front()  # a background tab does not take clicks
    one.locator(".lf-title").click()
    one.keyboard.press("Enter")
    one.wait_for_function(f"document.querySelector('.lf-title').textContent !== {work!r}")
    two.bring_to_front()
    two.locator(".lf-title").click()
    type_keys(two, ["H", "Enter"], (0.03, 0.03), random.Random(0))  # other answers, submit
    two.wait_for_function(f"document.querySelector('.lf-title').textContent !== {work!r}")
    message = two.locator(".lf-msg").inner_text()
    assert "already saved" in message and "stored nothing" in message
    rows = stored(url, "annotator2")
    assert [(r.work_id, r.version, r.confidence) for r in rows] == [(rows[0].work_id, 1, 1)]
    assert title(two) == title(one) != work  # the next work, leased once to this annotator
    one.bring_to_front()
    reload(one)  # the first tab's cookie was rotated by the second: still signed in
    assert title(one) == title(two)
    context.close()


def test_a_bad_cookie_gives_the_sign_in_page_and_roles_hold(
    server: tuple[str, str], browser: Any
) -> None:
    base, url = server
    engine = get_engine(url)
    gone = add_user(engine, "gone", "annotator", PASSWORD)
    stale = create_session(
        engine, get_user(engine, "annotator").id, now=utcnow() - timedelta(hours=3)
    )
    deactivated = create_session(engine, gone.id)
    set_active(engine, "gone", False)
    for value in (new_token(), stale, deactivated, "not a token"):
        context = browser.new_context()
        context.add_cookies([{"name": COOKIE_NAME, "value": value, "url": base}])
        page = new_page(context)
        page.goto(base + "/label")
        page.wait_for_selector(SIGN_IN)
        settle(page)
        assert page.locator('[data-testid="stException"], .stAlert').count() == 0
        wait_cookie_gone(context)  # the stale cookie is deleted
        context.close()
    # An annotator's valid token: a lead's page typed in the URL stays out of reach.
    context = browser.new_context()
    mine = create_session(engine, get_user(engine, "annotator").id)
    context.add_cookies([{"name": COOKIE_NAME, "value": mine, "url": base}])
    page = new_page(context)
    page.goto(base + "/monitor")
    page.wait_for_selector(".lf-title")  # the annotator's own main page instead
    settle(page)
    assert page.locator("h1:has-text('Monitor')").count() == 0
    nav = page.locator('[data-testid="stSidebarNav"]').inner_text()
    assert "Label" in nav and "Monitor" not in nav and "Campaigns" not in nav
    context.close()
