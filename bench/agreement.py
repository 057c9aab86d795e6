"""Benchmark of labeling.stats.agreement.agreement_report on a realistic synthetic label table.

Run: .venv/bin/python bench/agreement.py [--submissions N] [--works N] [--annotators N]
[--n-boot N] [--runs N]

Scenario: 100,000 submissions (one annotator labelling one work, answering every question of
the default schema) over 20,000 works and 10 annotators, i.e. 600,000 label rows. Annotators
per work vary (1 to 9, mean 5); annotators mostly agree (accuracy 0.80-0.95); categories are
rare (prevalence 1%-30%) and single-choice answers skewed. Prints each run, the median and a
markdown snippet.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

# Run as a script, bench/ is sys.path[0]: the checkout's root goes first instead.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from labeling.stats.agreement import QuestionSpec, agreement_report  # noqa: E402

CATEGORIES = [
    "Metaresearch",
    "Meta-epidemiology (narrow)",
    "Meta-epidemiology (broad)",
    "Bibliometrics",
    "Science and technology studies",
    "Scholarly communication",
    "Open science",
    "Research integrity",
    "Insufficient payload (model declined to judge)",
]
QUESTIONS = [
    QuestionSpec("categories", "multi", tuple(CATEGORIES)),
    QuestionSpec("about_ca_system", "binary", ("yes", "no")),
    QuestionSpec("about_ca_topic", "binary", ("yes", "no")),
    QuestionSpec("domain", "single", tuple(f"domain_{i}" for i in range(1, 7))),
    QuestionSpec("study_design", "single", tuple(f"design_{i}" for i in range(1, 13))),
    QuestionSpec("genre", "single", tuple(f"genre_{i}" for i in range(1, 10))),
]


def _assignments(rng: np.random.Generator, n_sub: int, n_works: int, n_ann: int) -> tuple:
    """Work and annotator of each submission: varying annotators per work, summing to n_sub."""
    per_work = np.clip(rng.poisson(n_sub / n_works, n_works), 1, n_ann - 1)
    while per_work.sum() != n_sub:
        diff = n_sub - per_work.sum()
        pick = rng.integers(0, n_works, abs(diff))
        per_work[pick] = np.clip(per_work[pick] + np.sign(diff), 1, n_ann - 1)
        per_work = np.clip(per_work, 1, n_ann - 1)
    order = np.argsort(rng.random((n_works, n_ann)), axis=1)
    chosen = np.arange(n_ann)[None, :] < per_work[:, None]
    work_idx = np.repeat(np.arange(n_works), n_ann).reshape(n_works, n_ann)[chosen]
    return work_idx, order[chosen]


def make_labels(n_sub: int, n_works: int, n_ann: int, seed: int = 1) -> pd.DataFrame:
    """The long label table of the scenario (one row per submission and question)."""
    rng = np.random.default_rng(seed)
    work, ann = _assignments(rng, n_sub, n_works, n_ann)
    accuracy = rng.uniform(0.80, 0.95, n_ann)[ann]
    work_ids = np.array([f"W{4400000000 + i}" for i in range(n_works)], dtype=object)[work]
    ann_ids = np.array([f"annotator_{i:02d}" for i in range(n_ann)], dtype=object)[ann]
    frames = []
    for q in QUESTIONS:
        if q.kind == "multi":
            prevalence = np.array([0.30, 0.05, 0.12, 0.15, 0.08, 0.10, 0.06, 0.04, 0.01])
            truth = rng.random((n_works, len(prevalence))) < prevalence
            flip = rng.random((len(work), len(prevalence))) < (1 - accuracy)[:, None] / 3
            given = truth[work] ^ flip
            names = np.array(q.labels, dtype=object)
            value = [list(names[row]) for row in given]
        else:
            k = len(q.labels)
            p = 0.5 ** np.arange(k) if q.kind == "single" else np.array([0.15, 0.85])
            p = p / p.sum()
            truth = rng.choice(k, n_works, p=p)
            noise = rng.choice(k, len(work), p=p)
            code = np.where(rng.random(len(work)) < accuracy, truth[work], noise)
            value = np.array(q.labels, dtype=object)[code]
        frames.append(
            pd.DataFrame(
                {"work_id": work_ids, "annotator": ann_ids, "question": q.name, "value": value}
            )
        )
    return pd.concat(frames, ignore_index=True)


def main() -> None:
    """Time agreement_report on the scenario and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--submissions", type=int, default=100_000)
    ap.add_argument("--works", type=int, default=20_000)
    ap.add_argument("--annotators", type=int, default=10)
    ap.add_argument("--n-boot", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    t0 = time.perf_counter()
    labels = make_labels(args.submissions, args.works, args.annotators)
    print(f"generated {len(labels):,} label rows in {time.perf_counter() - t0:.2f} s")
    times, cpu = [], []
    report: dict = {}
    for run in range(args.runs):
        t, c = time.perf_counter(), time.process_time()
        report = agreement_report(labels, QUESTIONS, n_boot=args.n_boot, seed=0)
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
        print(f"run {run + 1}: {times[-1]:.3f} s wall, {cpu[-1]:.3f} s CPU")
    median = statistics.median(times)
    json.dumps(report, allow_nan=False)
    print(
        f"median of {args.runs}: {median:.3f} s wall, {statistics.median(cpu):.3f} s CPU "
        f"(n_boot={args.n_boot})"
    )
    for name, q in report["questions"].items():
        print(
            f"  {name:16s} works={q['n_works']:6d} labels={q['n_labels']:7d} "
            f"alpha={q['krippendorff_alpha']} ci={q['alpha_ci']} kappa={q['fleiss_kappa']} "
            f"ac1={q['gwet_ac1']} pa={q['percent_agreement']} per-label={len(q['labels'])}"
        )
    print(f"  annotator pairs with kappa: {len(report['pairs'])}")
    print()
    print("| benchmark | label rows | works | annotators | n_boot | runs (s) | median (s) |")
    print("|---|---|---|---|---|---|---|")
    runs = ", ".join(f"{t:.2f}" for t in times)
    print(
        f"| agreement_report, default schema | {len(labels):,} "
        f"({args.submissions:,} submissions x {len(QUESTIONS)} questions) | {args.works:,} "
        f"| {args.annotators} | {args.n_boot} | {runs} | {median:.2f} |"
    )


if __name__ == "__main__":
    main()
