"""Simulation: does labelling the number `labeling plan` asks for give the target width?

Usage:
    .venv/bin/python bench/plan_sim.py [--reps 200] [--pilot 30] [--seed 0]

For each scenario (a stratified frame with known stratum prevalences) and target half-width:
draw a pilot sample of --pilot works per stratum (without replacement), plan with
labeling.stats.planning.plan_sample, then draw the planned further works per stratum from
what is left (without replacement) and compute the interval `labeling estimates` would
report (labeling.stats.intervals.stratified_counts). Prints, per cell, the median planned
works, the median achieved half-width, the share of replicates at or under the target and
the interval's coverage of the true prevalence.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
# Run as a script, bench/ is sys.path[0]: the checkout's root goes first instead.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

from labeling.stats.intervals import stratified_counts  # noqa: E402
from labeling.stats.planning import StratumCounts, plan_sample  # noqa: E402

# name: (N_h per stratum, true p_h per stratum)
SCENARIOS = {
    "4 strata, p 0.02-0.6": ([400_000, 300_000, 200_000, 100_000], [0.02, 0.1, 0.3, 0.6]),
    "3 strata, rare label": ([600_000, 300_000, 100_000], [0.005, 0.02, 0.2]),
    "1 stratum, p 0.3": ([1_000_000], [0.3]),
}
TARGETS = (0.05, 0.03, 0.02)


def replicate(
    rng: np.random.Generator, N: np.ndarray, p: np.ndarray, pilot: int, target: float
) -> tuple[int, float, bool]:
    """One pilot, one plan, one completed sample: (planned more, achieved half-width, covered)."""
    K = np.round(N * p).astype(np.int64)
    k0 = rng.hypergeometric(K, N - K, pilot)
    strata = [StratumCounts(str(h), int(N[h]), pilot, pilot, int(k0[h])) for h in range(len(N))]
    plan = plan_sample(strata, target)
    more = np.array([r.more for r in plan.strata], dtype=np.int64)
    left_pos, left_neg = K - k0, (N - K) - (pilot - k0)
    k = k0 + np.where(more > 0, rng.hypergeometric(left_pos, left_neg, np.maximum(more, 1)), 0)
    n = pilot + more
    out = stratified_counts(k.astype(float), n.astype(float), N.astype(float))
    truth = float((K / N * N / N.sum()).sum())
    covered = bool(out["lo"] <= truth <= out["hi"])
    return int(more.sum()), float((out["hi"] - out["lo"]) / 2), covered


def main() -> None:
    """Run every scenario and target; print one table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--pilot", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    print(
        f"## Planned sample sizes: {args.reps} replicates per cell, pilot {args.pilot} per stratum"
    )
    print()
    print("| scenario | target | median planned more | median achieved half-width "
          "| share <= target | coverage |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for name, (N_list, p_list) in SCENARIOS.items():
        N, p = np.array(N_list, dtype=np.int64), np.array(p_list)
        for target in TARGETS:
            runs = [replicate(rng, N, p, args.pilot, target) for _ in range(args.reps)]
            more = np.median([r[0] for r in runs])
            width = np.array([r[1] for r in runs])
            share = float((width <= target).mean())
            cover = float(np.mean([r[2] for r in runs]))
            print(f"| {name} | {target:.2f} | {more:,.0f} | {np.median(width):.4f} "
                  f"| {share:.2f} | {cover:.3f} |")  # fmt: skip
    print()
    print(f"({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
