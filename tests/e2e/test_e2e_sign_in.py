"""End to end in headless Chromium: the sign-in page names the product and takes the keyboard.

The cursor is in the Name field as the page appears (no Tab to find it), so typing the name,
Tab, the password and Enter signs in; a typed page address gets the same.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import CHROMIUM, chromium_page, settle, streamlit_server
from tests.label_page import PASSWORD, build_label_db

pytestmark = pytest.mark.e2e
need_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"
)

FOCUSED = "document.activeElement && document.activeElement.getAttribute('aria-label')"


@pytest.mark.slow  # about 18 s alone, over 20 s on a busy machine
@need_chromium
def test_the_name_field_has_the_cursor_and_the_product_is_named(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sign_in.db'}"
    build_label_db(url, tmp_path, n=2).dispose()
    with streamlit_server(url, tmp_path / "streamlit.log") as base, chromium_page() as page:
        for address in (base + "/", base + "/export"):
            page.goto(address)
            page.get_by_role("heading", name="Sign in").wait_for()
            settle(page)
            assert page.get_by_text("Human validation").first.is_visible()
            page.wait_for_function(f"{FOCUSED} === 'Name'", timeout=5_000)
        # No click anywhere: the keys alone sign in (the exporter lands on Export).
        page.keyboard.type("exporter")
        page.keyboard.press("Tab")
        page.keyboard.type(PASSWORD)
        page.keyboard.press("Enter")
        page.get_by_role("heading", name="Export").wait_for()
        settle(page)
        assert page.url == base + "/export"
