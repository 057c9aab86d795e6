"""Frame precision and recall of many machine rules at once (the estimates' ratio, batched).

estimates.ratio_estimate computes one ratio T(a) / T(b) of two estimated frame totals; a frame
report needs one per label, system and measure (about 400 on the default schema), and each
call pays scipy's per-call overhead four times over. ratio_estimates computes the same
numbers for a whole matrix of indicators in one pass: per-stratum counts by one product with
the units' stratum indicators, then one vectorised intervals.ratio_counts call. Refusals and
notes are the scalar function's, row by row (tests/stats/test_ratios.py holds the two equal).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from labeling.stats.estimates import KG, ProportionEstimate, _num, refusal
from labeling.stats.intervals import ratio_counts


def _single_note(keys: Sequence[Any], n_h: np.ndarray, N_h: np.ndarray) -> str | None:
    """The scalar function's note on strata holding one validated work only."""
    single = [str(k) for k, n, N in zip(keys, n_h, N_h, strict=True) if n == 1 and N > 1]
    if not single:
        return None
    return (
        "one validated work only in strata "
        + ", ".join(single)
        + ": their variance is taken at its maximum (conservative)"
    )


def ratio_estimates(
    a: np.ndarray,
    b: np.ndarray,
    units: np.ndarray,
    groups: np.ndarray,
    population: Mapping[Any, int],
    alpha: float = 0.05,
) -> list[ProportionEstimate]:
    """ratio_estimate of each row: T(a_i) / T(b_i) over the units where units_i holds.

    Args:
        a: rows x units 0/1 numerators (a <= b).
        b: rows x units 0/1 denominators.
        units: rows x units booleans: the units each ratio is computed on (a system's works).
        groups: each unit's stratum index (estimates.design_groups).
        population: N_h per stratum, in the order of the groups.
        alpha: 1 - confidence level.
    """
    keys = list(population)
    onehot = np.zeros((len(groups), len(keys)))
    onehot[np.arange(len(groups)), groups] = 1.0
    mask = np.asarray(units, dtype=float)
    a, b = np.asarray(a, dtype=float) * mask, np.asarray(b, dtype=float) * mask
    c_h, m_h, n_h = a @ onehot, b @ onehot, mask @ onehot
    N_h = np.array([float(population[k]) for k in keys])
    live = N_h > 0
    empty = (n_h[:, live] == 0).any(axis=1)
    out: list[ProportionEstimate | None] = [None] * len(a)
    n_dom = b.sum(axis=1).astype(int)
    for i in np.flatnonzero(empty):
        gone = [str(k) for k, n, N in zip(keys, n_h[i], N_h, strict=True) if N > 0 and n == 0]
        out[i] = refusal(f"no validated works yet in strata: {', '.join(gone)}", int(n_dom[i]))
    ok = np.flatnonzero(~empty)
    if len(ok):
        got = ratio_counts(c_h[ok][:, live], m_h[ok][:, live], n_h[ok][:, live], N_h[live], alpha)
        for j, i in enumerate(ok):
            if not got["defined"][j]:
                out[i] = refusal("no unit of the sample falls in the denominator", int(n_dom[i]))
                continue
            out[i] = ProportionEstimate(
                estimate=_num(got["p"][j]),
                lo=_num(got["lo"][j]),
                hi=_num(got["hi"][j]),
                se=_num(math.sqrt(got["var"][j])),
                n=int(n_dom[i]),
                method=KG,
                note=_single_note(keys, n_h[i], N_h),
            )
    return [e for e in out if e is not None]


def precision_recall_many(
    y: np.ndarray,
    calls: Sequence[tuple[np.ndarray, np.ndarray]],
    groups: np.ndarray,
    population: Mapping[Any, int],
    alpha: float = 0.05,
) -> list[dict[str, ProportionEstimate]]:
    """estimates.precision_recall of many rules: per (units, calls) pair, on its units.

    Args:
        y: the human answer (0/1) of every unit.
        calls: per rule, (units it has a value on, its 0/1 call on every unit).
        groups: each unit's stratum index.
        population: N_h per stratum.
        alpha: 1 - confidence level.
    """
    if not calls:
        return []
    y = np.asarray(y, dtype=float)
    units = np.vstack([np.asarray(u, dtype=bool) for u, _ in calls])
    r = np.vstack([np.asarray(c, dtype=float) for _, c in calls])
    both = y[None, :] * r
    got = ratio_estimates(
        np.vstack([both, both]),
        np.vstack([r, np.broadcast_to(y, r.shape)]),
        np.vstack([units, units]),
        groups,
        population,
        alpha,
    )
    k = len(calls)
    return [{"precision": got[i], "recall": got[k + i]} for i in range(k)]
