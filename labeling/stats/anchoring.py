"""Anchoring: do annotators shown the teachers' scores agree with them more? (pure)

The arms come from a randomised experiment (labeling/review/assist.py): each (work, annotator)
assignment is shown the scores before submit, or not, at random. Agreement is compared
between the arms as two independent proportions:

- The difference shown - hidden with the Newcombe hybrid score interval (statsmodels'
  confint_proportions_2indep, method "newcomb"), which keeps its coverage for small and
  extreme proportions where the Wald interval does not.
- Fisher's exact test (scipy), the exact permutation test of a 2 x 2 table, for the p-value.
- An implied copy rate (shown - hidden) / (1 - hidden): the share of the answers that would
  differ from the teacher without its scores and follow it with them (the model: with the
  scores an annotator copies the teacher's call with probability p, else answers as without).
  Its interval divides the difference's by (1 - hidden), treating the hidden arm's rate as
  known: approximate, and said so.
- Labels of one work or one annotator are not independent; randomising per assignment keeps
  the comparison unbiased, the interval treats labels as independent (a mild understatement
  of the width when a few annotators give most labels).
- Fewer than MIN_ARM_N labels in an arm: the numbers are given, and `enough` is False with a
  sentence saying so.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.stats import fisher_exact
from statsmodels.stats.proportion import confint_proportions_2indep

MIN_ARM_N = 10  # fewer labels than this in an arm: too few to say anything
METHOD = "difference: Newcombe hybrid score interval; p-value: Fisher's exact test"


@dataclass(frozen=True)
class ArmComparison:
    """Agreement in each arm, the difference (shown - hidden) with its 95% interval."""

    n_shown: int
    n_hidden: int
    agree_shown: int
    agree_hidden: int
    rate_shown: float | None
    rate_hidden: float | None
    difference: float | None
    lo: float | None
    hi: float | None
    p_value: float | None
    copy_rate: float | None
    copy_lo: float | None
    copy_hi: float | None
    enough: bool
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-safe data."""
        return asdict(self)


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def compare_arms(
    shown: np.ndarray, agree: np.ndarray, alpha: float = 0.05, min_n: int = MIN_ARM_N
) -> ArmComparison:
    """Agreement (0/1 per label) of the shown arm against the hidden arm.

    Args:
        shown: True where the label's annotator saw the scores before submitting.
        agree: True where the label agrees (with a teacher's call, or the validated answer).
        alpha: 1 - confidence level.
        min_n: fewest labels per arm to say anything.
    """
    shown, agree = np.asarray(shown, dtype=bool), np.asarray(agree, dtype=bool)
    n1, n0 = int(shown.sum()), int((~shown).sum())
    k1, k0 = int((agree & shown).sum()), int((agree & ~shown).sum())
    r1 = k1 / n1 if n1 else None
    r0 = k0 / n0 if n0 else None
    enough = n1 >= min_n and n0 >= min_n
    note = None
    if not enough:
        note = (
            f"too few labels to say: {n1} shown and {n0} hidden "
            f"(at least {min_n} in each arm are needed)"
        )
    if r1 is None or r0 is None:
        return ArmComparison(n1, n0, k1, k0, r1, r0, None, None, None, None, None, None, None,
                             False, note)  # fmt: skip
    lo, hi = confint_proportions_2indep(k1, n1, k0, n0, method="newcomb", compare="diff",
                                        alpha=alpha)  # fmt: skip
    _, p = fisher_exact([[k1, n1 - k1], [k0, n0 - k0]])
    diff = r1 - r0
    room = 1 - r0
    copy = copy_lo = copy_hi = None
    if room > 0:
        copy, copy_lo, copy_hi = diff / room, float(lo) / room, float(hi) / room
    return ArmComparison(
        n_shown=n1,
        n_hidden=n0,
        agree_shown=k1,
        agree_hidden=k0,
        rate_shown=r1,
        rate_hidden=r0,
        difference=diff,
        lo=_finite(float(lo)),
        hi=_finite(float(hi)),
        p_value=_finite(float(p)),
        copy_rate=copy,
        copy_lo=copy_lo,
        copy_hi=copy_hi,
        enough=enough,
        note=note,
    )
