"""The Monitor's model-based accuracy: Dawid-Skene per annotator beside accuracy on gold checks.

Dawid-Skene (labeling.stats.aggregation, the numbers of `labeling aggregate`) learns each
annotator's confusion matrix from how their labels line up with everyone else's on shared
works, so it needs no gold and no validated answer, but it does need overlap: below
MIN_SHARED_WORKS works with two or more labels the table is replaced by one sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from labeling.stats.aggregation import aggregate

# At most this many EM rounds (the CLI: 500). Annotator accuracies settle long before the
# last posteriors do: on a simulated 20,000-work campaign (10 annotators, 2 labels a work, two
# questions of 13 classes that never converge) they moved by < 1e-4 between 100 and 500
# rounds, which cost 2.6 s and 6.6 s. Where EM converges sooner the numbers are the CLI's.
MAX_ITER = 100
MIN_SHARED_WORKS = 10  # works with >= 2 labels: fewer, and a confusion matrix is mostly prior
COLUMNS = ["annotator", "model_accuracy", "model_n", "gold", "gold_lo", "gold_hi", "gold_n"]


def shared_works(long: pd.DataFrame) -> int:
    """Works that two or more annotators labelled (on any question)."""
    if long.empty:
        return 0
    work = pd.factorize(long["work_id"])[0]
    who, names = pd.factorize(long["annotator"])
    pairs = np.unique(work.astype(np.int64) * max(len(names), 1) + who)
    return int((np.bincount(pairs // max(len(names), 1)) >= 2).sum())


def model_accuracy(
    long: pd.DataFrame, questions: Sequence[Any], annotators: pd.DataFrame
) -> tuple[pd.DataFrame, str]:
    """Per annotator: Dawid-Skene accuracy and n answers, beside gold accuracy and its n.

    Args:
        long: the campaign's current labels as the agreement long table.
        questions: the campaign's questions (name, kind, labels).
        annotators: the Monitor's annotator table (gold, gold_lo, gold_hi, gold_n).

    Returns:
        The table (COLUMNS; gold None where the annotator met no gold check) and the
        sentence shown instead when it is empty.
    """
    shared = shared_works(long)
    if shared < MIN_SHARED_WORKS:
        return pd.DataFrame(columns=COLUMNS), (
            f"Too few shared labels for the model: {shared} work(s) have two or more labels, "
            f"Dawid-Skene needs at least {MIN_SHARED_WORKS} (it learns each annotator from "
            "their overlap with the others)."
        )
    report = aggregate(long, questions, "dawid-skene", with_works=False, max_iter=MAX_ITER)
    model = pd.DataFrame(
        [
            {"annotator": a["annotator"], "model_accuracy": a["accuracy"], "model_n": a["n"]}
            for a in report["annotators"]
        ]
    )
    gold_cols = ["annotator", "gold", "gold_lo", "gold_hi", "gold_n"]
    gold = (
        annotators[gold_cols]
        if not annotators.empty and "gold" in annotators
        else pd.DataFrame(columns=gold_cols)
    )
    out = model.merge(gold, on="annotator", how="left")
    out["gold_n"] = out["gold_n"].fillna(0).astype(int)
    return out[COLUMNS], ""
