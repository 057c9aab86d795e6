"""Anchoring between randomised arms (pure): simulated annotators with a known copy rate."""

from __future__ import annotations

import numpy as np
import pytest

from labeling.stats.anchoring import MIN_ARM_N, compare_arms


def simulate(rng: np.random.Generator, n: int, p_copy: float, a: float, rate: float) -> tuple:
    """Labels of annotators who copy the teacher's call with p_copy when shown.

    Without the scores an answer agrees with the teacher's call with probability a (the
    teacher is right that often and the annotator answers the truth); with them, the
    annotator copies the call with probability p_copy, else answers as without.
    """
    shown = rng.random(n) < rate
    agree_alone = rng.random(n) < a
    copies = rng.random(n) < p_copy
    return shown, agree_alone | (shown & copies)


@pytest.mark.parametrize(("p_copy", "a"), [(0.0, 0.7), (0.3, 0.7), (0.6, 0.5), (0.2, 0.9)])
def test_the_difference_interval_covers_the_true_effect_in_most_seeds(
    p_copy: float, a: float
) -> None:
    """The true difference p (1 - a) lies in the 95% interval in at least 85% of 60 seeds,
    and the implied copy rate is close to p on average."""
    truth = p_copy * (1 - a)
    covered, copies = 0, []
    for seed in range(60):
        shown, agree = simulate(np.random.default_rng(seed), 3000, p_copy, a, 0.5)
        c = compare_arms(shown, agree)
        assert c.enough and c.lo is not None and c.hi is not None
        covered += c.lo <= truth <= c.hi
        copies.append(c.copy_rate)
    assert covered >= 51, covered
    assert np.mean(copies) == pytest.approx(p_copy, abs=0.05)


def test_a_strong_effect_is_detected_and_none_is_not_invented() -> None:
    rng = np.random.default_rng(1)
    strong = compare_arms(*simulate(rng, 600, 0.5, 0.6, 0.5))
    assert strong.lo is not None and strong.lo > 0 and strong.p_value is not None
    assert strong.p_value < 0.001
    null = compare_arms(*simulate(rng, 600, 0.0, 0.6, 0.5))
    assert null.lo is not None and null.hi is not None and null.lo < 0 < null.hi


@pytest.mark.parametrize(("n_shown", "n_hidden"), [(0, 30), (30, 0), (MIN_ARM_N - 1, 30)])
def test_too_few_labels_in_an_arm_are_said_plainly(n_shown: int, n_hidden: int) -> None:
    shown = np.array([True] * n_shown + [False] * n_hidden)
    agree = np.ones(len(shown), dtype=bool)
    c = compare_arms(shown, agree)
    assert not c.enough and c.note and "too few labels to say" in c.note
    assert (c.n_shown, c.n_hidden) == (n_shown, n_hidden)
    if n_shown == 0 or n_hidden == 0:
        assert c.difference is None and c.lo is None
