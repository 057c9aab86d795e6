"""Low-level inter-rater agreement coefficients over rating and count matrices (pure numpy).

Vocabulary:
- a *rating matrix* is units x raters, one cell per (unit, rater), None/NaN = not rated;
- a *count matrix* is units x categories, cell = how many raters put the unit in the category
  (what ``statsmodels.stats.inter_rater.aggregate_raters`` builds and ``krippendorff.alpha``
  calls ``value_counts``). Rows may sum to different numbers: units need not be rated by every
  rater. Every coefficient below is computed from such a matrix.

Every coefficient is a function of a few *per-unit additive summaries* of the count matrix
(``count_features``); summing those summaries with bootstrap weights gives the coefficient of a
resample without touching the labels again, which is what makes the bootstrap fast.

Undefined values (no unit with two ratings, a single category in use, ...) are None, never NaN.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import krippendorff
import numpy as np
import pandas as pd
from scipy import sparse
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa as _statsmodels_fleiss_kappa

from labeling.numbers import finite_or_none

Level = Literal["nominal", "ordinal", "interval", "ratio"]
LEVELS: tuple[Level, ...] = ("nominal", "ordinal", "interval", "ratio")
CI_LEVEL = 0.95
# A percentile interval needs most replicates to be defined: resamples of a rare label may lose
# all its positives (coefficient undefined); below this share of defined replicates the CI is None.
MIN_DEFINED_SHARE = 0.5
# Fewest works with two labels or more for an interval to be shown (checked_ci): below it a
# resample holds a handful of distinct works and the percentile interval misleads.
MIN_CI_WORKS = 10
_EPS = 1e-12
MEASURES = ("alpha", "fleiss", "ac1", "pa")


def check_level(level: str) -> Level:
    """``level`` as a Krippendorff level of measurement; ValueError when it is none."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, not {level!r}")
    return level


def krippendorff_alpha(reliability_data: Any, level: str = "nominal") -> float | None:
    """Krippendorff's alpha of a units x raters rating matrix, by the ``krippendorff`` package.

    Args:
        reliability_data: rows = units, columns = raters (the transpose of what
            ``krippendorff.alpha`` takes); None/NaN = not rated. Any hashable values for
            "nominal"; numbers for the other levels (their values set the distances).
        level: "nominal", "ordinal", "interval" or "ratio".

    Returns:
        Alpha, or None when undefined (fewer than two distinct values, no unit with two
        ratings, no disagreement expected). Units with fewer than two ratings add nothing.
    """
    measure = check_level(level)
    raw = pd.DataFrame(reliability_data).to_numpy(dtype=object)
    missing = pd.isna(raw)
    data = np.full(raw.shape, np.nan)
    if level == "nominal":
        data[~missing] = pd.factorize(raw[~missing])[0]
    else:
        data[~missing] = raw[~missing].astype(float)
    try:
        with np.errstate(divide="ignore", invalid="ignore"):
            value = krippendorff.alpha(reliability_data=data.T, level_of_measurement=measure)
    except ValueError:  # the package refuses a one-value domain or no pairable unit
        return None
    return finite_or_none(value)


def package_alpha_from_counts(
    counts: np.ndarray,
    level: str = "nominal",
    value_domain: Sequence[float] | np.ndarray | None = None,
) -> float | None:
    """Krippendorff's alpha of a units x values count matrix, by the ``krippendorff`` package."""
    counts = np.asarray(counts)
    counts = counts[counts.sum(axis=1) >= 2]  # unpairable units add nothing to alpha
    if counts.shape[0] == 0 or counts.shape[1] < 2:
        return None
    try:
        with np.errstate(divide="ignore", invalid="ignore"):
            value = krippendorff.alpha(
                value_counts=counts,
                value_domain=value_domain,
                level_of_measurement=check_level(level),
            )
    except ValueError:
        return None
    return finite_or_none(value)


def count_features(counts: Any, outer: bool = False) -> Any:
    """Per-unit additive summaries of a units x categories count matrix (dense or scipy sparse).

    Columns: pairable counts n_uc (units with >= 2 ratings), shares n_uc/m_u (units with >= 1),
    a_u = sum_c n_uc(n_uc-1)/(m_u-1), pa_u = a_u/m_u, [m_u >= 1], [m_u >= 2], and, with
    ``outer`` (dense only), the unit's coincidences n_uc n_uk/(m_u-1) (non-nominal alpha).
    A sparse input (many categories, few used per unit) gives a sparse CSR output.
    """
    is_sparse = sparse.issparse(counts)
    c = sparse.csr_matrix(counts, dtype=float) if is_sparse else np.asarray(counts, dtype=float)
    m = np.asarray(c.sum(axis=1), dtype=float).reshape(-1)
    one, two = m >= 1, m >= 2
    m_safe = np.where(one, m, 1.0)
    m1_safe = np.where(two, m - 1.0, 1.0)
    # The sparse branch's c is a CSR matrix (its own elementwise product), the dense an array.
    squares = c.multiply(c) - c if is_sparse else c * (c - 1.0)  # type: ignore[union-attr]
    a = np.where(two, np.asarray(squares.sum(axis=1)).reshape(-1) / m1_safe, 0.0)
    scalars = np.column_stack([a, a / m_safe, one, two]).astype(float)
    if is_sparse:
        pair = sparse.diags(two.astype(float)) @ c
        share = sparse.diags(1.0 / m_safe) @ c
        return sparse.hstack([pair, share, sparse.csr_matrix(scalars)], format="csr")
    pair = c * two[:, None]
    cols = [pair, c / m_safe[:, None], scalars]
    if outer:
        k = c.shape[1]
        cols.append((pair[:, :, None] * pair[:, None, :]).reshape(len(c), k * k) / m1_safe[:, None])
    return np.hstack(cols)


def weighted_sums(weights: np.ndarray, features: Any) -> np.ndarray:
    """``weights @ features`` (resamples x rows times rows x features) for dense or sparse."""
    if sparse.issparse(features):
        return np.asarray((features.T @ weights.T).T)
    return weights @ features


def _distances(level: str, values: np.ndarray, n_c: np.ndarray) -> np.ndarray:
    """Krippendorff's squared distances between values, one V x V matrix per row of ``n_c``."""
    v = np.asarray(values, dtype=float)
    diff = v[:, None] - v[None, :]
    if level == "interval":
        d = diff**2
    elif level == "ratio":
        total = v[:, None] + v[None, :]
        d = np.divide(diff, total, out=np.zeros_like(diff), where=total != 0) ** 2
    else:  # ordinal: depends on the marginal frequencies, so on the replicate
        idx = np.arange(len(v))
        lo, hi = np.minimum.outer(idx, idx), np.maximum.outer(idx, idx)
        cum = np.cumsum(n_c, axis=1)
        between = cum[:, hi] - cum[:, lo] + n_c[:, lo]
        return (between - (n_c[:, :, None] + n_c[:, None, :]) / 2.0) ** 2
    return np.broadcast_to(d, (n_c.shape[0], *d.shape))


def measures_from_sums(
    sums: np.ndarray,
    k: int,
    level: str = "nominal",
    values: Sequence[float] | np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Alpha, Fleiss' kappa, Gwet's AC1 and percent agreement from summed ``count_features``.

    Args:
        sums: one row per (weighted) sample of units: the column sums of ``count_features``.
        k: number of categories (AC1 uses it as the number of categories of the scale).
        level: Krippendorff level; non-nominal levels need features built with ``outer=True``.
        values: the category values for interval/ratio distances (default 0..k-1).

    Returns:
        Arrays (one value per row, NaN = undefined) under "alpha", "fleiss", "ac1", "pa".
    """
    s = np.atleast_2d(np.asarray(sums, dtype=float))
    n_c, pi_sum = s[:, :k], s[:, k : 2 * k]
    a, pa_sum, n1, n2 = s[:, 2 * k], s[:, 2 * k + 1], s[:, 2 * k + 2], s[:, 2 * k + 3]
    nan = np.full(len(s), np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        pa = np.where(n2 > 0, pa_sum / n2, np.nan)
        pi = pi_sum / n1[:, None]
        # Fleiss' kappa generalised to a varying number of raters per unit (Gwet 2014, as in
        # irrCAC fleiss.kappa.raw): hand-written because statsmodels needs equal raters per unit;
        # it equals statsmodels' fleiss_kappa exactly when every unit has the same raters.
        pe_fleiss = (pi**2).sum(axis=1)
        ok = (n2 > 0) & (1.0 - pe_fleiss > _EPS) & (k >= 2)
        fleiss = np.where(ok, (pa - pe_fleiss) / (1.0 - pe_fleiss), np.nan)
        if k >= 2:
            # Gwet's AC1 (Gwet 2008; Handbook of Inter-Rater Reliability 2014), multi-rater with
            # missing ratings; hand-written because no well-kept Python library implements it.
            pe_gwet = (pi * (1.0 - pi)).sum(axis=1) / (k - 1)
            ac1 = np.where(n2 > 0, (pa - pe_gwet) / (1.0 - pe_gwet), np.nan)
        else:
            ac1 = nan
        n = n_c.sum(axis=1)
        if level == "nominal":
            den = n**2 - (n_c**2).sum(axis=1)
            num = (n - 1.0) * (n - a)
        else:
            vals = np.arange(k, dtype=float) if values is None else np.asarray(values, float)
            o = s[:, 2 * k + 4 : 2 * k + 4 + k * k].reshape(-1, k, k)
            d = _distances(level, vals, n_c)
            den = np.einsum("bi,bj,bij->b", n_c, n_c, d)
            num = (n - 1.0) * (o * d).sum(axis=(1, 2))
        alpha = np.where((n2 > 0) & (den > _EPS * np.maximum(n, 1.0) ** 2), 1.0 - num / den, nan)
    return {"alpha": alpha, "fleiss": fleiss, "ac1": ac1, "pa": pa}


def _point(counts: Any, measure: str) -> float | None:
    """One coefficient of a count matrix through ``measures_from_sums``."""
    c = np.asarray(counts, dtype=float)
    if c.ndim != 2 or c.shape[0] == 0:
        return None
    return finite_or_none(measures_from_sums(count_features(c).sum(axis=0), c.shape[1])[measure][0])


def alpha_from_counts(
    counts: Any, level: str = "nominal", value_domain: Sequence[float] | None = None
) -> float | None:
    """Krippendorff's alpha of a count matrix, vectorised (equals ``krippendorff.alpha``).

    Args:
        counts: units x values count matrix.
        level: "nominal", "ordinal", "interval" or "ratio".
        value_domain: the (ordered) value of each column; default 0..V-1 as in the package.
    """
    check_level(level)
    c = np.asarray(counts, dtype=float)
    if c.ndim != 2 or c.shape[0] == 0:
        return None
    sums = count_features(c, outer=level != "nominal").sum(axis=0)
    return finite_or_none(measures_from_sums(sums, c.shape[1], level, value_domain)["alpha"][0])


def fleiss_kappa_from_counts(counts: Any) -> float | None:
    """Fleiss' kappa of a units x categories count matrix; None when undefined.

    Args:
        counts: units x categories counts. When every rated unit has the same number (>= 2) of
            ratings this is statsmodels' ``fleiss_kappa``; otherwise the generalisation to
            varying raters (pa over units with >= 2 ratings, pe = sum_k pi_k^2 with pi_k the
            mean over rated units of r_ik/r_i), which reduces to Fleiss' formula when equal.
    """
    c = np.asarray(counts, dtype=float)
    if c.ndim != 2:
        return None
    c = c[c.sum(axis=1) >= 1]
    if c.shape[0] == 0 or c.shape[1] < 2:
        return None
    m = c.sum(axis=1)
    if m.min() == m.max() >= 2:
        with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
            warnings.simplefilter("ignore")
            return finite_or_none(_statsmodels_fleiss_kappa(c))
    return _point(c, "fleiss")


def gwet_ac1_from_counts(counts: Any) -> float | None:
    """Gwet's AC1 of a units x categories count matrix (columns = the K categories of the scale).

    Args:
        counts: units x categories counts; rows may have different totals (missing ratings).
            pa = mean over units with r_i >= 2 of sum_k r_ik(r_ik-1)/(r_i(r_i-1));
            pe = sum_k pi_k(1-pi_k)/(K-1), pi_k = mean over rated units of r_ik/r_i.
    """
    return _point(counts, "ac1")


def percent_agreement_from_counts(counts: Any) -> float | None:
    """Share of agreeing pairs of ratings within a unit, averaged over units with >= 2 ratings.

    Args:
        counts: units x categories counts.
    """
    return _point(counts, "pa")


def cohen_kappa(a: Sequence[Any], b: Sequence[Any], weights: str | None = None) -> float | None:
    """Cohen's kappa of two raters by scikit-learn; None when undefined.

    Args:
        a: the first rater's labels, aligned with ``b`` (same units, same order).
        b: the second rater's labels; positions where either label is None/NaN are dropped.
        weights: None, "linear" or "quadratic" (scikit-learn's weighting).
    """
    x, y = np.asarray(a, dtype=object), np.asarray(b, dtype=object)
    keep = ~(pd.isna(x) | pd.isna(y))
    if not keep.any():
        return None
    return sklearn_kappa(x[keep].tolist(), y[keep].tolist(), weights)


def sklearn_kappa(
    a: Any, b: Any, weights: str | None = None, sample_weight: Any = None
) -> float | None:
    """scikit-learn's ``cohen_kappa_score`` with NaN (one label used by both) mapped to None."""
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore")
        return finite_or_none(cohen_kappa_score(a, b, weights=weights, sample_weight=sample_weight))


def kappa_from_table(table: np.ndarray) -> float | None:
    """scikit-learn's unweighted Cohen's kappa of a contingency table (rows: rater a), None
    when undefined: ``cohen_kappa_score``'s own steps (so the same float) without its
    per-call checks, which cost milliseconds for each of hundreds of pairs."""
    used = np.flatnonzero(table.sum(axis=0) + table.sum(axis=1))
    confusion = table[np.ix_(used, used)].astype(np.float64)
    sum0, sum1 = confusion.sum(axis=0), confusion.sum(axis=1)
    denominator = sum0.sum()
    if denominator == 0:
        return None
    expected = np.outer(sum0, sum1) / denominator
    w_mat = np.ones(confusion.shape, dtype=np.float64)
    np.fill_diagonal(w_mat, 0)
    den = np.sum(w_mat * expected)
    if den == 0:
        return None
    return finite_or_none(float(1 - np.sum(w_mat * confusion) / den))


def unique_rows(counts: Any) -> tuple[Any, np.ndarray, np.ndarray]:
    """Distinct rows of an integer matrix (dense or sparse): (patterns, inverse, frequency)."""
    is_sparse = sparse.issparse(counts)
    if is_sparse:
        c = sparse.csr_matrix(counts, dtype=np.int64)
        c.sum_duplicates()
        c.sort_indices()
    else:
        c = np.ascontiguousarray(counts, dtype=np.int64)
    if c.shape[0] == 0:
        return c, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    # A random linear hash groups rows fast; the exact check below falls back to
    # np.unique(axis=0) in the (astronomically unlikely) case of a collision.
    rng = np.random.default_rng(20240607)
    if is_sparse:
        keys = c @ rng.random(c.shape[1])
    else:
        with np.errstate(over="ignore"):
            keys = c @ rng.integers(1, 2**62, size=c.shape[1], dtype=np.int64)
    _, first, inverse, freq = np.unique(
        keys, return_index=True, return_inverse=True, return_counts=True
    )
    patterns = c[first]
    inverse = inverse.reshape(-1)
    if is_sparse:
        if abs(patterns[inverse] - c).sum() == 0:
            return patterns, inverse, freq
        dense, inverse, freq = np.unique(
            c.toarray(), axis=0, return_inverse=True, return_counts=True
        )
        return sparse.csr_matrix(dense), inverse.reshape(-1), freq
    if not np.array_equal(patterns[inverse], c):
        patterns, inverse, freq = np.unique(c, axis=0, return_inverse=True, return_counts=True)
    return patterns, inverse.reshape(-1), freq


def resample_patterns(
    freq: np.ndarray, n_boot: int, rng: np.random.Generator, block: int = 200
) -> Iterator[np.ndarray]:
    """Yield blocks of bootstrap weights per distinct pattern (resamples x patterns).

    Drawing n units with replacement, each unit's pattern drawn with probability freq/n, draws
    the patterns Multinomial(n, freq / n) times: the same resample law as drawing the units
    one by one and counting them by pattern (tests/stats/test_agreement.py), at a cost
    bounded by the patterns instead of the units.
    """
    n = int(np.sum(freq))
    p = np.asarray(freq, dtype=float) / max(n, 1)
    done = 0
    while done < n_boot:
        b = min(block, n_boot - done)
        yield rng.multinomial(n, p, size=b).astype(float)
        done += b


def percentile_ci(replicates: np.ndarray, conf: float = CI_LEVEL) -> list[float] | None:
    """Percentile interval of bootstrap replicates (undefined replicates left out), or None."""
    reps = np.asarray(replicates, dtype=float)
    finite = reps[np.isfinite(reps)]
    if reps.size == 0 or finite.size == 0 or finite.size < MIN_DEFINED_SHARE * reps.size:
        return None
    lo, hi = np.quantile(finite, [(1.0 - conf) / 2.0, (1.0 + conf) / 2.0])
    return [float(lo), float(hi)]


def checked_ci(
    point: float | None,
    interval: list[float] | None,
    n: int,
    min_n: int = MIN_CI_WORKS,
    resampled: bool = True,
) -> tuple[list[float] | None, str | None]:
    """An interval that may be shown, or None with the reason it may not.

    A percentile bootstrap interval at small n can lie wholly beside its estimate (8 works:
    alpha -0.09 [-0.28, -0.10]); BCa narrows that but does not rule it out. So an interval is
    shown only when its estimate has at least min_n units with two ratings or more (n) and
    lies within it.

    Args:
        point: the estimate (None: undefined).
        interval: the bootstrap interval [lo, hi] (None: not computed or not defined).
        n: units with two ratings or more that the estimate rests on.
        min_n: the fewest such units for an interval to be shown.
        resampled: whether a bootstrap ran at all (n_boot > 0).
    """
    if point is None:  # no estimate, no interval: nothing to explain beyond the dash
        return None, None
    if n < min_n:
        return None, f"fewer than {min_n} works with two labels or more ({n})"
    if not resampled:
        return None, "no bootstrap (n_boot = 0)"
    if interval is None:
        return None, "fewer than half the bootstrap resamples define the coefficient"
    lo, hi = interval
    if not lo - _EPS <= point <= hi + _EPS:
        return None, f"the bootstrap interval [{lo:.2f}, {hi:.2f}] does not contain the estimate"
    return interval, None


def bootstrap_from_counts(
    counts: Any,
    n_boot: int = 1000,
    seed: int = 0,
    level: str = "nominal",
    value_domain: Sequence[float] | None = None,
) -> dict[str, list[float] | None]:
    """Percentile bootstrap CIs (units resampled with replacement) of all four coefficients.

    Args:
        counts: units x categories count matrix.
        n_boot: number of resamples.
        seed: seed of ``numpy.random.default_rng``; the same seed gives the same intervals.
        level: Krippendorff level for alpha.
        value_domain: category values for interval/ratio alpha (default 0..V-1).

    Returns:
        {"alpha", "fleiss", "ac1", "pa"} -> [lo, hi] (95%) or None.
    """
    check_level(level)
    c = np.asarray(counts)
    k = c.shape[1]
    patterns, _, freq = unique_rows(c)
    feats = count_features(patterns, outer=level != "nominal")
    reps: dict[str, list[np.ndarray]] = {m: [] for m in MEASURES}
    rng = np.random.default_rng(seed)
    for weights in resample_patterns(freq, n_boot, rng):
        sums = weighted_sums(weights, feats)
        for name, arr in measures_from_sums(sums, k, level, value_domain).items():
            reps[name].append(arr)
    return {m: percentile_ci(np.concatenate(v)) if v else None for m, v in reps.items()}


def json_safe(obj: Any) -> Any:
    """Recursively turn numpy types into Python ones and NaN/inf/NA into None (JSON-ready).

    Args:
        obj: any nesting of dicts, lists, tuples, sets, numpy arrays and scalars.
    """
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [json_safe(v) for v in obj.tolist()]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, bool | int | str) or obj is None:
        return obj
    if isinstance(obj, float):
        return finite_or_none(obj)
    try:
        if pd.isna(obj):
            return None
    except (TypeError, ValueError):
        pass
    return obj
