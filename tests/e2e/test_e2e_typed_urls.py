"""End to end in headless Chromium: every page opened by its typed URL, by every role that may.

A bookmark or a typed address must open the page itself: never Streamlit's "Page not found"
dialog (which Esc cannot close on the label page, whose form takes Esc) and never a console
error. Each role's pages come from the README's Pages and roles table (labeling.auth.access),
opened two ways: signed in first, then typed (a new tab: the login cookie signs it in), and
typed while signed out (the sign-in form answers there, then the page opens). A fresh
server's very first request is its own case (Streamlit still reads pages/ as a folder of
pages until st.navigation has run once: pages/_guard.through_app).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from labeling.auth.access import PAGE_ROLES
from tests.browser import CHROMIUM, chromium, settle, streamlit_server
from tests.label_page import PASSWORD, build_label_db

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
need_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"
)

ROLES = ("annotator", "lead", "exporter", "admin")
# What each page shows once it has opened (Label draws its own form, no heading).
SHOWN = {
    "home": "role=heading[name='Human validation']",
    "label": ".lf-title",
    "campaigns": "role=heading[name='Campaigns']",
    "adjudicate": "role=heading[name='Adjudicate']",
    "monitor": "role=heading[name='Monitor']",
    "export": "role=heading[name='Export']",
    "admin": "role=heading[name='Admin']",
}
ALLOWED = [(role, page) for role in ROLES for page in PAGE_ROLES if role in PAGE_ROLES[page]]


# Streamlit's frontend finds the server's base path by trying every prefix of the address
# it was opened at, longest first: /label/_stcore/health and /label/_stcore/host-config answer
# 404 (Chromium logs each as a console error) before /_stcore/health answers. That probe is
# Streamlit's, made on every page load below the root, and no app can answer it (answering
# would move the app's base path); every other console error counts.
BASE_PATH_PROBE = re.compile(r"^https?://[^/]+/[^/]+/_stcore/(health|host-config)$")


def counts(message: Any) -> bool:
    """Whether a console message is an error of the app's (not Streamlit's base-path probe)."""
    if message.type != "error":
        return False
    probe = BASE_PATH_PROBE.match(message.location.get("url", ""))
    return not (message.text.startswith("Failed to load resource") and probe)


class Watched:
    """A browser context's pages with their console errors and uncaught page errors."""

    def __init__(self, context: Any) -> None:
        self.context = context
        self.errors: list[str] = []

    def open(self, url: str) -> Any:
        """A new tab on url (as typed into the address bar); returns it once the run is over."""
        page = self.context.new_page()
        page.set_default_timeout(20_000)
        page.on("console", lambda m: counts(m) and self.errors.append(f"console: {m.text}"))
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        page.goto(url)
        settle(page)
        return page


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """A database with one user per role and works to label; its URL and a Chromium."""
    url = f"sqlite:///{tmp_path / 'typed.db'}"
    build_label_db(url, tmp_path, n=4).dispose()
    with chromium() as browser:
        yield url, browser


def new_context(browser: Any) -> Watched:
    """A fresh browser profile (no cookie) at 1366x768."""
    return Watched(browser.new_context(viewport={"width": 1366, "height": 768}))


def sign_in(page: Any, name: str) -> None:
    """Fill the sign-in form shown on the page, and press Enter."""
    page.get_by_role("textbox", name="Name").fill(name)
    page.get_by_role("textbox", name="Password").fill(PASSWORD)
    page.keyboard.press("Enter")


def assert_opened(page: Any, base: str, name: str, watched: Watched, how: str) -> None:
    """The page's own content at its own address; no "Page not found"; no console error."""
    page.locator(SHOWN[name]).first.wait_for()
    settle(page)
    page.wait_for_timeout(300)  # a late dialog or error would come with the run's last messages
    where = f"{how} /{name}"
    assert page.get_by_text("Page not found").count() == 0, where
    assert page.get_by_role("dialog").count() == 0, where
    assert page.get_by_text("You do not have access").count() == 0, where
    assert page.url == f"{base}/{name}", where
    assert watched.errors == [], where


@need_chromium
def test_every_page_opens_by_typed_url_for_every_role_that_may_see_it(
    watched: tuple[str, Any], tmp_path: Path
) -> None:
    url, browser = watched
    with streamlit_server(url, tmp_path / "streamlit.log") as base:
        for role in ROLES:
            ctx = new_context(browser)
            start = ctx.open(base + "/")
            sign_in(start, role)
            start.get_by_role("button", name="Sign out").wait_for()
            for name in [p for r, p in ALLOWED if r == role]:
                # Signed in first, then the address typed into a new tab.
                assert_opened(ctx.open(f"{base}/{name}"), base, name, ctx, f"{role} signed in:")
                # Typed while signed out: the sign-in form there, then the page itself.
                out = new_context(browser)
                page = out.open(f"{base}/{name}")
                page.get_by_role("heading", name="Sign in").wait_for()
                sign_in(page, role)
                assert_opened(page, base, name, out, f"{role} signed out:")
                out.context.close()
            ctx.context.close()


# One fresh server per page: its first request is that page's address, typed signed out;
# the role that opens it cycles through every role that may.
FIRST = [
    (name, next(r for r in ROLES[i % 4 :] + ROLES if r in PAGE_ROLES[name]))
    for i, name in enumerate(PAGE_ROLES)
]


@need_chromium
@pytest.mark.parametrize(("name", "role"), FIRST, ids=[n for n, _ in FIRST])
def test_a_typed_url_as_a_fresh_servers_first_request_opens_the_page(
    watched: tuple[str, Any], tmp_path: Path, name: str, role: str
) -> None:
    url, browser = watched
    with streamlit_server(url, tmp_path / "streamlit.log") as base:
        ctx = new_context(browser)
        page = ctx.open(f"{base}/{name}")
        page.get_by_role("heading", name="Sign in").wait_for()
        settle(page)
        assert page.get_by_text("Page not found").count() == 0
        # Streamlit's own page list of pages/ would name the private modules.
        assert page.get_by_text("guard", exact=True).count() == 0
        sign_in(page, role)
        assert_opened(page, base, name, ctx, f"{role} first request:")
        # Then, signed in, the root address: the role's main page, at its own address.
        root = ctx.open(base + "/")
        root.wait_for_function("location.pathname !== '/'")
        settle(root)
        assert root.get_by_text("Page not found").count() == 0 and ctx.errors == []
