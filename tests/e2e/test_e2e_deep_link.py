"""End to end in headless Chromium: a page's own address, opened before signing in.

A bookmark or a typed URL (/label, /adjudicate) must give the sign-in form and then that
page when the role may open it, also as the very first request a fresh server gets (when
Streamlit still treats pages/ as a folder of pages of its own: see pages/_guard.through_app).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.browser import CHROMIUM, chromium, settle, streamlit_server
from tests.label_page import PASSWORD, build_label_db

pytestmark = pytest.mark.e2e
need_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"
)


def open_signed_out(browser: Any, url: str) -> Any:
    """A new browser context (no cookie) on url; returns its page once the run is over."""
    page = browser.new_context(viewport={"width": 1366, "height": 768}).new_page()
    page.set_default_timeout(20_000)
    page.goto(url)
    settle(page)
    return page


def sign_in_here(page: Any, name: str) -> None:
    """Fill the sign-in form on the page as it is, and press Enter."""
    page.get_by_role("textbox", name="Name").fill(name)
    page.get_by_role("textbox", name="Password").fill(PASSWORD)
    page.keyboard.press("Enter")


def assert_sign_in_form_only(page: Any) -> None:
    """The sign-in form, nothing of a page file run on its own, no "Page not found"."""
    # A fresh server's first page can read as idle before its first run has begun (CI saw
    # the form missing right after settle): wait for the form, then for that run's end.
    page.get_by_role("heading", name="Sign in").wait_for()
    settle(page)
    assert page.get_by_role("heading", name="Sign in").is_visible()
    assert page.get_by_text("You do not have access").count() == 0
    assert page.get_by_text("Page not found").count() == 0
    # Streamlit's own page list of pages/ would name the private modules.
    assert page.get_by_text("guard", exact=True).count() == 0


@need_chromium
def test_a_bookmarked_page_signs_in_and_opens_it_even_as_a_fresh_servers_first_request(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'deep.db'}"
    build_label_db(url, tmp_path, n=4).dispose()
    with streamlit_server(url, tmp_path / "streamlit.log") as base, chromium() as browser:
        # The server's first script run: a lead's bookmark of Adjudicate (not their landing).
        page = open_signed_out(browser, base + "/adjudicate")
        assert_sign_in_form_only(page)
        assert page.url == base + "/adjudicate"
        sign_in_here(page, "lead")
        page.get_by_role("heading", name="Adjudicate").wait_for()
        assert page.url == base + "/adjudicate"

        # Later visitors, as the server now runs: an annotator's typed /label.
        page = open_signed_out(browser, base + "/label")
        assert_sign_in_form_only(page)
        sign_in_here(page, "annotator")
        page.wait_for_selector(".lf-title")  # Label, an annotator's main page, at its address
        assert page.url == base + "/label"

        # A page the role may not open: the sign-in form, then the role's own main page, at
        # its own address, and why.
        page = open_signed_out(browser, base + "/monitor")
        assert_sign_in_form_only(page)
        sign_in_here(page, "annotator")
        page.get_by_text("Monitor is not open to the annotator role.").wait_for()
        page.wait_for_selector(".lf-title")
        settle(page)
        assert page.get_by_role("heading", name="Monitor").count() == 0
        assert page.url == base + "/label"
