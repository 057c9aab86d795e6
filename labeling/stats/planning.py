"""How many more labelled works a stratified sample needs for a target interval width (pure).

Choices, in one place:

- The interval is the one `labeling estimates` reports (labeling.stats.intervals): the
  Korn-Graubard interval of the stratified prevalence (stratified_counts), or of a ratio
  T(a) / T(b) for a teacher's precision or recall (ratio_counts). Its half-width is
  (hi - lo) / 2. The planner asks that same function what the interval would be after more
  labels, so the plan and the later report cannot disagree about the formula.
- Projection: a stratum's future labels are assumed to look like its current ones, with the
  same Jeffreys smoothing the interval's design effect uses ((k + 1/2) / (n + 1)); a stratum
  with no label yet counts as p = 1/2, the most variable case, so it is never starved.
  Projected counts are fractional on purpose (expected values; the interval functions take
  non-integer counts), which keeps the half-width a smooth, monotone function of the total.
- Allocation: Neyman, n_h proportional to N_h S_h (S_h the projected unit standard deviation;
  for a ratio, of the linearised residual b (a - R)), the variance-minimising allocation of
  stratified SRSWOR. The labels already given cannot be taken back and no stratum holds more
  than N_h, so the allocation is n_h = clip(lambda N_h S_h, n_h now, N_h), lambda chosen so
  that the total is reached ("water filling"), then rounded to whole works by largest
  remainder.
- The total: the fewest additional works whose projected half-width is at most the target,
  by bisection (the half-width falls as works are added; a census has width 0, so every
  target is reachable at worst by labelling every work).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from labeling.stats.intervals import JEFFREYS, ratio_counts, stratified_counts

Measure = Literal["prevalence", "precision", "recall"]
MEASURES: tuple[Measure, ...] = ("prevalence", "precision", "recall")


@dataclass(frozen=True)
class StratumCounts:
    """What one stratum holds now: N_h, labelled n_h, domain units m_h and hits c_h.

    For a prevalence the domain is every labelled unit (m = n) and c is the positives; for a
    ratio T(a) / T(b), m counts the units with b = 1 and c those with a = 1 (c <= m <= n).
    """

    stratum: str
    N: int
    n: int
    m: int
    c: int


@dataclass(frozen=True)
class StratumPlan:
    """One stratum's share of the plan."""

    stratum: str
    N: int
    n: int
    more: int
    planned: int


@dataclass(frozen=True)
class SamplePlan:
    """The plan for one measure: the target, where it stands and the works still needed."""

    measure: str
    target: float
    half_width_now: float | None
    estimate_now: float | None
    more: int
    projected_half_width: float
    strata: list[StratumPlan] = field(default_factory=list)
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-safe data."""
        return asdict(self)


def _smoothed(x: np.ndarray, of: np.ndarray) -> np.ndarray:
    """(x + 1/2) / (of + 1): the Jeffreys posterior mean, 1/2 where nothing is known."""
    return (x + JEFFREYS) / (of + 2 * JEFFREYS)


def _interval(
    measure: Measure, c: np.ndarray, m: np.ndarray, n: np.ndarray, N: np.ndarray, alpha: float
) -> dict[str, np.ndarray]:
    """The interval `labeling estimates` reports for these counts (estimate "p", "lo", "hi")."""
    if measure == "prevalence":
        return stratified_counts(c, n, N, alpha)
    return ratio_counts(c, m, n, N, alpha)


def _half_width(
    measure: Measure, c: np.ndarray, m: np.ndarray, n: np.ndarray, N: np.ndarray, alpha: float
) -> np.ndarray:
    """The reported interval's half-width (NaN when undefined)."""
    out = _interval(measure, c, m, n, N, alpha)
    return np.asarray((out["hi"] - out["lo"]) / 2, dtype=float)


def _unit_sd(measure: Measure, d: np.ndarray, q: np.ndarray, N: np.ndarray) -> np.ndarray:
    """Projected standard deviation per unit of what the estimator sums, per stratum."""
    if measure == "prevalence":
        return np.sqrt(q * (1 - q))
    ratio = (N * d * q).sum() / max(float((N * d).sum()), 1e-12)
    gap = q - ratio
    s2 = d * (gap**2 + q * (1 - q)) - (d * gap) ** 2
    return np.sqrt(np.maximum(s2, 0.0))


def neyman_allocation(
    total: int, weight: np.ndarray, low: np.ndarray, high: np.ndarray
) -> np.ndarray:
    """Whole units per stratum summing to `total`, proportional to `weight`, within bounds.

    Args:
        total: units to place in all (clipped to [sum(low), sum(high)]).
        weight: N_h S_h per stratum (any non-negative numbers).
        low: units each stratum already has (never taken away).
        high: the most units a stratum can hold (N_h).
    """
    low, high = low.astype(float), high.astype(float)
    total = int(min(max(total, low.sum()), high.sum()))
    w = np.where(weight > 0, weight, 1e-12)  # a zero-variance stratum still fills last
    lo_l, hi_l = 0.0, float((high / w).max()) + 1.0
    for _ in range(100):  # bisection on lambda: sum(clip(lambda w, low, high)) = total
        mid = (lo_l + hi_l) / 2
        if np.clip(mid * w, low, high).sum() < total:
            lo_l = mid
        else:
            hi_l = mid
    share = np.clip(hi_l * w, low, high)
    whole = np.minimum(np.floor(share), high)
    whole = np.maximum(whole, low)
    short = total - int(whole.sum())
    if short > 0:  # largest remainders first, where there is room
        room = whole < high
        order = np.argsort(-(share - whole) * room, kind="stable")
        for h in order[:short]:
            whole[h] += 1
    return whole.astype(int)


def plan_sample(
    strata: Sequence[StratumCounts],
    target: float,
    measure: Measure = "prevalence",
    alpha: float = 0.05,
) -> SamplePlan:
    """The fewest more labelled works (and where) for a 95% interval of +-target.

    Args:
        strata: the design's strata with their current counts (every stratum of the design,
            labelled or not).
        target: the wanted half-width of the interval, in (0, 0.5].
        measure: "prevalence" of a label, or a teacher's "precision" or "recall" for it.
        alpha: 1 - confidence level.

    Returns:
        The plan; `more` is 0 when the target is met already.
    """
    if not 0 < target <= 0.5:
        raise ValueError(f"the half-width must be in (0, 0.5], not {target!r}")
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {', '.join(MEASURES)}, not {measure!r}")
    live = [s for s in strata if s.N > 0]
    if not live:
        raise ValueError("the design has no stratum with works")
    N = np.array([s.N for s in live], dtype=float)
    n = np.array([min(s.n, s.N) for s in live], dtype=float)
    m = np.array([s.m for s in live], dtype=float)
    c = np.array([s.c for s in live], dtype=float)
    # Projected shares: the domain's share of a stratum (1 for a prevalence) and the
    # proportion inside the domain.
    d = np.ones_like(n) if measure == "prevalence" else _smoothed(m, n)
    q = _smoothed(c, m)
    weight = N * _unit_sd(measure, d, q, N)
    # Every stratum needs two labels for a variance of its own (one counts at its maximum).
    floor = np.maximum(n, np.minimum(2, N))
    start = int(floor.sum() - n.sum())

    def projected(extra: int) -> tuple[float, np.ndarray]:
        alloc = neyman_allocation(int(n.sum()) + extra, weight, floor, N).astype(float)
        new = alloc - n
        m_p = m + d * new if measure != "prevalence" else alloc
        c_p = c + q * (m_p - m)
        width = _half_width(measure, c_p, m_p, alloc, N, alpha)
        return float(np.nan_to_num(width, nan=math.inf)), alloc

    now = _now(measure, c, m, n, N, alpha)
    room = int((N - n).sum())
    alloc = n
    if now[1] is not None and now[1] <= target:
        extra, width = 0, now[1]
    elif room == 0:  # a census already: its interval is as narrow as it gets
        extra, width = 0, now[1] if now[1] is not None else 0.0
    else:
        lo, hi = start, room
        while lo < hi:  # the fewest extra works whose projected half-width meets the target
            mid = (lo + hi) // 2
            if projected(mid)[0] <= target:
                hi = mid
            else:
                lo = mid + 1
        extra = lo
        width, alloc = projected(extra)
    rows = [
        StratumPlan(s.stratum, s.N, int(n_h), int(a - n_h), int(a))
        for s, n_h, a in zip(live, n, alloc, strict=True)
    ]
    note = None
    if (n == 0).any():
        note = "strata with no label yet are planned as if half their works were positive"
    return SamplePlan(
        measure=measure,
        target=target,
        half_width_now=now[1],
        estimate_now=now[0],
        more=extra,
        projected_half_width=width,
        strata=rows,
        note=note,
    )


def _now(
    measure: Measure, c: np.ndarray, m: np.ndarray, n: np.ndarray, N: np.ndarray, alpha: float
) -> tuple[float | None, float | None]:
    """The estimate and half-width `labeling estimates` would report now (None if none)."""
    if (n == 0).any() or (measure != "prevalence" and m.sum() == 0):
        return None, None
    out = _interval(measure, c, m, n, N, alpha)
    p, width = float(out["p"]), float((out["hi"] - out["lo"]) / 2)
    return (p if math.isfinite(p) else None), (width if math.isfinite(width) else None)
