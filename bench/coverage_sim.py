"""Coverage of the 95% frame-estimate intervals over repeated stratified samples (issue 12).

Run: ``.venv/bin/python bench/coverage_sim.py [--reps 6000] [--sweep] [--grid]``. A fixed
frame of six strata (8,883 / 6,740 / 2,145 / 882 / 659 / 691 works) with exactly
round(p_h N_h) positives in stratum h; each replicate draws a stratified simple random sample
without replacement (hypergeometric counts) with equal or proportional allocation, and each
interval is checked against the frame's true proportion. Columns:

- ``smoothed``: the estimator in use (``labeling.stats.intervals``; Korn-Graubard with the design
  effect from Jeffreys-smoothed stratum proportions);
- ``R svyciprop``: Korn-Graubard with the plug-in n* = p (1 - p) / V and df = n - H, as R's
  ``survey::svyciprop(method="beta")`` (the estimator before issue 12);
- ``truncated``: the same with n* capped at n (NCHS standard; ``truncate=True``);
- ``upper below truth``: the share of ``smoothed`` intervals missing on the high side;
- ``CP on SRS``: Clopper-Pearson on a simple random sample of the same n from the same frame:
  the exact interval's own coverage at that truth (above 0.95 when positives are few, because
  the count takes few values, whatever the design).

``--sweep`` moves the prevalence of the biggest stratum (44% of the frame) from 0.002 to 0.1
under equal allocation. ``--grid`` adds 240 more cells (n 60-600, equal / proportional /
Neyman allocation, 20 prevalence profiles of which 12 are drawn at random) and summarises each
estimator, with smaller smoothing pseudo-counts to show what they cost. Precision and recall of
a machine rule use multivariate hypergeometric draws of the four (human, rule) cells per
stratum.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from labeling.stats.intervals import clopper_pearson, korn_graubard, ratio_counts, stratified_counts

N_H = np.array([8883, 6740, 2145, 882, 659, 691])
PROFILES: dict[str, list[float]] = {
    "p_h 0.01-0.8 (rare in big strata)": [0.01, 0.03, 0.1, 0.3, 0.5, 0.8],
    "every p_h 0.005": [0.005] * 6,
    "p_h 0.002-0.2 (all rare)": [0.002, 0.005, 0.01, 0.05, 0.1, 0.2],
    "p_h 0.8-0.01 (common in big strata)": [0.8, 0.5, 0.3, 0.1, 0.03, 0.01],
    "every p_h 0.3": [0.3] * 6,
}
# (prevalence, P(rule | positive), P(rule | negative)) per stratum
RULES: dict[str, tuple[list[float], list[float], list[float]]] = {
    "noisy rule, p_h 0.01-0.8": (
        [0.01, 0.03, 0.1, 0.3, 0.5, 0.8],
        [0.3, 0.4, 0.6, 0.8, 0.9, 0.95],
        [0.002, 0.01, 0.05, 0.1, 0.2, 0.4],
    ),
    "score threshold, p_h 0.002-0.2": (
        [0.002, 0.005, 0.01, 0.05, 0.1, 0.2],
        [0, 0, 0, 0, 1, 1],
        [0, 0, 0, 0, 1, 1],
    ),
    "noisy rule, every p_h 0.02": (
        [0.02] * 6,
        [0.2, 0.3, 0.5, 0.7, 0.8, 0.9],
        [0.001, 0.005, 0.02, 0.05, 0.1, 0.2],
    ),
}


def allocate(n: int, kind: str, p_h: np.ndarray) -> np.ndarray:
    """Sample sizes per stratum: equal, proportional to N_h, or Neyman (N_h sqrt(p(1-p)))."""
    if kind == "equal":
        size = np.full(len(N_H), n / len(N_H))
    elif kind == "proportional":
        size = n * N_H / N_H.sum()
    else:
        q = np.clip(p_h, 0.01, 0.99)
        share = N_H * np.sqrt(q * (1 - q))
        size = n * share / share.sum()
    return np.clip(np.round(size).astype(int), 2, N_H)


def covered(lo: np.ndarray, hi: np.ndarray, truth: float) -> float:
    """Share of intervals that contain the truth."""
    return float(((lo <= truth) & (truth <= hi)).mean())


def prevalence_cell(
    n: int, kind: str, p_h: list[float], reps: int, seed: int, priors: tuple[float, ...] = ()
) -> dict[str, float]:
    """Coverage of each prevalence interval in one cell."""
    rng = np.random.default_rng(seed)
    K = np.round(np.asarray(p_h) * N_H).astype(int)
    n_h = allocate(n, kind, np.asarray(p_h))
    truth = K.sum() / N_H.sum()
    k = rng.hypergeometric(K, N_H - K, n_h, size=(reps, len(N_H)))
    out = stratified_counts(k, n_h, N_H)
    df = out["n"] - len(N_H)
    row = {"smoothed": covered(out["lo"], out["hi"], truth)}
    row["R svyciprop"] = covered(*korn_graubard(out["p"], out["var"], out["n"], df=df), truth)
    row["truncated"] = covered(
        *korn_graubard(out["p"], out["var"], out["n"], df=df, truncate=True), truth
    )
    srs = rng.hypergeometric(K.sum(), N_H.sum() - K.sum(), n_h.sum(), size=reps)
    row["CP on SRS"] = covered(*clopper_pearson(srs, n_h.sum()), truth)
    for prior in priors:
        alt = stratified_counts(k, n_h, N_H, prior=prior)
        row[f"prior {prior}"] = covered(alt["lo"], alt["hi"], truth)
    row["upper below truth"] = float((out["hi"] < truth).mean())
    row["truth"] = truth
    return row


def ratio_cell(
    n: int, kind: str, rule: tuple[list[float], list[float], list[float]], reps: int, seed: int
) -> dict[str, float]:
    """Coverage of the precision and recall intervals (smoothed and previous) in one cell."""
    p, sens, fpr = (np.asarray(x, dtype=float) for x in rule)
    pos = np.round(p * N_H).astype(int)
    tp = np.round(pos * sens).astype(int)
    fp = np.round((N_H - pos) * fpr).astype(int)
    cells = np.stack([tp, pos - tp, fp, N_H - pos - fp], axis=1)  # TP, FN, FP, TN
    n_h = allocate(n, kind, p)
    rng = np.random.default_rng(seed)
    draw = np.stack(
        [rng.multivariate_hypergeometric(cells[h], n_h[h], size=reps) for h in range(len(N_H))],
        axis=1,
    )
    row: dict[str, float] = {}
    for name, dom, truth in (
        ("precision", (0, 2), tp.sum() / (tp + fp).sum()),
        ("recall", (0, 1), tp.sum() / pos.sum()),
    ):
        c, m = draw[..., 0], draw[..., dom[0]] + draw[..., dom[1]]
        out = ratio_counts(c, m, n_h, N_H)
        ok = out["defined"]
        row[f"{name} smoothed"] = covered(out["lo"][ok], out["hi"][ok], truth)
        # Before issue 12: plug-in n*, df = n - H, with n = the domain units.
        lo, hi = korn_graubard(out["p"][ok], out["var"][ok], out["n"][ok], df=n_h.sum() - len(N_H))
        row[f"{name} previous"] = covered(lo, hi, truth)
        row[f"{name} defined"] = float(ok.mean())
    return row


def table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """A Markdown table of the rows' columns."""
    head = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n"
    body = "".join(
        "| "
        + " | ".join(f"{r[c]:.3f}" if isinstance(r[c], float) else str(r[c]) for c in columns)
        + " |\n"
        for r in rows
    )
    return head + body


def cells(
    fn: Callable[..., dict[str, float]],
    specs: dict[str, Any],
    reps: int,
    ns: tuple[int, ...] = (600, 300),
    kinds: tuple[str, ...] = ("equal", "proportional"),
) -> list[dict[str, Any]]:
    """One row per (n, allocation, spec), seeded by its position (deterministic)."""
    rows = []
    for i, (n, kind, (name, spec)) in enumerate(
        (n, kind, item) for n in ns for kind in kinds for item in specs.items()
    ):
        rows.append(
            {"n": n, "allocation": kind, "profile": name, **fn(n, kind, spec, reps, seed=1000 + i)}
        )
    return rows


def grid(reps: int) -> None:
    """Summary over 240 cells: each estimator's worst cell and cells outside 0.93-0.97."""
    rng = np.random.default_rng(0)
    profiles = {
        **PROFILES,
        "every p_h 0.001": [0.001] * 6,
        "every p_h 0.02": [0.02] * 6,
        "only the smallest stratum, p 0.05": [0, 0, 0, 0, 0, 0.05],
    }
    profiles.update(
        {f"random {i}": list(np.exp(rng.uniform(np.log(0.001), np.log(0.9), 6))) for i in range(12)}
    )
    rows = cells(
        lambda n, kind, p, r, seed: prevalence_cell(n, kind, p, r, seed, (0.25, 0.1)),
        profiles,
        reps,
        ns=(60, 120, 300, 600),
        kinds=("equal", "proportional", "neyman"),
    )
    print(f"\n## Grid: {len(rows)} cells x {reps} replicates\n")
    print("| estimator | worst cell | coverage | cells < 0.93 | cells > 0.97 | median |")
    print("|---|---|---|---|---|---|")
    for col in ("smoothed", "prior 0.25", "prior 0.1", "R svyciprop", "truncated", "CP on SRS"):
        cov = np.array([r[col] for r in rows])
        worst = rows[int(cov.argmin())]
        print(
            f"| {col} | n={worst['n']} {worst['allocation']} {worst['profile']} | "
            f"{cov.min():.3f} | {(cov < 0.93).sum()} | {(cov > 0.97).sum()} | "
            f"{np.median(cov):.3f} |"
        )


def sweep(reps: int) -> None:
    """Coverage as the big stratum's p_1 moves (equal allocation, the other p_h 0.005-0.2)."""
    print(
        f"\n## Sweep: equal allocation, p_h = (p_1, 0.005, 0.01, 0.05, 0.1, 0.2), {reps} "
        "replicates\n"
    )
    p1s = (0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.07, 0.1)
    print("| n | estimator | " + " | ".join(f"p_1 {p}" for p in p1s) + " |")
    print("|---|---|" + "---|" * len(p1s))
    for i, n in enumerate((600, 300)):
        rows = [
            prevalence_cell(
                n,
                "equal",
                [p, 0.005, 0.01, 0.05, 0.1, 0.2],
                reps,
                seed=5000 + 100 * i + j,
                priors=(0.1,),
            )
            for j, p in enumerate(p1s)
        ]
        for col in ("smoothed", "prior 0.1", "R svyciprop", "CP on SRS"):
            print(f"| {n} | {col} | " + " | ".join(f"{r[col]:.3f}" for r in rows) + " |")


def main() -> None:
    """Print the coverage tables (Markdown)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=6000, help="replicates per cell")
    parser.add_argument("--grid", action="store_true", help="also the 240-cell summary")
    parser.add_argument("--sweep", action="store_true", help="also the p_1 sweep")
    args = parser.parse_args()
    start = time.perf_counter()
    rows = cells(prevalence_cell, PROFILES, args.reps)
    print(f"## Prevalence: 95% interval coverage, {args.reps} replicates per cell\n")
    print(
        table(
            rows,
            [
                "n",
                "allocation",
                "profile",
                "truth",
                "smoothed",
                "upper below truth",
                "R svyciprop",
                "truncated",
                "CP on SRS",
            ],
        )
    )
    rows = cells(ratio_cell, RULES, args.reps)
    print(f"## Precision and recall: coverage, {args.reps} replicates per cell\n")
    print(
        table(
            rows,
            [
                "n",
                "allocation",
                "profile",
                "precision smoothed",
                "precision previous",
                "recall smoothed",
                "recall previous",
                "recall defined",
            ],
        )
    )
    if args.sweep:
        sweep(args.reps)
    if args.grid:
        grid(max(args.reps // 3, 500))
    print(f"\n{time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
