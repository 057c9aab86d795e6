"""Hostile record text, names and notes end to end in headless Chromium, on every page.

One database holds script tags, event-handler HTML, javascript: links, remote Markdown images,
Markdown and LaTeX markup, spreadsheet formulas, U+2028, a right-to-left override and a
200 KB title in works, abstracts, DOIs, notes, campaign names and user names. Each role
signs in (under a hostile name) and opens every page it may: nothing runs, nothing is
injected, nothing is fetched (no request leaves the machine at all), and the text shows
literally. The CSV export neutralises the
formulas.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from labeling.auth.users import add_user
from labeling.export.gold_set import ExportFilters, export_gold
from labeling.frames.demo import seed_abstract_cache
from labeling.frames.importer import import_frame
from labeling.review.campaigns import create_campaign
from labeling.schema import Schema, load_schema
from labeling.settings import DEFAULT_SCHEMA
from tests.browser import chromium_page, settle, streamlit_server
from tests.e2e.test_e2e_label import need_chromium
from tests.factories import answers_for, label_next
from tests.pages.test_label_page import seed_records

pytestmark = pytest.mark.e2e

SCRIPT = "<script>window.__pwned=1</script>"
IMG = '<img src=x onerror="window.__pwned=1">'
SVG = "<svg onload=window.__pwned=1>"
JS_LINK = "[link](javascript:window.__pwned=1)"
REMOTE = "![img](http://127.0.0.1:1/x.png)"
FORMULAS = ['=HYPERLINK("http://evil")', "+cmd|' /C calc'!A0", "@SUM(1)", "-2+3+cmd|' /C x'!A0"]
PAYLOADS = [
    SCRIPT,
    IMG,
    SVG,
    JS_LINK,
    REMOTE,
    "**bold**",
    "$x$",
    *FORMULAS[:3],
    "line\u2028separator",
    "\u202eevil",
]
HOSTILE = " | ".join(PAYLOADS)
BIG = (HOSTILE + " ") * (200_000 // (len(HOSTILE) + 1) + 1)  # a 200 KB title
BIG = BIG[:200_000]
VENUE = "VENUE **bold** $x$ <b>b</b> " + REMOTE
PASSWORD = "pw-hostile"
# The user each role signs in as: a hostile name (<= 128 characters, typeable).
NAMES = {"annotator": IMG, "lead": REMOTE + " **lead**", "exporter": JS_LINK, "admin": SVG}
OTHERS = [SCRIPT, FORMULAS[0]]  # two more annotators whose labels make a dispute
CAMPAIGNS = [SCRIPT + " $x$", REMOTE + " disputes"]
PAGES = {  # role -> pages it may open (besides home), each with the selector it waits for
    "annotator": ["Label"],
    "lead": ["Label", "Campaigns", "Adjudicate", "Monitor", "Export"],
    "exporter": ["Export"],
    "admin": ["Campaigns", "Export", "Admin"],
}
WAIT = {
    "Home": "h1",
    "Label": ".lf-title",
    "Campaigns": "h1",
    "Monitor": "h1",
    "Adjudicate": ".af .lf-title",
    "Export": "h1",
    "Admin": "h1",
}

INJECTED = """() => {
    // Elements a payload would create: event-handler attributes anywhere, javascript: links,
    // and script/img/svg/iframe/object/embed whose attributes (or script text) carry a marker.
    const markers = ['__pwned', '127.0.0.1:1/', 'evil'];
    const bad = [];
    for (const e of document.querySelectorAll('*')) {
        const attrs = [...e.attributes];
        const tag = e.tagName.toLowerCase();
        if (attrs.some(a => a.name.toLowerCase().startsWith('on'))) bad.push(e.outerHTML);
        if (tag === 'a' && (e.getAttribute('href') || '').trim().toLowerCase()
                .startsWith('javascript:')) bad.push(e.outerHTML);
        if (['script', 'img', 'svg', 'iframe', 'object', 'embed', 'image'].includes(tag)) {
            const own = attrs.map(a => a.name + '=' + a.value).join(' ')
                + (tag === 'script' ? e.textContent : '');
            if (markers.some(m => own.includes(m))) bad.push(e.outerHTML);
        }
    }
    return bad.map(h => h.slice(0, 300));
}"""


def label(
    engine: Engine, schema: Schema, name: str, campaign: str, variant: int, *, skip: bool = False
) -> str:
    """`name` claims their next work of a campaign and labels (or skips) it with HOSTILE notes."""
    return label_next(engine, schema, campaign, name, {} if skip else answers_for(schema, variant),
                      skipped=skip, skip_reason="other" if skip else None, flagged=True,
                      note=HOSTILE, time_on_item_ms=900)  # fmt: skip


def hostile_db(tmp: Path) -> tuple[str, dict[str, Any]]:
    """The hostile database: six works, hostile users, two campaigns, a dispute, skips."""
    from labeling.database import init_db

    url = f"sqlite:///{tmp / 'hostile.db'}"
    engine = init_db(url)
    schema = load_schema(DEFAULT_SCHEMA)
    records = seed_records(6)
    titles = [BIG, *FORMULAS, HOSTILE]
    for rec, title in zip(records, titles, strict=True):
        rec.update(
            title=title,
            venue=VENUE,
            doi="10.1234/" + SCRIPT + JS_LINK,
            keywords="; ".join(PAYLOADS[:7]),
            funders=IMG,
            has_abstract=True,
        )
        rec["machine_scores"]["note"] = HOSTILE
    frame = tmp / "frame.jsonl"
    frame.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    import_frame(engine, frame, schema, progress=False)
    seed_abstract_cache(engine, {r["id"]: "Abstract: " + HOSTILE for r in records})
    for role, name in NAMES.items():
        add_user(engine, name, role, PASSWORD)
    for name in OTHERS:
        add_user(engine, name, "annotator", PASSWORD)
    create_campaign(engine, name=CAMPAIGNS[0], strategy="score_opus", overlap=1)
    create_campaign(engine, name=CAMPAIGNS[1], strategy="score_opus", overlap=2)
    # The first (highest-scored) work: a dispute with hostile notes; the second validated;
    # the third skipped by one annotator (hostile note).
    disputed = label(engine, schema, OTHERS[0], CAMPAIGNS[1], 0)
    label(engine, schema, OTHERS[1], CAMPAIGNS[1], 1)
    validated = label(engine, schema, OTHERS[0], CAMPAIGNS[1], 0)
    label(engine, schema, OTHERS[1], CAMPAIGNS[1], 0)
    label(engine, schema, OTHERS[0], CAMPAIGNS[1], 0, skip=True)
    engine.dispose()
    return url, {"disputed": disputed, "validated": validated, "titles": titles, "records": records}


def sign_in_as(page: Any, base: str, name: str) -> None:
    """Sign in with the login form and wait for the role's main page."""
    page.goto(base + "/")
    page.get_by_role("textbox", name="Name").fill(name)
    page.get_by_role("textbox", name="Password").fill(PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_selector('[data-testid="stSidebar"] button:has-text("Sign out")')
    settle(page)


def open_page(page: Any, title: str) -> None:
    """Open a page from the sidebar navigation (same browser session) and wait for it."""
    page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=title).click()
    page.wait_for_selector(WAIT[title])
    if title != "Label":
        page.wait_for_selector(f'h1:has-text("{title if title != "Home" else "Human"}")')
    settle(page)
    if title in ("Label", "Adjudicate"):  # the fold's content is built when it is opened
        page.locator(".lf-details summary").first.click()
        page.wait_for_selector(".lf-details-body")


def text_of(page: Any, selector: str) -> str:
    """The DOM text (textContent: U+2028 and bidi controls kept) of every match, joined.

    Input values count as shown text too: a selectbox shows its choice in an input.
    """
    return "\n".join(
        page.eval_on_selector_all(
            selector,
            """els => els.map(e => e.textContent
        + [...e.querySelectorAll('input')].map(i => '\\n' + i.value).join(''))""",
        )
    )


def literal_checks(page: Any, title: str, db: dict[str, Any], name: str, role: str) -> list[str]:
    """Where each page shows hostile text, it shows it literally; returns what does not."""
    problems = []
    sidebar = text_of(page, '[data-testid="stSidebarUserContent"]')
    if f"Signed in as {name} ({role})" not in sidebar:
        problems.append(f"sidebar does not show the user name literally: {sidebar[:300]!r}")
    main = text_of(page, '[data-testid="stMain"]')
    expect: list[str] = []
    if title == "Label":
        shown = text_of(page, ".lf-title")
        if shown not in db["titles"]:
            problems.append(f"Label: the title is not shown literally: {shown[:200]!r}")
        expect += ["Abstract: " + HOSTILE, VENUE, CAMPAIGNS[0], "it never asserts a category"]
    elif title == "Adjudicate":
        if text_of(page, ".af .lf-title") != db["titles"][0]:
            problems.append("Adjudicate: the 200 KB title is not shown literally")
        expect += ["Abstract: " + HOSTILE, VENUE, *OTHERS]  # annotator names, side by side
    elif title in ("Campaigns", "Monitor"):
        expect += [CAMPAIGNS[1]]  # the campaign picked first (newest; busiest)
    elif title == "Admin":
        expect += [REMOTE]  # the first user name in the "Change a user" picker
    for text in expect:
        if text not in main:
            problems.append(f"{title}: {text[:80]!r} is not shown literally")
    return problems


@pytest.mark.slow  # over 20 s (pytest --durations)
@need_chromium
def test_hostile_content_is_inert_on_every_page(tmp_path: Path) -> None:
    """Every role, every page it may open: no script runs, nothing injected or fetched."""
    pytest.importorskip("playwright")
    url, db = hostile_db(tmp_path)
    problems: list[str] = []
    with streamlit_server(url, tmp_path / "streamlit.log") as base, chromium_page() as page:
        requests: list[str] = []
        dialogs: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        visited = []
        for role, titles in PAGES.items():
            name = NAMES[role]
            sign_in_as(page, base, name)
            for title in ["Home", *titles]:
                open_page(page, title)
                visited.append((role, title))
                where = f"{role}/{title}"
                if page.evaluate("typeof window.__pwned") != "undefined":
                    problems.append(f"{where}: window.__pwned was set")
                problems += [f"{where}: injected {html}" for html in page.evaluate(INJECTED)]
                problems += literal_checks(page, title, db, name, role)
                errors = text_of(page, '[data-testid="stException"]')
                if errors:
                    problems.append(f"{where}: exception on the page: {errors[:300]}")
            page.locator('[data-testid="stSidebar"] button:has-text("Sign out")').click()
            page.wait_for_selector('h1:has-text("Sign in")')
        fetched = [u for u in requests if "127.0.0.1:1/" in u or "evil" in u]
        problems += [f"request to {u}" for u in fetched]
        # Offline: nothing but the app's own server is ever asked (no font or icon host).
        elsewhere = sorted({u for u in requests if not u.startswith((base, "data:", "blob:"))})
        problems += [f"request leaves the machine: {u}" for u in elsewhere]
        problems += [f"dialog: {d}" for d in dialogs]
    assert len(visited) == 4 + sum(len(t) for t in PAGES.values())
    assert problems == [], "\n".join(p[:400] for p in problems)


def test_csv_export_neutralises_formulas(tmp_path: Path) -> None:
    """Every CSV cell that starts with =, +, - or @ in the data gets a leading apostrophe."""
    url, db = hostile_db(tmp_path)
    from labeling.database import get_engine

    engine = get_engine(url)
    schema = load_schema(DEFAULT_SCHEMA)
    out = tmp_path / "gold.csv"
    result = export_gold(
        engine, schema, out, fmt="csv", filters=ExportFilters(status="all"), long=True
    )
    files = [out] + ([Path(result.long_path)] if result.long_path else [])
    cells: list[str] = []
    csv.field_size_limit(1_000_000)  # the 200 KB title is one cell
    for path in files:
        with path.open(newline="", encoding="utf-8") as fh:
            for row in csv.reader(fh):
                cells += row
    starts = tuple("=+-@")

    def number(cell: str) -> bool:
        try:
            float(cell)
        except ValueError:
            return False
        return True

    live = [c for c in cells if c.startswith(starts) and not number(c)]
    assert live == [], live[:5]
    for formula in FORMULAS:  # the titles, neutralised, not dropped
        assert "'" + formula in cells, formula
    # Annotator names in the long file (a formula name) and notes are neutralised as well.
    assert any(c == "'" + OTHERS[1] for c in cells) or result.long_path is None
