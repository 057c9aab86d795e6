"""Dawid-Skene warm starts: continuing from a kept fit (the Monitor's views after a label)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from labeling.stats.aggregation import aggregate
from labeling.stats.dawid_skene import WarmStarts, dawid_skene
from tests.stats.test_dawid_skene import QUESTIONS, long_table, simulate

ACCURACIES = {"ann": 0.9, "bob": 0.8, "cy": 0.7, "dee": 0.65}


def _accuracies(report: dict) -> dict[str, float]:
    """Pooled accuracy per annotator."""
    return {a["annotator"]: a["accuracy"] for a in report["annotators"]}


def _rounds(report: dict) -> dict[str, int]:
    """EM rounds of every task (questions, and the labels of multi-label questions)."""
    out = {}
    for name, block in report["questions"].items():
        if "iterations" in block:
            out[name] = block["iterations"]
        for label, sub in (block.get("labels") or {}).items():
            out[f"{name}:{label}"] = sub["iterations"]
    return out


def test_a_start_at_the_fixed_point_stays_there() -> None:
    _, items, workers, labels, _ = simulate(3, [0.9, 0.75, 0.6, 0.55])
    size = {"n_items": 300, "n_workers": 4, "n_classes": 3}
    cold = dawid_skene(items, workers, labels, **size)
    assert cold.converged and cold.iterations > 5
    warm = dawid_skene(items, workers, labels, **size, start=(cold.priors, cold.confusion))
    assert warm.converged and warm.iterations <= 2
    np.testing.assert_allclose(warm.posteriors, cold.posteriors, atol=1e-4)
    np.testing.assert_allclose(warm.confusion, cold.confusion, atol=1e-4)


@pytest.mark.parametrize(
    ("priors", "confusion"),
    [(np.full(2, 0.5), np.full((4, 3, 3), 1 / 3)), (np.full(3, 1 / 3), np.full((3, 3, 3), 1 / 3))],
)
def test_a_start_of_the_wrong_shape_is_refused(priors: np.ndarray, confusion: np.ndarray) -> None:
    _, items, workers, labels, _ = simulate(0, [0.9, 0.8, 0.7, 0.6])
    with pytest.raises(ValueError, match="do not fit the workers and classes"):
        dawid_skene(
            items, workers, labels, n_items=300, n_workers=4, n_classes=3, start=(priors, confusion)
        )


def test_aggregate_continues_each_task_and_restarts_those_whose_classes_changed() -> None:
    long, _ = long_table(4, ACCURACIES)
    cold = aggregate(long, QUESTIONS, with_works=False)
    warm = WarmStarts(max_iter=3)
    first = aggregate(long, QUESTIONS, with_works=False, warm=warm)
    # The first call starts every task from majority shares: the cold report, and keeps fits.
    assert first == cold
    assert set(warm.fits) == {"design", "about", *(f"cats\x1f{lab}" for lab in "abc")}
    assert max(_rounds(cold).values()) > 3
    # Same labels: every task continues from its fixed point and stays there.
    again = aggregate(long, QUESTIONS, with_works=False, warm=warm)
    assert max(_rounds(again).values()) <= 3
    for who, acc in _accuracies(cold).items():
        assert _accuracies(again)[who] == pytest.approx(acc, abs=1e-4)
    # A new annotator on "design": it starts from the others' mean confusion matrix, and the
    # task continues from where it stopped; the fit is that of a cold start to 1e-3.
    extra = long[(long["annotator"] == "ann") & (long["question"] == "design")].assign(
        annotator="zed"
    )
    more = pd.concat([long, extra], ignore_index=True)
    moved = aggregate(more, QUESTIONS, with_works=False, warm=WarmStarts(fits=dict(warm.fits)))
    fresh = aggregate(more, QUESTIONS, with_works=False)
    assert max(_rounds(moved).values()) <= 10
    for who, acc in _accuracies(fresh).items():
        assert _accuracies(moved)[who] == pytest.approx(acc, abs=1e-3)
    # Other classes on "about" (a value never met before): that task starts afresh.
    odd = long.copy()
    odd.loc[odd.index[odd["question"] == "about"][:5], "value"] = "maybe"
    again_warm = WarmStarts(max_iter=3, fits=dict(warm.fits))
    changed = aggregate(odd, QUESTIONS, with_works=False, warm=again_warm)
    cold_odd = aggregate(odd, QUESTIONS, with_works=False)
    assert changed["questions"]["about"] == cold_odd["questions"]["about"]
    assert _rounds(changed)["about"] > 3
    assert again_warm.fits["about"][1] == ("yes", "no", "maybe")


def test_a_new_annotator_starts_from_the_mean_matrix() -> None:
    warm = WarmStarts()
    confusion = np.stack([np.eye(2) * 0.8 + 0.1, np.eye(2) * 0.6 + 0.2])
    warm.fits["q"] = (("a", "b"), ("yes", "no"), np.array([0.3, 0.7]), confusion)
    priors, start = warm.start("q", ["b", "new"], ["yes", "no"])  # type: ignore[misc]
    np.testing.assert_array_equal(priors, [0.3, 0.7])
    np.testing.assert_allclose(start[0], confusion[1])
    np.testing.assert_allclose(start[1], np.eye(2) * 0.7 + 0.15)
    assert warm.start("q", ["a"], ["no", "yes"]) is None
    assert warm.start("other", ["a"], ["yes", "no"]) is None


def test_majority_keeps_no_fit() -> None:
    long, _ = long_table(1, ACCURACIES)
    warm = WarmStarts()
    aggregate(long, QUESTIONS, "majority", with_works=False, warm=warm)
    assert warm.fits == {}


@pytest.mark.parametrize("seed", range(3))
def test_categorical_columns_give_the_same_report(seed: int) -> None:
    """A long table whose work and annotator columns are sorted categoricals (the Monitor's)
    is coded from its codes: the report is that of the plain columns."""
    long, _ = long_table(seed, ACCURACIES)
    long = long.sample(frac=0.8, random_state=seed).reset_index(drop=True)  # gaps, any order
    coded = long.astype({"work_id": "category", "annotator": "category"})
    # categories nobody uses any more are dropped like factorize drops them
    coded["work_id"] = coded["work_id"].cat.add_categories(["W9999"])
    assert aggregate(coded, QUESTIONS) == aggregate(long, QUESTIONS)
