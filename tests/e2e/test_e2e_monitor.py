"""End to end in headless Chromium: the Monitor's charts render with marks (screenshots kept)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from labeling.review.campaigns import create_campaign
from tests.browser import IDLE, chromium_page, settle, streamlit_server
from tests.factories import add_user
from tests.label_page import PASSWORD, build_label_db
from tests.pages.test_monitor_page import label_round

pytestmark = pytest.mark.e2e

# Painted pixels of every chart in a panel: SVG marks, or canvas pixels that are not blank.
MARKS_JS = """(panel) => [...panel.querySelectorAll('[data-testid="stVegaLiteChart"]')].map(el => {
  const svg = el.querySelectorAll('svg .mark-rect path, svg .mark-line path, svg .mark-symbol path,'
                                  + ' svg .mark-rule line, svg .mark-rect rect').length;
  let painted = 0;
  for (const c of el.querySelectorAll('canvas')) {
    const ctx = c.getContext('2d');
    if (!ctx || !c.width || !c.height) continue;
    const data = ctx.getImageData(0, 0, c.width, c.height).data;
    for (let i = 3; i < data.length; i += 16) if (data[i] > 0) painted++;
  }
  return {svg, painted, width: el.getBoundingClientRect().width};
})"""


def open_tab(page: Any, name: str) -> Any:
    """Click a tab of the Monitor and return its visible panel."""
    page.get_by_role("tab", name=name).click()
    panel = page.locator('[role="tabpanel"]:visible')
    panel.locator('[data-testid="stVegaLiteChart"]').first.wait_for()
    page.wait_for_timeout(800)  # vega draws after the element exists
    return panel


def test_monitor_charts_render(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'e2e_monitor.db'}"
    engine = build_label_db(url, tmp_path, n=24)
    create_campaign(engine, name="crowd", strategy="score_opus", overlap=3)
    names = ["annotator", "annotator2"] + [f"extra{i}" for i in range(4)]
    for name in names[2:]:
        add_user(engine, name)
    label_round(engine, "crowd", names, 6, odd={"extra3"})
    engine.dispose()
    with streamlit_server(url, tmp_path / "server.log") as base, chromium_page(1400, 1200) as page:
        page.goto(base + "/")
        page.get_by_role("textbox", name="Name").fill("lead")
        page.get_by_role("textbox", name="Password").fill(PASSWORD)
        page.keyboard.press("Enter")
        page.get_by_role("link", name="Monitor").click()
        page.get_by_text("How far are we?").wait_for()
        page.wait_for_selector(IDLE, state="attached")
        settle(page)
        seen = {}
        for tab in ("Progress", "Annotators", "Agreement"):
            panel = open_tab(page, tab)
            seen[tab] = panel.evaluate(MARKS_JS)
            panel.screenshot(path=str(tmp_path / f"monitor_{tab.lower()}.png"))
        for tab, charts in seen.items():
            assert charts, tab
            for chart in charts:
                assert chart["width"] > 50, (tab, chart)
                assert chart["svg"] > 0 or chart["painted"] > 200, (tab, chart)
        assert len(seen["Annotators"]) >= 2  # throughput and time per work
        assert (tmp_path / "monitor_agreement.png").stat().st_size > 10_000
