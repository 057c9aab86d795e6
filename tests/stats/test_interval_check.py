"""Every interval the agreement report gives contains its estimate; none at small n, said why."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labeling.stats.agreement import QuestionSpec, agreement_report
from labeling.stats.coefficients import MIN_CI_WORKS, checked_ci

SPECS = [
    QuestionSpec("design", "single", ["a", "b", "c", "d"]),
    QuestionSpec("about", "binary", ["yes", "no"]),
    QuestionSpec("cats", "multi", ["x", "y", "z"]),
]


def _labels(rng: np.random.Generator, works: int, raters: int, noise: float) -> pd.DataFrame:
    """Labels of three questions; each rater copies a work's truth unless noise strikes."""
    rows = []
    for w in range(works):
        truth = (rng.choice(4), rng.random() < 0.3, tuple(rng.random(3) < [0.4, 0.2, 0.1]))
        for r in range(raters):
            off = rng.random() < noise
            design = "abcd"[rng.choice(4) if off else truth[0]]
            about = "yes" if (rng.random() < 0.5 if off else truth[1]) else "no"
            flags = rng.random(3) < 0.3 if off else truth[2]
            cats = [n for n, f in zip("xyz", flags, strict=True) if f]
            for q, v in (("design", design), ("about", about), ("cats", cats)):
                rows.append({"work_id": f"W{w}", "annotator": f"r{r}", "question": q, "value": v})
    return pd.DataFrame(rows)


def _entries(report: dict) -> list[tuple[str, dict]]:
    """Every question and per-label entry of a report, named."""
    out = []
    for q, entry in report["questions"].items():
        out.append((q, entry))
        out += [(f"{q}/{label}", e) for label, e in entry["labels"].items()]
    return out


def test_checked_ci_rules() -> None:
    """Shown only from the minimum n and around the estimate; otherwise None with the reason."""
    assert checked_ci(0.5, [0.3, 0.7], 40) == ([0.3, 0.7], None)
    assert checked_ci(None, [0.3, 0.7], 40) == (None, None)  # no estimate: the dash says it
    ci, why = checked_ci(0.5, [0.3, 0.7], MIN_CI_WORKS - 1)
    assert ci is None and why == f"fewer than {MIN_CI_WORKS} works with two labels or more (9)"
    # The case: alpha -0.09 with a percentile interval [-0.28, -0.10] beside it.
    ci, why = checked_ci(-0.09, [-0.28, -0.10], 40)
    assert (
        ci is None and why == "the bootstrap interval [-0.28, -0.10] does not contain the estimate"
    )
    assert checked_ci(0.5, None, 40)[1] == (
        "fewer than half the bootstrap resamples define the coefficient"
    )
    assert checked_ci(0.5, None, 40, resampled=False) == (None, "no bootstrap (n_boot = 0)")


def test_eight_works_show_no_interval_and_say_why() -> None:
    """With 8 works every interval is withheld, with the reason, alpha and kappa alike."""
    report = agreement_report(_labels(np.random.default_rng(1), 8, 2, 0.4), SPECS, n_boot=200)
    for name, e in _entries(report):
        for point, ci in (("krippendorff_alpha", "alpha_ci"), ("fleiss_kappa", "kappa_ci")):
            assert e[ci] is None, name
            if e[point] is not None:
                assert e[f"{ci}_reason"] == ("fewer than 10 works with two labels or more (8)"), (
                    name
                )


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    works=st.integers(3, 30),
    raters=st.integers(2, 4),
    noise=st.sampled_from([0.1, 0.4, 0.9]),
)
def test_every_interval_contains_its_estimate(
    seed: int, works: int, raters: int, noise: float
) -> None:
    """Small campaigns: each interval given holds its estimate; each missing one says why."""
    labels = _labels(np.random.default_rng(seed), works, raters, noise)
    report = agreement_report(labels, SPECS, n_boot=100, seed=seed)
    for name, e in _entries(report):
        for point, ci in (("krippendorff_alpha", "alpha_ci"), ("fleiss_kappa", "kappa_ci")):
            if e[ci] is not None:
                assert works >= MIN_CI_WORKS, name
                assert e[ci][0] <= e[point] <= e[ci][1], (name, e)
                assert e[f"{ci}_reason"] is None
            elif e[point] is not None:
                assert e[f"{ci}_reason"], (name, e)


@pytest.mark.parametrize("works", [10, 60])
def test_intervals_are_given_from_the_minimum(works: int) -> None:
    """From the minimum n on, a plain campaign gets its intervals."""
    report = agreement_report(_labels(np.random.default_rng(5), works, 3, 0.3), SPECS[:1])
    entry = report["questions"]["design"]
    assert entry["alpha_ci"] is not None and entry["alpha_ci_reason"] is None
