"""End to end in headless Chromium: the Monitor's charts render with marks (screenshots kept),
and every card at the top shows every column of its tables, without a horizontal scrollbar."""

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


# Every card at the top (its container's key starts with mon_card_): each table's scrolling
# area and each download button's label, with how wide they are and how wide they would be.
CARDS_JS = """() => [...document.querySelectorAll('[class*="st-key-mon_card_"]')].map(card => ({
  card: [...card.classList].find(c => c.startsWith('st-key-mon_card_')),
  tables: [...card.querySelectorAll('[data-testid="stDataFrame"]')].map(t => {
    const s = t.querySelector('.dvn-scroller') || t;
    return {scroll: s.scrollWidth, client: s.clientWidth};
  }),
  buttons: [...card.querySelectorAll('[data-testid="stDownloadButton"] button')].map(b => {
    const p = b.querySelector('p') || b;
    return {text: b.innerText.trim(), scroll: p.scrollWidth, client: p.clientWidth};
  }),
}))"""
BUTTONS_JS = """(panel) => [...panel.querySelectorAll('[data-testid="stDownloadButton"] button')]
  .map(b => { const p = b.querySelector('p') || b;
              return {text: b.innerText.trim(), scroll: p.scrollWidth, client: p.clientWidth}; })"""


def crowd_db(tmp_path: Path) -> str:
    """Six annotators, three labels a work, one of them careless and fast: every card fills."""
    url = f"sqlite:///{tmp_path / 'e2e_monitor.db'}"
    engine = build_label_db(url, tmp_path, n=24)
    create_campaign(engine, name="crowd", strategy="score_opus", overlap=3)
    names = ["annotator", "annotator2"] + [f"extra{i}" for i in range(4)]
    for name in names[2:]:
        add_user(engine, name)
    label_round(engine, "crowd", names, 6, odd={"extra3"})
    engine.dispose()
    return url


def open_monitor(page: Any, base: str) -> None:
    """Sign in as the lead and open the Monitor, its run over."""
    page.goto(base + "/")
    page.get_by_role("textbox", name="Name").fill("lead")
    page.get_by_role("textbox", name="Password").fill(PASSWORD)
    page.keyboard.press("Enter")
    page.get_by_role("link", name="Monitor").click()
    page.get_by_text("How far are we?").wait_for()
    page.wait_for_selector(IDLE, state="attached")
    settle(page)


@pytest.mark.slow  # 18 s on a quiet machine, over 20 s under load
def test_monitor_cards_show_every_column_at_1366(tmp_path: Path) -> None:
    """Each top card's tables fit without sideways scrolling and no button label is cut."""
    url = crowd_db(tmp_path)
    with streamlit_server(url, tmp_path / "server.log") as base, chromium_page(1366, 768) as page:
        open_monitor(page, base)
        page.locator('[data-testid="stDataFrame"] canvas').first.wait_for()
        page.wait_for_timeout(500)  # the grid sizes its columns after the first paint
        cards = page.evaluate(CARDS_JS)
        page.screenshot(path=str(tmp_path / "monitor_cards.png"), full_page=True)
        panel = open_tab(page, "Annotators")
        tab_buttons = panel.evaluate(BUTTONS_JS)
    assert [c["card"] for c in cards] == [
        "st-key-mon_card_progress",
        "st-key-mon_card_attention",
        "st-key-mon_card_reliability",
        "st-key-mon_card_teachers",
    ]
    tables = [t for c in cards for t in c["tables"]]
    assert len(tables) >= 3, cards  # attention, reliability and teachers have rows here
    for c in cards:
        for t in c["tables"]:
            assert t["scroll"] <= t["client"], (c["card"], t)
        for b in c["buttons"]:
            assert b["text"].endswith("CSV") and b["scroll"] <= b["client"], (c["card"], b)
    assert {b["text"][-3:] for b in tab_buttons} >= {"PNG", "SVG", "CSV"}
    for b in tab_buttons:
        assert b["scroll"] <= b["client"] and "…" not in b["text"], b


@pytest.mark.slow  # over 20 s (pytest --durations)
def test_monitor_charts_render(tmp_path: Path) -> None:
    url = crowd_db(tmp_path)
    with streamlit_server(url, tmp_path / "server.log") as base, chromium_page(1400, 1200) as page:
        open_monitor(page, base)
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
