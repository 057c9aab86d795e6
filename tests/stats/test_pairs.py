"""Cohen's kappa of every pair from one sparse product equals a pair-by-pair count."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from labeling.stats.pairs import pair_kappas


def _loop(units, raters, values, names, min_n):  # type: ignore[no-untyped-def]
    """The pairs counted one pair at a time over a works x annotators table (last answer wins)."""
    table: dict[tuple[object, int], int] = {}
    for u, r, v in zip(units, raters, values, strict=True):
        table[(u, r)] = v
    works = list(dict.fromkeys(units))
    order = sorted(range(len(names)), key=lambda i: str(names[i]))
    kept, left = [], []
    for x, i in enumerate(order):
        for j in order[x + 1 :]:
            both = [w for w in works if (w, i) in table and (w, j) in table]
            if not both:
                continue
            row = {"a": names[i], "b": names[j], "question": "q", "n": len(both)}
            if len(both) < min_n:
                left.append(row)
                continue
            a = [table[(w, i)] for w in both]
            b = [table[(w, j)] for w in both]
            kappa = None if len(set(a) | set(b)) == 1 else cohen_kappa_score(a, b)
            kept.append({**row, "cohen_kappa": kappa})
    return kept, left


@pytest.mark.parametrize("seed", range(12))
def test_pairs_equal_the_pair_by_pair_count(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_raters = int(rng.integers(2, 9))
    n_values = int(rng.integers(1, 6))
    n = int(rng.integers(0, 400))
    units = rng.integers(0, max(n // 3, 1), size=n).astype(str).astype(object)
    raters = rng.integers(0, n_raters, size=n)
    values = rng.integers(0, n_values, size=n)
    names = np.array([f"r{k}" for k in rng.permutation(n_raters)], dtype=object)
    min_n = int(rng.integers(2, 6))
    got, left = pair_kappas("q", units, raters, values, n_values, names, min_n)
    want, want_left = _loop(units, raters, values, names, min_n)
    assert [{k: p[k] for k in ("a", "b", "n")} for p in left] == [
        {k: p[k] for k in ("a", "b", "n")} for p in want_left
    ]
    assert all(p["reason"].endswith(f"minimum of {min_n} (--min-pair-n)") for p in left)
    assert [{k: p[k] for k in ("a", "b", "question", "n")} for p in got] == [
        {k: p[k] for k in ("a", "b", "question", "n")} for p in want
    ]
    for g, w in zip(got, want, strict=True):
        assert (g["cohen_kappa"] is None) == (w["cohen_kappa"] is None)
        if w["cohen_kappa"] is not None:
            assert g["cohen_kappa"] == pytest.approx(w["cohen_kappa"])


def test_no_answers_no_pairs() -> None:
    empty = np.zeros(0, dtype=np.int64)
    names = np.array(["a", "b"], dtype=object)
    assert pair_kappas("q", empty.astype(object), empty, empty, 0, names, 2) == ([], [])
