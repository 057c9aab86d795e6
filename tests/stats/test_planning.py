"""The sample-size planner (pure): Neyman allocation, the bisection, and its figures."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labeling.stats.intervals import ratio_counts, stratified_counts
from labeling.stats.planning import StratumCounts, neyman_allocation, plan_sample


def S(name: str, N: int, n: int, c: int, m: int | None = None) -> StratumCounts:
    """A stratum's counts; m defaults to n (a prevalence)."""
    return StratumCounts(name, N, n, n if m is None else m, c)


@pytest.mark.parametrize(
    ("total", "weight", "low", "high", "want"),
    [
        (100, [1, 1], [0, 0], [1000, 1000], [50, 50]),
        (100, [3, 1], [0, 0], [1000, 1000], [75, 25]),
        (100, [3, 1], [0, 40], [1000, 1000], [60, 40]),  # labels given cannot be undone
        (100, [3, 1], [0, 0], [30, 1000], [30, 70]),  # a stratum holds at most N_h
        (7, [1, 1, 1], [0, 0, 0], [10, 10, 10], None),  # remainders: whole works, sum kept
        (10_000, [1, 1], [0, 0], [10, 20], [10, 20]),  # more than the frame: a census
    ],
)
def test_neyman_allocation(
    total: int, weight: list[float], low: list[int], high: list[int], want: list[int] | None
) -> None:
    got = neyman_allocation(total, np.array(weight, float), np.array(low), np.array(high))
    assert got.sum() == min(total, sum(high))
    assert (got >= low).all() and (got <= high).all()
    if want is not None:
        assert got.tolist() == want


def test_one_large_stratum_is_close_to_the_textbook_size() -> None:
    """One stratum, p near 1/2, N huge: n is about z^2 p(1-p) / h^2 (KG is a little wider)."""
    plan = plan_sample([S("all", 10_000_000, 10, 5)], 0.03)
    textbook = 1.959964**2 * 0.25 / 0.03**2  # 1067
    assert textbook - 10 <= plan.more + 10 <= textbook * 1.05
    assert plan.projected_half_width <= 0.03
    assert plan.strata[0].more == plan.more


def test_the_plan_is_the_fewest_works_that_reach_the_target() -> None:
    """One work fewer than planned would not reach the target under the same projection."""
    strata = [S("a", 400_000, 30, 3), S("b", 100_000, 30, 15), S("c", 500_000, 30, 27)]
    plan = plan_sample(strata, 0.02)
    fewer = plan_sample(strata, plan.projected_half_width + 1e-9)
    assert fewer.more == plan.more
    assert plan.projected_half_width <= 0.02
    # The half-width the reporting function gives on the projected counts is the plan's.
    N = np.array([s.N for s in strata], float)
    n = np.array([r.planned for r in plan.strata], float)
    p = (np.array([s.c for s in strata]) + 0.5) / (np.array([s.n for s in strata]) + 1)
    c = np.array([s.c for s in strata]) + p * (n - np.array([s.n for s in strata]))
    out = stratified_counts(c, n, N)
    assert (out["hi"] - out["lo"]) / 2 == pytest.approx(plan.projected_half_width)


def test_neyman_puts_more_works_where_the_variance_is() -> None:
    """Equal N_h: the stratum near p = 1/2 gets more works than the one near p = 0."""
    plan = plan_sample([S("rare", 500_000, 40, 0), S("even", 500_000, 40, 20)], 0.03)
    more = {r.stratum: r.more for r in plan.strata}
    assert more["even"] > 2 * more["rare"] > 0


def test_a_met_target_needs_nothing() -> None:
    now = stratified_counts(np.array([50.0]), np.array([100.0]), np.array([1000.0]))
    width = float((now["hi"] - now["lo"]) / 2)
    plan = plan_sample([S("all", 1000, 100, 50)], width + 0.01)
    assert plan.more == 0 and plan.half_width_now == pytest.approx(width)
    assert plan.strata[0].more == 0


def test_unlabelled_strata_are_planned_at_their_most_variable() -> None:
    plan = plan_sample([S("a", 50, 0, 0), S("b", 60, 0, 0)], 0.05)
    assert plan.half_width_now is None and plan.note and "half" in plan.note
    assert all(r.more >= 2 for r in plan.strata)
    assert plan.more <= 110 and plan.projected_half_width <= 0.05


def test_a_small_frame_can_be_planned_up_to_a_census() -> None:
    """A target tighter than any sample short of everything: label every work."""
    plan = plan_sample([S("a", 20, 5, 2), S("b", 30, 5, 3)], 0.001)
    assert plan.more == 40 and all(r.planned == r.N for r in plan.strata)


def test_precision_uses_the_ratio_interval() -> None:
    """c hits among m calls: the plan's projected width is ratio_counts' on projected counts."""
    strata = [S("a", 500_000, 20, 2, m=6), S("b", 500_000, 20, 8, m=10)]
    plan = plan_sample(strata, 0.05, "precision")
    now = ratio_counts(np.array([2.0, 8]), np.array([6.0, 10]), np.array([20.0, 20]),
                       np.array([5e5, 5e5]))  # fmt: skip
    assert plan.half_width_now == pytest.approx(float((now["hi"] - now["lo"]) / 2))
    assert plan.more > 0 and plan.projected_half_width <= 0.05


@pytest.mark.parametrize("bad", [0.0, -0.1, 0.6, math.nan])
def test_bad_targets_are_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="half-width"):
        plan_sample([S("a", 10, 1, 0)], bad)
