"""The batched frame ratios equal estimates.ratio_estimate / precision_recall row by row."""

from __future__ import annotations

import numpy as np
import pytest

from labeling.stats.estimates import design_groups, precision_recall, ratio_estimate
from labeling.stats.ratios import precision_recall_many, ratio_estimates

POPULATION = {"low": 9000, "mid": 800, "high": 200, "none": 0}


def units(seed: int, n: int = 240) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Strata, a 0/1 human answer and the stratum index of n sampled units."""
    rng = np.random.default_rng(seed)
    strata = rng.choice(["low", "mid", "high"], size=n, p=[0.5, 0.3, 0.2]).astype(object)
    y = (rng.random(n) < np.where(strata == "high", 0.6, 0.1)).astype(int)
    return strata, y, design_groups(strata, list(POPULATION))


@pytest.mark.parametrize("seed", range(6))
def test_precision_recall_many_equals_one_by_one(seed: int) -> None:
    strata, y, groups = units(seed)
    rng = np.random.default_rng(100 + seed)
    rules = []
    for kind in range(5):
        present = rng.random(len(y)) < (1.0 if kind == 0 else 0.8)
        if kind == 4:  # a system present on the low stratum only: the others are refused
            present = strata == "low"
        call = (rng.random(len(y)) < (0.0 if kind == 3 else 0.3)).astype(int)
        rules.append((present, call))
    got = precision_recall_many(y, rules, groups, POPULATION)
    for (present, call), pr in zip(rules, got, strict=True):
        keep = np.flatnonzero(present)
        want = precision_recall(y[keep], call[keep], strata[keep], POPULATION, groups=groups[keep])
        assert {k: v.as_dict() for k, v in pr.items()} == {k: v.as_dict() for k, v in want.items()}


def test_ratio_estimates_notes_and_refusals_equal_the_scalar() -> None:
    strata, y, groups = units(7, n=40)
    lone = np.flatnonzero(strata == "high")[1:]  # one unit left in "high": a note
    mask = np.ones(len(y), dtype=bool)
    mask[lone] = False
    a, b = y * mask, np.ones(len(y)) * mask
    got = ratio_estimates(a[None], b[None], mask[None], groups, POPULATION)[0]
    keep = np.flatnonzero(mask)
    want = ratio_estimate(a[keep], b[keep], strata[keep], POPULATION, groups=groups[keep])
    assert got == want and got.note is not None
