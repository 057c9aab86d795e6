"""The Monitor shows no interval that leaves out its estimate: the cell says it was left out."""

from __future__ import annotations

import pandas as pd

from labeling.reports.monitor.view import OUTSIDE, table


def test_an_interval_beside_its_estimate_is_left_out_and_said() -> None:
    raw = pd.DataFrame(
        {
            "question": ["study_design", "genre", "domain"],
            "alpha": [-0.09, 0.5, None],
            "alpha_lo": [-0.28, 0.3, None],
            "alpha_hi": [-0.10, 0.7, None],
        }
    )
    t = table("q", raw, "none", ("alpha [95% CI]", "alpha", "alpha_lo", "alpha_hi"))
    shown = t.shown.set_index("question")["alpha [95% CI]"]
    assert shown["study_design"] == f"-0.09 ({OUTSIDE})"
    assert shown["genre"] == "0.50 [0.30, 0.70]"
    assert shown["domain"] == "—"
    assert t.raw is raw  # the CSV keeps the numbers as computed
