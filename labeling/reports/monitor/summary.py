"""The Monitor's answers at a glance: pure rules over small tables, no database, no Streamlit.

Choices, in one place:

- Time bins: the smallest step of BIN_STEPS (a minute up to a month) that covers the span of
  the activity in at most MAX_BINS bins, so the first day reads in minutes and a season in
  days or weeks. The cumulative line starts at zero one bin before the first activity and
  runs through empty bins, so even a single bin draws a line.
- Rate and ETA: labels that count towards the overlap in the trailing RATE_WINDOW (7 days,
  or since the first label when that is shorter), per hour of calendar time, with the exact
  Poisson (Garwood) 95% interval of that count; ETA = labels still wanted / rate, its
  interval from the rate's (unbounded when no label came in the window).
- Reliability of a question: Krippendorff's alpha against the usual thresholds,
  ALPHA_TENTATIVE = 0.667 (below: unreliable) and ALPHA_RELIABLE = 0.8 (below: tentative).
  The level follows the point estimate; the interval is shown next to it.
- Who needs attention: an annotator whose agreement with a reference (REFERENCES: the others'
  majority answer on the same works, the adjudicated answers, the gold checks; never the
  rule-validated answers, which the annotator's own label made) has a 95% Wilson upper bound
  below the pooled rate of everyone else on it; or whose
  median time per work has a distribution-free 95% interval entirely below half, or above
  twice, the median of everyone else's times (at least MIN_TIMED timed works).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import binom, chi2

from labeling.stats.estimates import wilson

NO_INTERVAL = "no interval because"  # the column saying why an estimate shows no interval
ALPHA_TENTATIVE = 0.667
ALPHA_RELIABLE = 0.8
MAX_BINS = 60
RATE_WINDOW = timedelta(days=7)
SPEED_FACTOR = 2.0
MIN_TIMED = 5
MEASURES = ("labelled", "skipped", "validated", "disputed")
# What an annotator's answers are held against (never the rule-validated answers, which their
# own label helped make: 1.00 by construction under the unanimous rule): the others' majority
# on the same works (leave one out), the answers a lead adjudicated, the gold checks.
REFERENCES = (
    ("others' answers", "others", "others_n"),
    ("adjudicated answers", "adjudicated", "adjudicated_n"),
    ("gold checks", "gold", "gold_n"),
)


@dataclass(frozen=True)
class BinStep:
    """One time step of the progress chart: pandas alias, nominal seconds, words."""

    alias: str
    seconds: float
    words: str


BIN_STEPS = (
    BinStep("1min", 60, "minute"),
    BinStep("5min", 300, "5 minutes"),
    BinStep("15min", 900, "15 minutes"),
    BinStep("1h", 3600, "hour"),
    BinStep("3h", 10800, "3 hours"),
    BinStep("6h", 21600, "6 hours"),
    BinStep("1D", 86400, "day"),
    BinStep("W", 7 * 86400, "week"),
    BinStep("M", 30.44 * 86400, "month"),
)


def choose_step(first: datetime, last: datetime, max_bins: int = MAX_BINS) -> BinStep:
    """The finest step that shows the span first..last in at most max_bins bins."""
    if max_bins < 1:
        raise ValueError("max_bins must be at least 1")
    span = max((pd.Timestamp(last) - pd.Timestamp(first)).total_seconds(), 0.0)
    for step in BIN_STEPS:
        if span / step.seconds + 1 <= max_bins:
            return step
    return BIN_STEPS[-1]


def bin_start(stamps: pd.Series, step: BinStep) -> pd.Series:
    """The start of each timestamp's bin (naive UTC)."""
    ts = pd.to_datetime(stamps, utc=True).dt.tz_convert(None)
    if step.alias in ("W", "M"):
        return ts.dt.to_period(step.alias).dt.start_time
    return ts.dt.floor(step.alias)


def _next_bins(start: pd.Timestamp, step: BinStep, n: int) -> pd.DatetimeIndex:
    """n consecutive bin starts from start."""
    freq = {"W": "W-MON", "M": "MS"}.get(step.alias, step.alias)
    return pd.date_range(start, periods=n, freq=freq)


def cumulative_progress(activity: pd.DataFrame, max_bins: int = MAX_BINS) -> pd.DataFrame:
    """Cumulative counts per bin of each measure, for a line chart.

    Args:
        activity: columns at (timestamp), kind (one of MEASURES) and n (count at that time).
        max_bins: the most bins the span may take (see choose_step).

    Returns:
        period, measure, works (cumulative), new (in the bin), step (words of the bin), one row
        per bin and measure from one bin before the first activity to the last; empty when
        there is no activity.
    """
    cols = ["period", "measure", "works", "new", "step"]
    if activity.empty or activity["n"].sum() == 0:
        return pd.DataFrame(columns=cols)
    at = pd.to_datetime(activity["at"], utc=True)
    step = choose_step(at.min(), at.max(), max_bins)
    start = bin_start(activity["at"], step)
    grid = _next_bins(start.min(), step, 2)
    before = start.min() - (grid[1] - grid[0])  # one empty bin first: a line from zero
    periods = _next_bins(before, step, 1)
    while periods[-1] < start.max():
        periods = _next_bins(before, step, len(periods) + 1)
    counts = (
        pd.DataFrame(
            {"period": start, "measure": activity["kind"].to_numpy(), "n": activity["n"].to_numpy()}
        )
        .groupby(["period", "measure"])["n"]
        .sum()
        .unstack("measure")
        .reindex(index=periods, columns=list(MEASURES))
        .fillna(0)
        .astype(int)
    )
    counts.index.name, counts.columns.name = "period", "measure"
    new = counts.stack().rename("new")
    total = counts.cumsum().stack().rename("works")
    out = pd.concat([total, new], axis=1).reset_index()
    out["step"] = step.words
    return out[cols]


def poisson_interval(k: int, level: float = 0.95) -> tuple[float, float]:
    """Exact (Garwood) interval of a Poisson mean from one count k."""
    if k < 0:
        raise ValueError("a count cannot be negative")
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(chi2.ppf(a, 2 * k) / 2)
    return lo, float(chi2.ppf(1 - a, 2 * k + 2) / 2)


def rate_and_eta(
    first: datetime | None,
    counted: int,
    in_window: int,
    remaining: int,
    now: datetime,
    window: timedelta = RATE_WINDOW,
) -> dict[str, Any]:
    """Labels per hour over the trailing window, and the time to the remaining labels.

    Args:
        first: when the first counted label came in (None: no label yet).
        counted: labels counted so far.
        in_window: labels counted in the last `window` (all of them when the first label is
            younger than the window).
        remaining: labels still wanted (overlap not yet reached, summed over works).
        now: the clock.
        window: the trailing window of the rate.

    Returns:
        remaining, n (labels in the window), hours (its length), per_hour, lo, hi, eta_hours,
        eta_lo, eta_hi (None when undefined; eta_hi None too when the rate's lower bound is 0).
    """
    out: dict[str, Any] = {
        "remaining": int(remaining),
        "n": 0,
        "hours": None,
        "per_hour": None,
        "lo": None,
        "hi": None,
        "eta_hours": None,
        "eta_lo": None,
        "eta_hi": None,
    }
    if first is None or counted <= 0:
        return out
    now_ts, first_ts = pd.Timestamp(now), pd.Timestamp(first)
    now_ts = now_ts.tz_localize("UTC") if now_ts.tzinfo is None else now_ts.tz_convert("UTC")
    first_ts = (
        first_ts.tz_localize("UTC") if first_ts.tzinfo is None else first_ts.tz_convert("UTC")
    )
    since = max(first_ts, now_ts - window)
    hours = max((now_ts - since).total_seconds() / 3600, 1 / 60)  # at least a minute
    k = int(in_window)
    lo, hi = poisson_interval(k)
    out.update(n=k, hours=hours, per_hour=k / hours, lo=lo / hours, hi=hi / hours)
    if remaining <= 0:
        out.update(eta_hours=0.0, eta_lo=0.0, eta_hi=0.0)
    elif k > 0:
        out.update(
            eta_hours=remaining / out["per_hour"],
            eta_lo=remaining / out["hi"],
            eta_hi=remaining / out["lo"],
        )
    return out


def sql_grain(first: datetime | None, last: datetime | None, max_bins: int = MAX_BINS) -> str:
    """How finely the database must count to feed choose_step: "minute", "hour" or "day"."""
    if first is None or last is None:
        return "minute"
    step = choose_step(first, last, max_bins)
    if step.seconds < 3600:
        return "minute"
    return "hour" if step.seconds < 86400 else "day"


def alpha_level(alpha: float | None) -> str:
    """ "unreliable", "tentative" or "reliable" by the usual alpha thresholds; "undefined"."""
    if alpha is None or pd.isna(alpha):
        return "undefined"
    if alpha < ALPHA_TENTATIVE:
        return "unreliable"
    return "tentative" if alpha < ALPHA_RELIABLE else "reliable"


def question_reliability(agreement: pd.DataFrame) -> pd.DataFrame:
    """One row per question (not per label): alpha, interval, level, n; worst first.

    Args:
        agreement: rows of report_tables.agreement_table.
    """
    cols = ["question", "alpha", "alpha_lo", "alpha_hi", "level", "n_works", "n_labels"]
    if "alpha_ci_reason" in agreement:  # why an alpha has no interval (view.with_reasons)
        agreement = agreement.rename(columns={"alpha_ci_reason": NO_INTERVAL})
        cols.insert(cols.index("level"), NO_INTERVAL)
    rows = agreement[(agreement["label"] == "") & (agreement["n_labels"].fillna(0) > 0)]
    if rows.empty:
        return pd.DataFrame(columns=cols)
    out = rows.assign(level=[alpha_level(a) for a in rows["alpha"]])[cols]
    rank = out["level"].map({"unreliable": 0, "tentative": 1, "undefined": 2, "reliable": 3})
    return (
        out.assign(_r=rank, _a=out["alpha"].fillna(np.inf))
        .sort_values(["_r", "_a", "question"])
        .drop(columns=["_r", "_a"])
        .reset_index(drop=True)
    )


def median_interval(values: Sequence[float], level: float = 0.95) -> tuple[Any, Any, Any]:
    """The median and its distribution-free interval from order statistics (None if empty)."""
    x = np.sort(np.asarray(values, dtype=float))
    n = len(x)
    if n == 0:
        return None, None, None
    a = (1 - level) / 2
    j = int(binom.ppf(a, n, 0.5))  # x[j-1]..x[n-j] covers the median with >= level
    lo = float(x[j - 1]) if j >= 1 else None
    hi = float(x[n - j]) if j >= 1 else None
    return float(np.median(x)), lo, hi


def annotator_speed(times: pd.DataFrame) -> pd.DataFrame:
    """Per annotator: median seconds per work with its interval, n, and others' median.

    Args:
        times: columns annotator, seconds (one row per timed current label).
    """
    cols = ["annotator", "median_seconds", "median_lo", "median_hi", "time_n", "others_median"]
    # Integer codes and float arrays: a string comparison per annotator costs more than this.
    codes, names = pd.factorize(times["annotator"], sort=True)
    seconds = times["seconds"].to_numpy(dtype=float)
    rows = []
    for c, who in enumerate(names):
        mine = codes == c
        med, lo, hi = median_interval(seconds[mine])
        others = seconds[~mine]
        others = others[~np.isnan(others)]
        n = int(mine.sum())
        rows.append((who, med, lo, hi, n, float(np.median(others)) if len(others) else None))
    return pd.DataFrame(rows, columns=cols)


def _secs(x: float) -> str:
    """Seconds as text: one decimal under ten seconds."""
    return f"{x:.1f} s" if x < 10 else f"{x:.0f} s"


def _num(x: Any) -> float | None:
    """A float, or None for None and NaN."""
    return None if x is None or pd.isna(x) else float(x)


def _share_flag(k: int, n: int, others_k: int, others_n: int) -> bool:
    """Whether k of n is clearly below the others' pooled share (Wilson upper bound)."""
    if n == 0 or others_n == 0:
        return False
    _, hi = wilson(k, n)
    return hi is not None and hi < others_k / others_n


def speed_flag(lo: float | None, hi: float | None, n: int, others: float | None) -> str | None:
    """ "unusually fast" / "unusually slow" against the others' median time, else None."""
    if others is None or n < MIN_TIMED or lo is None or hi is None or others <= 0:
        return None
    if hi < others / SPEED_FACTOR:
        return "unusually fast"
    if lo > others * SPEED_FACTOR:
        return "unusually slow"
    return None


def attention(annotators: pd.DataFrame) -> pd.DataFrame:
    """The annotators who need a look, one row per reason, with the number and its n.

    Args:
        annotators: columns annotator, and per REFERENCES a share and its n (others,
            adjudicated, gold: those absent are not compared),
            median_seconds, median_lo, median_hi, time_n, others_median.

    Returns:
        annotator, reason, value (text), others (text), n.
    """
    cols = ["annotator", "reason", "value", "others", "n"]
    rows = []
    for kind, s_col, n_col in REFERENCES:
        if s_col not in annotators:
            continue
        n_all = annotators[n_col].fillna(0).astype(int)
        k_all = (annotators[s_col].fillna(0) * n_all).round().astype(int)
        total_k, total_n = int(k_all.sum()), int(n_all.sum())
        for r, k, n in zip(annotators.itertuples(index=False), k_all, n_all, strict=True):
            ok, on = int(total_k - k), int(total_n - n)
            if _share_flag(k, n, ok, on):
                lo, hi = wilson(k, n)
                rows.append(
                    (
                        r.annotator,
                        f"far from the {kind}",
                        f"{k / n:.0%} [{lo:.0%}, {hi:.0%}]",
                        f"{ok / on:.0%} of {on}",
                        n,
                    )
                )
    for r in annotators.itertuples(index=False):
        flag = speed_flag(
            _num(r.median_lo), _num(r.median_hi), int(r.time_n), _num(r.others_median)
        )
        if flag:
            rows.append(
                (
                    r.annotator,
                    flag,
                    f"{_secs(r.median_seconds)} per work [{_secs(r.median_lo)}, "
                    f"{_secs(r.median_hi)}]",
                    _secs(r.others_median),
                    int(r.time_n),
                )
            )
    return pd.DataFrame(rows, columns=cols)
