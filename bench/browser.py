"""Browser latency: from pressing submit to the next work's title and abstract on screen.

Runs `streamlit run app.py` on a fresh demo database (offline, every abstract cached: a warm
cache), signs in as the demo annotator in headless Chromium, labels works with the keyboard
and times each submit in the page itself (performance.now() from the key press to the first
animation frame where the new title and the new abstract are both visible).

    .venv/bin/python bench/browser.py [--works 50] [--warmup 3] [--json out.json]

Target (issue 3): p95 under 300 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Run as a script, bench/ is sys.path[0]; bench/queue.py would then shadow the stdlib queue.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))

from tests.test_e2e_label import (  # noqa: E402
    CHROMIUM,
    chromium_page,
    demo_db,
    label_items,
    sign_in,
    streamlit_server,
)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), linear interpolation between closest ranks."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def run(works: int, warmup: int) -> dict[str, float | int]:
    """Label warmup + works items and return the latency figures of the measured ones."""
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"{CHROMIUM} is missing (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="bench-browser-") as tmp:
        url = demo_db(Path(tmp))
        with streamlit_server(url, Path(tmp) / "streamlit.log") as base, chromium_page() as page:
            sign_in(page, base, "annotator", "demo")
            label_items(page, warmup)
            started = time.monotonic()
            titles, _, times = label_items(page, works)
            wall = time.monotonic() - started
    if len(set(titles)) != len(titles):
        raise SystemExit("a work was shown twice: the measurement is not valid")
    ms = [t * 1000 for t in times]
    return {
        "works": len(ms), "median_ms": statistics.median(ms), "p95_ms": percentile(ms, 95),
        "min_ms": min(ms), "max_ms": max(ms), "mean_ms": statistics.fmean(ms),
        "seconds_per_work_with_keyboard": wall / len(ms),
    }


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--works", type=int, default=50, help="works measured (default 50)")
    parser.add_argument("--warmup", type=int, default=3, help="works labelled first, unmeasured")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    figures = run(args.works, args.warmup)
    print(f"submit -> next title and abstract visible, {figures['works']} works, warm cache:")
    print(f"  median {figures['median_ms']:.0f} ms   p95 {figures['p95_ms']:.0f} ms   "
          f"min {figures['min_ms']:.0f} ms   max {figures['max_ms']:.0f} ms   "
          f"(target p95 < 300 ms: {'met' if figures['p95_ms'] < 300 else 'NOT met'})")
    print(f"  whole item by keyboard (7 keys + submit): "
          f"{figures['seconds_per_work_with_keyboard']:.2f} s per work")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
