"""End to end in headless Chromium: an admin uploads a frame; each outcome shows in its colour.

AppTest cannot drive st.file_uploader, so the page's own rendering of an upload's result is
checked here: stored works in green (success), rejected lines as a warning with their list.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.browser import IDLE, chromium_page, settle, streamlit_server
from tests.label_page import PASSWORD, build_label_db, seed_records

pytestmark = pytest.mark.e2e

ALERT = '[data-testid="stAlertContent{kind}"]'


def frame_with_two_bad_lines(path: Path) -> Path:
    """Seven lines: five new seed-like works, a line that is not JSON and one without an id."""
    good = seed_records(5)
    for i, rec in enumerate(good):
        rec["id"] = f"W{8000001 + i}"
    lines = [json.dumps(r) for r in good[:2]]
    lines.append("{not json")
    lines += [json.dumps(r) for r in good[2:4]]
    lines.append(json.dumps({"title": "no id"}))
    lines.append(json.dumps(good[4]))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def alerts(panel: Any, kind: str) -> list[str]:
    """The text of every alert of one kind (Success, Warning, Info, Error) in a tab's panel."""
    return panel.locator(ALERT.format(kind=kind)).all_inner_texts()


def test_upload_shows_stored_in_green_and_rejected_lines_as_a_warning(tmp_path: Path) -> None:
    pytest.importorskip("playwright")
    url = f"sqlite:///{tmp_path / 'upload.db'}"
    build_label_db(url, tmp_path, n=4).dispose()
    frame = frame_with_two_bad_lines(tmp_path / "upload.jsonl")
    with streamlit_server(url, tmp_path / "server.log") as base, chromium_page() as page:
        page.goto(base + "/")
        page.get_by_role("textbox", name="Name").fill("admin")
        page.get_by_role("textbox", name="Password").fill(PASSWORD)
        page.keyboard.press("Enter")
        page.get_by_role("tab", name="Import a frame").click()
        page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(frame))
        page.get_by_text("upload.jsonl").wait_for()
        page.get_by_role("button", name="Import").click()
        page.locator(ALERT.format(kind="Success")).first.wait_for()
        page.wait_for_selector(IDLE, state="attached")
        settle(page)
        panel = page.locator('[role="tabpanel"]:visible')
        success, warning = alerts(panel, "Success"), alerts(panel, "Warning")
        info, error = alerts(panel, "Info"), alerts(panel, "Error")
        tables = panel.locator('[data-testid="stDataFrame"]').count()
        page.screenshot(path=str(tmp_path / "upload.png"))
        # What to do next, with the way there: a campaign queues the new works.
        said_next = panel.get_by_text("Next: create a campaign").count()
        panel.get_by_role("link", name="Create a campaign").click()
        page.get_by_role("heading", name="Campaigns").wait_for()
        at_campaigns = page.url
    assert success == ["5 works stored: 5 inserted, 0 updated, 0 unchanged."]
    assert warning == ["2 line(s) rejected, not imported:"]
    assert error == []  # a partly rejected upload is not shown in red
    # the seed record's genre_gemma is not its arg-max: reported, as information
    assert info == ["5 inconsistency warning(s), imported anyway:"]
    assert tables == 2  # the rejected lines' list, and the warnings' list
    assert said_next == 1 and at_campaigns == base + "/campaigns"
