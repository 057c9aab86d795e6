"""The one definition of a majority answer: strictly more than half, no tie-break, sets whole."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from labeling.stats.majority import (
    is_majority,
    majority,
    majority_one_hot,
    row_majority,
    set_majorities,
    vote,
)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["a"], "a"),  # one answer is all the answers
        (["a", "a"], "a"),  # unanimous
        (["a", "a", "a", "a"], "a"),
        (["a", "b"], None),  # a tie of two: no tie-break
        (["b", "a"], None),  # ... whichever came first
        (["a", "a", "b", "b"], None),  # a tie of four
        (["a", "a", "b", "c"], None),  # the most given, but only half
        (["a", "a", "a", "b"], "a"),  # three of four
        (["a", "b", "c"], None),  # a spread
        (["a", "a", "b"], "a"),  # two of three
        (["yes", "no"], None),  # binary answers alike
        ([True, True, False], True),
        ([], None),  # nothing answered
        ([None, None], None),
        ([None, "a"], "a"),  # who did not answer is not counted
        ([None, None, "a", "b"], None),  # two answers, a tie (not two of four)
        ([math.nan, "a", "a", "b"], "a"),  # NaN is no answer either
        ([float("nan")], None),
    ],
)
def test_single_answers(values: list[Any], expected: Any) -> None:
    assert majority(values) == expected


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([["a", "b"], ["b", "a"]], frozenset({"a", "b"})),  # order within a set is moot
        ([["a"], ["a", "b"]], None),  # sets compared whole: two answers, a tie
        ([["a"], ["a", "b"], ["a", "b"]], frozenset({"a", "b"})),
        ([["a", "b"], ["b", "c"], ["a", "c"]], None),  # each label 2 of 3, no set: none
        ([[], []], frozenset()),  # "none of them" is an answer
        ([[], ["a"]], None),
        ([[], [], ["a"]], frozenset()),
        ([None, ["b"]], frozenset({"b"})),
        ([("a",), {"a"}, frozenset({"a"}), ["b"]], frozenset({"a"})),  # any collection
    ],
)
def test_multi_label_answers_are_compared_as_sets(values: list[Any], expected: Any) -> None:
    assert majority(values) == expected


def test_an_empty_majority_set_is_not_no_majority() -> None:
    """[] won ("none of them"), which a caller must tell from None (no majority)."""
    found = majority([[], [], ["a"]])
    assert found is not None and not found


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["a", "b"], (None, 0.5)),  # the tie keeps its share
        (["a", "a", "b"], ("a", pytest.approx(2 / 3))),
        (["a", "b", "c"], (None, pytest.approx(1 / 3))),
        ([None], (None, None)),
    ],
)
def test_vote_gives_the_share_of_the_most_given_answer(values: list[Any], expected: Any) -> None:
    assert vote(values) == expected


@pytest.mark.parametrize(
    ("count", "total", "expected"),
    [(1, 2, False), (2, 4, False), (2, 3, True), (3, 4, True), (1, 1, True), (0, 0, False)],
)
def test_is_majority_is_strictly_more_than_half(count: int, total: int, expected: bool) -> None:
    assert bool(is_majority(count, total)) is expected
    assert bool(is_majority(np.array([count]), np.array([total]))[0]) is expected


def test_the_array_forms_agree_with_the_scalar_one() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 6))
        given = rng.integers(0, 3, size=n)
        counts = np.bincount(given, minlength=3)[None, :]
        hard = majority_one_hot(counts)[0]
        want = majority(given.tolist())
        assert (hard.argmax() if hard.any() else None) == want
        top, ok, share = row_majority(np.zeros(n, dtype=int), given, 1, 3)
        assert (int(top[0]) if ok[0] else None) == want
        assert share[0] == pytest.approx(counts.max() / n)


def test_set_majorities_gives_label_sets_in_order() -> None:
    forms = [frozenset({"b", "a"}), frozenset({"a"}), frozenset()]
    items = np.array([0, 0, 0, 1, 1, 2, 2, 2])
    codes = np.array([0, 0, 1, 0, 1, 2, 2, 0])
    top, ok, share, answers = set_majorities(items, codes, forms, ["a", "b"])
    assert answers == [["a", "b"], None, []]
    assert ok.tolist() == [True, False, True]
    assert share.tolist() == pytest.approx([2 / 3, 0.5, 2 / 3])
    assert top[0] == 0 and top[2] == 2
