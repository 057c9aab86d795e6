"""One definition of a majority answer, for every place that speaks of one.

The majority rule (labeling.review.validation), `labeling aggregate --method majority`
(labeling.stats.aggregation), Adjudicate's prefill (labeling.review.disputes) and the
Monitor all mean the same thing by it:

- the majority answer is the answer given by strictly more than half of the answers given
  (``is_majority``); None and NaN are no answer and are not counted;
- there is no tie-break: two answers at half each, or a spread where none passes half, give
  no majority (None), whatever order the answers came in;
- a multi-label answer (a list, tuple or set of labels) is compared whole, as a set: ``["a"]``
  and ``["a", "b"]`` are two different answers, and ``[]`` ("none of them") is an answer.

``majority`` is the scalar form; ``majority_one_hot``, ``row_majority`` and
``set_majorities`` apply the same ``is_majority`` to vote counts in arrays.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, TypeVar

import numpy as np

N = TypeVar("N", int, np.ndarray)
NO_MAJORITY = "no majority"  # the one wording wherever no answer has a majority


def is_majority(count: N, total: N) -> Any:
    """Whether count answers of total are a strict majority (more than half); arrays too."""
    return 2 * count > total


def answer_key(value: Any) -> Hashable:
    """An answer in its comparable form: label collections as a frozenset, others as given."""
    if isinstance(value, list | tuple | set | frozenset):
        return frozenset(value)
    return value


def is_missing(value: Any) -> bool:
    """Whether a value is no answer at all (None or NaN)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def vote(values: Iterable[Any]) -> tuple[Hashable | None, float | None]:
    """The majority answer (None without one) and the share of the most given answer.

    The share is None when no answer was given; a 1-1 tie gives (None, 0.5).
    """
    counts = Counter(answer_key(v) for v in values if not is_missing(v))
    total = sum(counts.values())
    if not total:
        return None, None
    top, n = counts.most_common(1)[0]
    # is_majority alone decides: a tie's first answer never passes half, so order is moot.
    return (top if is_majority(n, total) else None), n / total


def majority(values: Iterable[Any]) -> Hashable | None:
    """The answer given by strictly more than half of the non-missing answers, else None.

    Args:
        values: one answer per annotator; None/NaN (no answer) are left out.

    Returns:
        The majority answer in its comparable form (a multi-label answer as a frozenset of
        labels, possibly empty), or None when no answer has a strict majority (ties
        included) or nothing was answered.
    """
    return vote(values)[0]


def majority_one_hot(counts: np.ndarray) -> np.ndarray:
    """Vote counts (items x classes) as a one-hot matrix of each item's majority class; the
    row of an item without a strict majority (a tie) is all zeros."""
    counts = np.asarray(counts)
    out = np.zeros(counts.shape, dtype=float)
    if counts.size == 0:
        return out
    top = counts.argmax(axis=1)
    ok = is_majority(counts.max(axis=1), counts.sum(axis=1))
    rows = np.flatnonzero(ok)
    out[rows, top[rows]] = 1.0
    return out


def row_majority(
    items: np.ndarray, codes: np.ndarray, n_items: int, n_codes: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per item: the most given answer code, whether it is a strict majority, and its share.

    Args:
        items, codes: one entry per answer, the item and the answer's code (0..n_codes-1).
        n_items, n_codes: the code ranges (every item has one answer or more).
    """
    counts = np.bincount(
        np.asarray(items) * n_codes + np.asarray(codes), minlength=n_items * n_codes
    ).reshape(n_items, n_codes)
    top = counts.argmax(axis=1) if n_codes else np.zeros(n_items, dtype=np.int64)
    best = counts.max(axis=1) if n_codes else np.zeros(n_items, dtype=np.int64)
    total = counts.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = best / total
    return top, is_majority(best, total), share


def set_majorities(
    items: np.ndarray, codes: np.ndarray, forms: Sequence[frozenset[str]], order: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[list[str] | None]]:
    """row_majority over multi-label answers compared as sets, and each item's majority
    label set in the given order (None: no majority).

    Args:
        items, codes: one entry per answer, the item (0..n-1, each met) and its form's code.
        forms: each code's label set.
        order: the labels' order in an answer (schema order, then others).
    """
    n_items = int(np.max(items)) + 1 if len(items) else 0
    top, ok, share = row_majority(items, codes, n_items, len(forms))
    answers = [
        [lab for lab in order if lab in forms[t]] if decided else None
        for t, decided in zip(top.tolist(), ok.tolist(), strict=True)
    ]
    return top, ok, share, answers
