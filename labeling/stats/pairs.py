"""Cohen's kappa of every annotator pair on one question, from one sparse product."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import sparse

from labeling.stats.coefficients import kappa_from_table


def pair_kappas(
    question: str,
    units: np.ndarray,
    raters: np.ndarray,
    values: np.ndarray,
    n_values: int,
    rater_names: np.ndarray,
    min_n: int,
) -> tuple[list[dict], list[dict]]:
    """Cohen's kappa for every annotator pair with >= ``min_n`` common works; the rest, why.

    Args:
        question: the question's name (each row's "question").
        units, raters, values: one entry per answer: the work, the annotator's index into
            rater_names and the value's code (0..n_values-1); one answer per work and
            annotator (a later one replaces an earlier).
        n_values: how many value codes there are.
        rater_names: the annotators' names; pairs are named and ordered by them.
        min_n: fewest common works for a kappa; pairs sharing fewer go to the second list.

    Returns:
        (pairs: a, b, question, n, cohen_kappa (None where undefined); left out: a, b,
        question, n, reason), pairs in name order.
    """
    local, works = pd.factorize(units)
    dense = np.full((len(works), len(rater_names)), -1, dtype=np.int64)
    dense[local, raters] = values
    order = sorted(range(len(rater_names)), key=lambda i: str(rater_names[i]))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    v = max(n_values, 1)
    n_raters = len(order)
    # Every pair's contingency table at once: with one column per (annotator in name order,
    # value) marking each work's answer, the product columns x columns holds, in block
    # (a, b), how many works a answered x and b answered y (a loop over pairs cost 0.2 s of
    # the large Monitor bench's agreement).
    unit, who = np.nonzero(dense >= 0)
    marks = sparse.csr_matrix(
        (np.ones(len(unit)), (unit, rank[who] * v + dense[unit, who])),
        shape=(len(works), n_raters * v),
    )
    cells = (marks.T @ marks).tocoo()
    a, x, b, y = cells.row // v, cells.row % v, cells.col // v, cells.col % v
    upper = a < b
    a, x, b, y = a[upper], x[upper], b[upper], y[upper]
    counts = np.rint(cells.data[upper]).astype(np.int64)
    pair = a * n_raters + b
    by_pair = np.argsort(pair, kind="stable")
    keys, starts = np.unique(pair[by_pair], return_index=True)
    ends = np.append(starts[1:], len(by_pair)) if len(starts) else starts
    out, left_out = [], []
    for key, lo, hi in zip(keys, starts, ends, strict=True):
        take = by_pair[lo:hi]
        n = int(counts[take].sum())
        i, j = order[key // n_raters], order[key % n_raters]
        row = {"a": str(rater_names[i]), "b": str(rater_names[j]), "question": question, "n": n}
        if n < min_n:
            works_text = "1 common work" if n == 1 else f"{n} common works"
            left_out.append(
                {**row, "reason": f"{works_text}, fewer than the minimum of {min_n} (--min-pair-n)"}
            )
            continue
        table = np.zeros(v * v, dtype=np.int64)
        np.add.at(table, x[take] * v + y[take], counts[take])
        # kappa_from_table is scikit-learn's arithmetic on the pair's contingency table
        out.append({**row, "cohen_kappa": kappa_from_table(table.reshape(v, v))})
    return out, left_out
