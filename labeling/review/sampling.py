"""Probability samples of works: strata by score_max, allocation, seeded draws, inclusion probs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from labeling.errors import CampaignError
from labeling.numbers import finite_float

DEFAULT_BINS = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0)
ALLOCATIONS = ("proportional", "equal")


def validate_bins(bins: Sequence[float] | None) -> list[float]:
    """Stratum edges: at least two strictly increasing numbers (default DEFAULT_BINS)."""
    edges = list(DEFAULT_BINS if bins is None else bins)
    if len(edges) < 2 or not all(finite_float(b) is not None for b in edges):
        raise CampaignError("bins must be a list of at least two finite numbers")
    if any(b >= a for a, b in zip(edges[1:], edges[:-1], strict=True)):
        raise CampaignError("bins must be strictly increasing")
    return [float(b) for b in edges]


def stratum_labels(bins: Sequence[float], column: str = "score_max") -> list[str]:
    """Names of the strata for bin edges, e.g. "score_max[0.30,0.50)"; the last is closed."""
    n = len(bins) - 1
    return [
        f"{column}[{bins[i]:.2f},{bins[i + 1]:.2f}{']' if i == n - 1 else ')'}" for i in range(n)
    ]


def assign_strata(scores: np.ndarray, bins: Sequence[float]) -> np.ndarray:
    """Stratum index of each score: 0..len(bins)-2, -1 for missing or out-of-range scores."""
    edges = np.asarray(bins, dtype=float)
    idx = np.searchsorted(edges, scores, side="right") - 1
    idx = np.where(scores == edges[-1], len(edges) - 2, idx)
    bad = np.isnan(scores) | (scores < edges[0]) | (scores > edges[-1])
    return np.where(bad, -1, idx)


def _fill(sizes: list[int], targets: list[float], n: int) -> list[int]:
    """Round targets to whole sizes (at least 1 per non-empty stratum) summing to n."""
    pairs = zip(sizes, targets, strict=True)
    alloc = [min(s, max(1, math.floor(t))) if s > 0 else 0 for s, t in pairs]
    while sum(alloc) < n:
        i = max(
            (i for i in range(len(sizes)) if alloc[i] < sizes[i]),
            key=lambda i: (targets[i] - alloc[i], -i),
        )
        alloc[i] += 1
    while sum(alloc) > n:
        i = max(
            (i for i in range(len(sizes)) if alloc[i] > 1),
            key=lambda i: (alloc[i] - targets[i], -i),
        )
        alloc[i] -= 1
    return alloc


def allocate(sizes: Sequence[int], n: int | None, allocation: str | int) -> list[int]:
    """Sample size per stratum.

    Args:
        sizes: population size N_h of each stratum.
        n: total sample size (not needed when allocation is a number per stratum).
        allocation: "proportional" (n_h proportional to N_h, at least 1 per non-empty
            stratum), "equal" (same n_h everywhere, what small strata cannot take goes to the
            others) or an int (that many per stratum, all of a smaller stratum).
    """
    sizes = [int(s) for s in sizes]
    if isinstance(allocation, int) and not isinstance(allocation, bool):
        if allocation < 1:
            raise CampaignError("n per stratum must be at least 1")
        return [min(allocation, s) for s in sizes]
    if allocation not in ALLOCATIONS:
        raise CampaignError(
            f"unknown allocation {allocation!r}: use proportional, equal or a number per stratum"
        )
    total, nonempty = sum(sizes), sum(1 for s in sizes if s > 0)
    if n is None or n < 1:
        raise CampaignError("a stratified sample needs a sample_size of at least 1")
    if n > total:
        raise CampaignError(f"sample of {n} is bigger than the population of {total} works")
    if n < nonempty:
        raise CampaignError(f"sample of {n} is smaller than the {nonempty} non-empty strata")
    if allocation == "proportional":
        return _fill(sizes, [n * s / total for s in sizes], n)
    targets = [0.0] * len(sizes)
    open_ = {i for i, s in enumerate(sizes) if s > 0}
    rest = float(n)
    while open_:
        share = rest / len(open_)
        capped = {i for i in open_ if sizes[i] <= share}
        if not capped:
            for i in open_:
                targets[i] = share
            break
        for i in capped:
            targets[i] = float(sizes[i])
            rest -= sizes[i]
        open_ -= capped
    return _fill(sizes, targets, n)


def draw_sample(
    ids: np.ndarray,
    scores: np.ndarray,
    strategy: str,
    n: int | None,
    allocation: str | int,
    bins: list[float],
    seed: int,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Draw a random or stratified sample: item rows in a seeded random order, and the design.

    Args:
        ids: work ids of the population, in id order.
        scores: score_max of each work (NaN for none), the stratification variable.
        strategy: "random" or "stratified".
        n: sample size (for stratified, not needed when allocation is a number per stratum).
        allocation: stratified allocation (see allocate).
        bins: score_max edges of the strata (stratified only).
        seed: random seed of the draw and of the queue order.
    """
    total = len(ids)
    rng = np.random.default_rng(seed)
    design: dict[str, Any] = {"design": strategy, "seed": seed, "N": total}
    if strategy == "random":
        if n is None or n < 1:
            raise CampaignError("a random sample needs a sample_size of at least 1")
        if n > total:
            raise CampaignError(f"sample of {n} is bigger than the population of {total} works")
        picked = rng.choice(total, size=n, replace=False)
        strata: list[str | None] = [None] * n
        probs = [n / total] * n
        design["n"] = n
    else:
        idx = assign_strata(scores, bins)
        labels = stratum_labels(bins)
        if (idx == -1).any():
            labels.append("score_max[missing or out of range]")
            idx = np.where(idx == -1, len(labels) - 1, idx)
        sizes = [int((idx == h).sum()) for h in range(len(labels))]
        alloc = allocate(sizes, n, allocation)
        parts, strata, probs, table = [], [], [], []
        for h, (size, n_h) in enumerate(zip(sizes, alloc, strict=True)):
            if size == 0:
                continue
            members = np.flatnonzero(idx == h)
            parts.append(members[rng.choice(size, size=n_h, replace=False)])
            strata += [labels[h]] * n_h
            probs += [n_h / size] * n_h
            table.append(
                {"stratum": labels[h], "N_h": size, "n_h": n_h, "inclusion_prob": n_h / size}
            )
        picked = np.concatenate(parts) if parts else np.array([], dtype=int)
        design.update(n=int(sum(alloc)), bins=bins, allocation=allocation, strata=table)
    order = rng.permutation(len(picked))
    rows = [
        {
            "work_id": ids[picked[j]],
            "position": pos + 1,
            "stratum": strata[j],
            "inclusion_prob": probs[j],
        }
        for pos, j in enumerate(order)
    ]
    return rows, design
