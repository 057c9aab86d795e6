"""Per-key figures of the label page before issue 11 (st.button shortcuts, one rerun per key).

For the record in bench/RESULTS.md: it imports that version's test helpers, so it runs from a
checkout of commit 8d19438 (the last commit before the client-side label form), and run from
this checkout it stops at once with a message saying so:

    git archive 8d19438 | tar -x -C /tmp/old && cp bench/old_label_keys.py /tmp/old/
    cd /tmp/old && /path/to/.venv/bin/python old_label_keys.py [works]

For each key (one option per question, ArrowDown after the multi-label one) it waits for the
key's effect as that version's browser test did, then reads the time from the keydown to now
in the page, and counts the websocket messages the page sent for the key.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from labeling.schema import load_schema  # noqa: E402
from labeling.settings import DEFAULT_SCHEMA  # noqa: E402

try:
    from tests.test_e2e_label import (  # noqa: E402 - the old version's helpers
        DWELL,
        chromium_page,
        demo_db,
        settle,
        sign_in,
        streamlit_server,
        submit_by_keyboard,
    )
except ImportError as exc:  # this checkout: the helpers of the old page are gone
    raise SystemExit(
        f"bench/old_label_keys.py runs only from a checkout of commit 8d19438, copied to its "
        f"root (see its docstring); here: {exc}"
    ) from None


def main(works: int = 10) -> None:
    """Label `works` works key by key; print the per-key median, max and messages."""
    questions = list(load_schema(DEFAULT_SCHEMA).questions)
    with tempfile.TemporaryDirectory() as tmp:
        url = demo_db(Path(tmp))
        with streamlit_server(url, Path(tmp) / "s.log") as base, chromium_page(1366, 768) as page:
            sent: list[int] = []
            page.on("websocket", lambda ws: ws.on("framesent", lambda _: sent.append(1)))
            sign_in(page, base, "annotator", "demo")
            page.evaluate(
                "window.addEventListener('keydown', e => { window.__t0 = e.timeStamp }, true)"
            )
            lat, msgs = [], []
            for _ in range(works):
                shown = time.monotonic()
                for qi, q in enumerate(questions):
                    li = 1 if q.kind == "binary" else 0
                    chosen = f'.st-key-opt_{qi}_{li} [data-testid*="primary"]'
                    following = f".st-key-qactive .st-key-goto_{qi + 1}"
                    last = qi + 1 == len(questions)
                    steps = [(str(li + 1), chosen if q.kind == "multi" or last else following)]
                    if q.kind == "multi" and not last:
                        steps.append(("ArrowDown", following))
                    for key, selector in steps:
                        before = len(sent)
                        page.keyboard.press(key)
                        page.wait_for_selector(selector, state="attached")
                        lat.append(page.evaluate("performance.now() - window.__t0"))
                        settle(page)
                        msgs.append(len(sent) - before)
                time.sleep(max(0.0, DWELL - (time.monotonic() - shown)))
                submit_by_keyboard(page)
    print(
        f"old page, {len(lat)} keys: key -> effect on screen median "
        f"{statistics.median(lat):.0f} ms, max {max(lat):.0f} ms; websocket messages per key: "
        f"median {statistics.median(msgs)}, total {sum(msgs)}"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
