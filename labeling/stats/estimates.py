"""Design-based estimates for the whole frame from a probability sample (pure functions).

Choices, in one place:

- Design: stratified simple random sampling without replacement (a simple random sample is
  one stratum). ``population`` gives N_h per stratum; the labelled units of stratum h are
  treated as a simple random sample of it (units that were drawn but are not validated yet
  are assumed missing at random *within* their stratum, so weights are N_h / n_h with n_h the
  number of labelled units; the caller reports the response rate).
- Prevalence: p = sum_h W_h p_h, W_h = N_h / N, with
  V = sum_h W_h^2 (1 - n_h/N_h) p_h (1 - p_h) / (n_h - 1). A stratum with a single labelled
  unit (and N_h > 1) has no variance estimate: it contributes the largest possible
  W_h^2 (1 - f_h) * 0.25 (conservative) and the result says so in ``note``.
- Interval: Korn-Graubard (Clopper-Pearson on an effective sample size n*), with the design
  effect behind n* computed from Jeffreys-smoothed stratum proportions; the reasons and the
  measured coverage are in ``labeling.stats.intervals`` and ``bench/RESULTS.md``. Never Wald.
- Per stratum: p_h with a Wilson interval on n_h (statsmodels; ignores the finite-population
  correction, so slightly conservative).
- Precision T(y & R) / T(R) and recall T(y & R) / T(y) of a machine rule R: ratio estimators
  with the linearised (Taylor) variance of stratified SRSWOR (equal to the prevalence's when
  b = 1) and the same kind of interval (``labeling.stats.intervals.ratio_counts``), n = the units in
  the denominator's domain; a single-unit stratum is conservative as above; refused, like the
  prevalence, while a stratum has no labelled unit. No bootstrap.
- Horvitz-Thompson total sum y_i / pi_i and Hajek mean sum w_i y_i / sum w_i from inclusion
  probabilities, with the same stratified variance (N_h estimated as the sum of weights); the
  Hajek interval is the textbook Korn-Graubard one (inclusion probabilities may vary within a
  stratum, so there are no stratum counts to smooth). Not used by the reports.
- A score-ordered queue is not a probability sample: ``estimability`` refuses plainly.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, SupportsFloat

import numpy as np
import pandas as pd

from labeling.stats.intervals import (
    clopper_pearson,
    korn_graubard,
    ratio_counts,
    stratified_counts,
    wilson,
)

__all__ = [
    "clopper_pearson",
    "estimability",
    "hajek_mean",
    "horvitz_thompson_total",
    "korn_graubard",
    "precision_recall",
    "ratio_counts",
    "ratio_estimate",
    "refusal",
    "stratified_counts",
    "stratified_prevalence",
    "wilson",
]

NOT_A_SAMPLE = "a score-ordered queue is not a probability sample: no frame estimate is possible"
NOT_A_SAMPLE_MANUAL = (
    "a hand-picked (manual) campaign is not a probability sample: no frame estimate is possible"
)
KG = "korn-graubard"
CP = "clopper-pearson"
WILSON = "wilson"


@dataclass(frozen=True)
class Estimability:
    """Whether a campaign's labels support frame estimates, and if not, why."""

    estimable: bool
    reason: str | None = None


@dataclass(frozen=True)
class ProportionEstimate:
    """A proportion (prevalence, precision, recall) with its interval and the n it rests on."""

    estimate: float | None
    lo: float | None
    hi: float | None
    se: float | None
    n: int
    method: str
    estimable: bool = True
    reason: str | None = None
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-safe data."""
        return asdict(self)


@dataclass(frozen=True)
class StratumEstimate:
    """The prevalence in one stratum with its Wilson interval."""

    stratum: str
    N: int
    n: int
    positives: int
    weight: float
    estimate: float | None
    lo: float | None
    hi: float | None
    method: str = WILSON

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-safe data."""
        return asdict(self)


@dataclass(frozen=True)
class PrevalenceResult:
    """Frame prevalence and per-stratum prevalences."""

    overall: ProportionEstimate
    strata: list[StratumEstimate] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-safe data."""
        return {"overall": self.overall.as_dict(), "strata": [s.as_dict() for s in self.strata]}


def _num(x: SupportsFloat | None) -> float | None:
    """A float, or None for None/NaN/inf (JSON has no NaN)."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def estimability(is_probability_sample: bool, strategy: str | None = None) -> Estimability:
    """Whether frame estimates are possible from a campaign.

    Args:
        is_probability_sample: the campaign drew a sample with known inclusion probabilities.
        strategy: the campaign's strategy (only used to word the refusal).
    """
    if is_probability_sample:
        return Estimability(True)
    return Estimability(False, NOT_A_SAMPLE_MANUAL if strategy == "manual" else NOT_A_SAMPLE)


def refusal(reason: str = NOT_A_SAMPLE, n: int = 0) -> ProportionEstimate:
    """A ProportionEstimate that says plainly why there is no estimate."""
    return ProportionEstimate(None, None, None, None, n, "none", estimable=False, reason=reason)


def _groups(strata: Sequence[Hashable] | np.ndarray, size: int) -> tuple[list[Any], np.ndarray]:
    """Distinct stratum keys (first-seen order) and each unit's group index."""
    keys = list(dict.fromkeys(strata)) if size else []
    index = {key: i for i, key in enumerate(keys)}
    return keys, np.array([index[s] for s in strata], dtype=int)


def design_groups(strata: Sequence[Hashable] | np.ndarray, keys: Sequence[Any]) -> np.ndarray:
    """Each unit's position among the design's strata keys (ValueError naming any unknown)."""
    # Units are many (every validated work), strata few: factorise in C, map the few.
    codes, uniques = pd.factorize(
        np.asarray(list(strata) if not isinstance(strata, np.ndarray) else strata, dtype=object)
    )
    index = {key: h for h, key in enumerate(keys)}
    unknown = sorted(str(u) for u in uniques if u not in index)
    if unknown:
        raise ValueError(f"units in strata outside the design: {', '.join(unknown)}")
    return (
        np.array([index[u] for u in uniques], dtype=int)[codes]
        if len(codes)
        else np.zeros(0, dtype=int)
    )


def stratified_prevalence(
    y: Sequence[int] | np.ndarray,
    strata: Sequence[Hashable] | np.ndarray,
    population: Mapping[Any, int],
    alpha: float = 0.05,
    groups: np.ndarray | None = None,
) -> PrevalenceResult:
    """Prevalence in the frame and in each stratum from a stratified random sample.

    Args:
        y: 0/1 human answer of each labelled unit.
        strata: the stratum key of each unit (keys of `population`).
        population: N_h of every stratum of the design (strata with no labelled unit make the
            frame estimate not estimable; they are still listed).
        alpha: 1 - confidence level.
        groups: design_groups(strata, population) when already computed (many labels, the
            same units).
    """
    y = np.asarray(y, dtype=float)
    labels = design_groups(strata, list(population)) if groups is None else groups
    total_N = sum(int(v) for v in population.values())
    rows: list[StratumEstimate] = []
    k_list, n_list, N_list, empty, single = [], [], [], [], []
    n_of = np.bincount(labels, minlength=len(population))
    k_of = np.bincount(labels, weights=y, minlength=len(population))
    for h, (key, N_h) in enumerate(population.items()):
        n_h, k_h = int(n_of[h]), int(k_of[h])
        lo, hi = wilson(k_h, n_h, alpha)
        rows.append(
            StratumEstimate(
                stratum=str(key),
                N=int(N_h),
                n=n_h,
                positives=k_h,
                weight=N_h / total_N if total_N else 0.0,
                estimate=k_h / n_h if n_h else None,
                lo=lo,
                hi=hi,
            )
        )
        if N_h <= 0:
            continue
        if n_h == 0:
            empty.append(str(key))
        if n_h == 1 and N_h > 1:
            single.append(str(key))
        k_list.append(k_h)
        n_list.append(n_h)
        N_list.append(N_h)
    n_total = int(len(y))
    if n_total == 0:
        return PrevalenceResult(refusal("no validated works in the sample yet"), rows)
    if empty:
        why = f"no validated works yet in strata: {', '.join(empty)}"
        return PrevalenceResult(refusal(why, n_total), rows)
    out = stratified_counts(np.array(k_list), np.array(n_list), np.array(N_list), alpha)
    note = None
    if single:
        note = (
            "one validated work only in strata "
            + ", ".join(single)
            + ": their variance is taken at its maximum (conservative)"
        )
    overall = ProportionEstimate(
        estimate=_num(out["p"]),
        lo=_num(out["lo"]),
        hi=_num(out["hi"]),
        se=_num(math.sqrt(out["var"])),
        n=n_total,
        method=KG,
        note=note,
    )
    return PrevalenceResult(overall, rows)


def _stratified_var_of_total(
    z: np.ndarray, groups: np.ndarray, N_h: np.ndarray, n_h: np.ndarray
) -> float:
    """Variance of the estimated total of z under stratified SRSWOR."""
    var = 0.0
    for h in range(len(N_h)):
        zh = z[groups == h]
        if n_h[h] < 2:
            # One unit: no within-stratum variance estimate; contributes nothing here.
            continue
        var += N_h[h] ** 2 * (1 - n_h[h] / N_h[h]) * zh.var(ddof=1) / n_h[h]
    return float(var)


def _indicator(x: np.ndarray, name: str) -> None:
    """Refuse anything but 0/1 values (the ratio's variance is written for indicators)."""
    if not np.isin(x, (0.0, 1.0)).all():
        raise ValueError(f"{name} must hold 0/1 indicators only")


def ratio_estimate(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    strata: Sequence[Hashable] | np.ndarray,
    population: Mapping[Any, int],
    alpha: float = 0.05,
    groups: np.ndarray | None = None,
) -> ProportionEstimate:
    """Ratio T(a) / T(b) of two estimated frame totals (0/1 indicators, a <= b).

    Args:
        a: numerator indicator per labelled unit (e.g. y & R).
        b: denominator indicator per labelled unit (e.g. R for precision, y for recall).
        strata: stratum key of each unit (keys of `population`).
        population: N_h per stratum.
        alpha: 1 - confidence level.
        groups: design_groups(strata, population) when already computed.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    _indicator(a, "the numerator")
    _indicator(b, "the denominator")
    if (a > b).any():
        raise ValueError("the numerator must imply the denominator (a <= b)")
    keys = list(population)
    groups = design_groups(strata, keys) if groups is None else groups
    n_h = np.bincount(groups, minlength=len(keys)).astype(float)
    N_h = np.array([float(population[k]) for k in keys])
    n_dom = int(b.sum())
    empty = [str(k) for k, n, N in zip(keys, n_h, N_h, strict=True) if N > 0 and n == 0]
    if empty:
        return refusal(f"no validated works yet in strata: {', '.join(empty)}", n_dom)
    live = N_h > 0
    c_h = np.bincount(groups, weights=a, minlength=len(keys))[live]
    m_h = np.bincount(groups, weights=b, minlength=len(keys))[live]
    out = ratio_counts(c_h, m_h, n_h[live], N_h[live], alpha)
    if not out["defined"]:
        return refusal("no unit of the sample falls in the denominator", n_dom)
    single = [str(k) for k, n, N in zip(keys, n_h, N_h, strict=True) if n == 1 and N > 1]
    note = None
    if single:
        note = (
            "one validated work only in strata "
            + ", ".join(single)
            + ": their variance is taken at its maximum (conservative)"
        )
    return ProportionEstimate(
        estimate=_num(out["p"]),
        lo=_num(out["lo"]),
        hi=_num(out["hi"]),
        se=_num(math.sqrt(out["var"])),
        n=n_dom,
        method=KG,
        note=note,
    )


def precision_recall(
    y: Sequence[int] | np.ndarray,
    r: Sequence[int] | np.ndarray,
    strata: Sequence[Hashable] | np.ndarray,
    population: Mapping[Any, int],
    alpha: float = 0.05,
    groups: np.ndarray | None = None,
) -> dict[str, ProportionEstimate]:
    """Frame precision T(y & R)/T(R) and recall T(y & R)/T(y) of a machine rule R.

    Args:
        y: human answer (0/1) per labelled unit.
        r: the rule's call (0/1) per labelled unit.
        strata: stratum key of each unit.
        population: N_h per stratum.
        alpha: 1 - confidence level.
        groups: design_groups(strata, population) when already computed.
    """
    y, r = np.asarray(y, dtype=float), np.asarray(r, dtype=float)
    both = y * r
    if groups is None:
        groups = design_groups(strata, list(population))
    return {
        "precision": ratio_estimate(both, r, strata, population, alpha, groups),
        "recall": ratio_estimate(both, y, strata, population, alpha, groups),
    }


def _by_pi(
    y: np.ndarray, pi: np.ndarray, strata: Sequence[Hashable] | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Weights, group index, estimated N_h and n_h from inclusion probabilities."""
    if np.any(pi <= 0) or np.any(pi > 1):
        raise ValueError("inclusion probabilities must be in (0, 1]")
    w = 1.0 / pi
    _, groups = _groups([0] * len(y) if strata is None else list(strata), len(y))
    H = int(groups.max()) + 1 if len(y) else 0
    N_h = np.bincount(groups, weights=w, minlength=H)
    n_h = np.bincount(groups, minlength=H).astype(float)
    return w, groups, N_h, n_h


def horvitz_thompson_total(
    y: Sequence[float] | np.ndarray,
    pi: Sequence[float] | np.ndarray,
    strata: Sequence[Hashable] | None = None,
) -> dict[str, float | int | None]:
    """Horvitz-Thompson total sum y_i / pi_i with its stratified-SRSWOR standard error.

    Args:
        y: the value of each sampled unit.
        pi: each unit's inclusion probability.
        strata: stratum of each unit (None = one simple random sample).
    """
    y, pi = np.asarray(y, dtype=float), np.asarray(pi, dtype=float)
    w, groups, N_h, n_h = _by_pi(y, pi, strata)
    var = _stratified_var_of_total(y, groups, N_h, n_h)
    return {"total": _num(float((w * y).sum())), "se": _num(math.sqrt(var)), "n": len(y)}


def hajek_mean(
    y: Sequence[float] | np.ndarray,
    pi: Sequence[float] | np.ndarray,
    strata: Sequence[Hashable] | None = None,
    alpha: float = 0.05,
) -> ProportionEstimate:
    """Hajek ratio sum w_i y_i / sum w_i (w = 1/pi) of a 0/1 y, linearised variance, KG interval.

    Args:
        y: 0/1 value of each sampled unit.
        pi: each unit's inclusion probability.
        strata: stratum of each unit (None = one simple random sample).
        alpha: 1 - confidence level.
    """
    y, pi = np.asarray(y, dtype=float), np.asarray(pi, dtype=float)
    if len(y) == 0:
        return refusal("no sampled units", 0)
    w, groups, N_h, n_h = _by_pi(y, pi, strata)
    mean = float((w * y).sum() / w.sum())
    var = _stratified_var_of_total((y - mean) / w.sum(), groups, N_h, n_h)
    lo, hi = korn_graubard(mean, var, len(y), df=max(len(y) - len(N_h), 1), alpha=alpha)
    return ProportionEstimate(
        estimate=_num(mean),
        lo=_num(float(lo)),
        hi=_num(float(hi)),
        se=_num(math.sqrt(var)),
        n=len(y),
        method=KG,
    )
