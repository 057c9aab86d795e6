"""End to end in headless Chromium: the lead opens the flagged works on Adjudicate with F (or
the Show menu beside the campaign menu) and reads the flag notes."""

from __future__ import annotations

from pathlib import Path

import pytest

from labeling.schema import load_schema
from labeling.settings import DEFAULT_SCHEMA
from tests.browser import CHROMIUM, chromium, settle, streamlit_server
from tests.e2e.test_e2e_deep_link import open_signed_out, sign_in_here
from tests.label_page import build_label_db
from tests.pages.test_lead_pages import label_pair

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
need_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"
)


@need_chromium
def test_f_and_the_show_menu_switch_to_the_flagged_works(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'flags.db'}"
    engine = build_label_db(url, tmp_path, n=4)
    schema = load_schema(DEFAULT_SCHEMA)
    disputed = label_pair(engine, schema, "top", (0, 1))
    flagged = label_pair(engine, schema, "top", (2, 2), note="title is odd")  # validated
    engine.dispose()
    with streamlit_server(url, tmp_path / "streamlit.log") as base, chromium() as browser:
        page = open_signed_out(browser, base + "/adjudicate")
        sign_in_here(page, "lead")
        where = page.locator(".af-where")
        where.wait_for()
        settle(page)
        assert f"Disputed work 1 of 1 · {disputed}" in where.inner_text()
        page.keyboard.press("f")
        page.get_by_text(f"Flagged work 1 of 1 · {flagged}").wait_for()
        assert page.locator(".af-flag").all_inner_texts() == [
            "Flagged by annotator: title is odd",
            "Flagged by annotator2: title is odd",
        ]
        assert "reopen it below" in page.locator(".af-note:not(.af-flag)").inner_text()
        settle(page)
        page.locator("select.af-kind").select_option("disputed")
        page.get_by_text(f"Disputed work 1 of 1 · {disputed}").wait_for()
