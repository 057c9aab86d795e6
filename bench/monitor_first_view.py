"""First view of the Monitor in headless Chromium: navigation -> the four top cards filled.

For each of --starts fresh app starts (a new `streamlit run` on a fresh copy of the demo
database, so no cache of any kind is warm), a lead opens /monitor, signs in there, and the
Monitor is the first page the server runs (every import cold). Measured from the sign-in's
Enter, in the test driver:

- cards: until the four cards at the top (How far are we? Who needs attention? Which questions
  are unreliable? How good are the teachers?) each show their content (a table, a metric or
  the sentence that stands for an empty one) and none of them shows a spinner;
- page: until the whole script run is over (the tabs filled too).

With --via-nav the lead signs in, opens Campaigns, and the time runs from the click on
"Monitor" (since the lead's landing page became the Monitor, the Monitor has then run once).

The demo database is the bundled frame (`labeling demo`) with --rounds rounds of labels by
the two demo annotators on demo-top (k=2), so that the statistics have something to rest on
(0: the bare demo). --app DIR runs the app from another checkout (a git worktree of an older
commit) so that old and new are measured side by side in one run:

    .venv/bin/python bench/monitor_first_view.py --starts 3 [--rounds 20] [--app /tmp/old]

Target (issue 50): median of 3 starts under 3 s for the cards on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))

from tests.browser import IDLE, chromium_page  # noqa: E402
from tests.servers import free_port, wait_healthy  # noqa: E402

HEADINGS = (
    "How far are we?",
    "Who needs attention?",
    "Which questions are unreliable?",
    "How good are the teachers?",
)
# Each card is the block around its heading: filled when it holds a table, a metric, a
# progress bar or a caption, and no spinner.
CARDS_FILLED = """(heads) => heads.every(h => {
  const el = [...document.querySelectorAll('h5')].find(e => e.textContent.trim() === h);
  if (!el) return false;
  const card = el.closest('[data-testid="stVerticalBlock"]');
  if (!card || card.querySelector('[data-testid="stSpinner"]')) return false;
  return !!card.querySelector('[data-testid="stDataFrame"] canvas, [data-testid="stMetric"],'
    + ' [data-testid="stProgress"], [data-testid="stCaptionContainer"]');
})"""


SHOTS: Path | None = None  # --shots: where each start's screenshot goes
DIRECT = True  # open /monitor, sign in there, time from the sign-in's Enter (--via-nav: not)


def demo_with_labels(tmp: Path, rounds: int) -> Path:
    """The demo database, with `rounds` rounds of labels by the demo annotators on demo-top."""
    from labeling.database import get_engine
    from tests.e2e.test_e2e_label import demo_db
    from tests.pages.test_monitor_page import label_round

    url = demo_db(tmp)
    if rounds:
        engine = get_engine(url)
        label_round(engine, "demo-top", ["annotator", "annotator2"], rounds, odd={"annotator2"})
        engine.dispose()
    return tmp / "demo.db"


@contextmanager
def server(app: Path, db: Path, log: Path) -> Iterator[str]:
    """`streamlit run app.py` from the checkout `app` on db (offline); yields its URL."""
    port = free_port()
    env = dict(
        os.environ,
        LABELING_DB_URL=f"sqlite:///{db}",
        LABELING_OPENALEX_OFFLINE="true",
        PYTHONPATH=str(app),  # that checkout's labeling/ and db/, not the installed one
    )
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        "app.py",
        "--server.headless",
        "true",
        "--server.address",
        "127.0.0.1",
        "--server.port",
        str(port),
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=app, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base, proc, log)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def one_start(app: Path, template: Path, tmp: Path, i: int) -> dict[str, float]:
    """One fresh app start: sign in as lead, click Monitor, time the cards and the page."""
    db = tmp / f"start{i}.db"
    shutil.copy(template, db)
    with server(app, db, tmp / f"server{i}.log") as base, chromium_page(1366, 768) as page:
        page.set_default_timeout(60_000)
        if DIRECT:  # the Monitor's address typed before signing in: the sign-in opens it
            page.goto(base + "/monitor")
            page.get_by_role("textbox", name="Name").fill("lead")
            page.get_by_role("textbox", name="Password").fill("demo")
            t0 = time.perf_counter()
            page.keyboard.press("Enter")
        else:
            page.goto(base + "/")
            page.get_by_role("textbox", name="Name").fill("lead")
            page.get_by_role("textbox", name="Password").fill("demo")
            page.keyboard.press("Enter")
            # A lead may land on the Monitor itself: go to Campaigns first, then come back.
            page.get_by_role("link", name="Campaigns").click()
            page.get_by_role("heading", name="Campaigns").first.wait_for()
            page.wait_for_selector(IDLE, state="attached")
            t0 = time.perf_counter()
            page.get_by_role("link", name="Monitor").click()
        page.wait_for_function(CARDS_FILLED, arg=list(HEADINGS), polling="raf")
        cards = time.perf_counter() - t0
        page.wait_for_selector(IDLE, state="attached")
        page.wait_for_function(
            '!document.querySelector(\'[data-testid="stSkeleton"], [data-testid="stSpinner"]\')'
        )
        whole = time.perf_counter() - t0
        if SHOTS:
            page.screenshot(path=str(SHOTS / f"first_view{i}.png"), full_page=True)
    return {"cards": cards, "page": whole}


def main() -> None:
    """Parse arguments, run the starts for each app, print medians."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--starts", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--app", type=Path, action="append", help="checkouts to compare")
    ap.add_argument("--json", type=Path)
    ap.add_argument(
        "--via-nav", action="store_true", help="land on Campaigns first, then click Monitor"
    )
    ap.add_argument("--shots", type=Path, help="keep a screenshot of each first view here")
    args = ap.parse_args()
    global SHOTS, DIRECT
    SHOTS, DIRECT = args.shots, not args.via_nav
    apps = args.app or [ROOT]
    out: dict[str, Any] = {
        "load_before": os.getloadavg(),
        "rounds": args.rounds,
        "via_nav": args.via_nav,
        "apps": {},
    }
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        template = demo_with_labels(tmp, args.rounds)
        runs: dict[str, list[dict[str, float]]] = {str(a): [] for a in apps}
        for i in range(args.starts):  # interleaved: old and new meet the same load
            for a in apps:
                runs[str(a)].append(
                    one_start(a.resolve(), template, tmp, len(runs[str(a)]) + i * 10)
                )
        for a, rs in runs.items():
            summary = {k: statistics.median(r[k] for r in rs) for k in ("cards", "page")}
            out["apps"][a] = {"runs": rs, "median": summary}
            print(
                f"{a}: cards {summary['cards']:.2f} s, page {summary['page']:.2f} s (median of "
                f"{len(rs)}; each: "
                + ", ".join(f"{r['cards']:.2f}/{r['page']:.2f}" for r in rs)
                + ")"
            )
    out["load_after"] = os.getloadavg()
    print(f"load average before {out['load_before']}, after {out['load_after']}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
