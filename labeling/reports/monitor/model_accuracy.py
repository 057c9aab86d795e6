"""The Monitor's model-based accuracy: Dawid-Skene per annotator beside accuracy on gold checks.

Dawid-Skene (labeling.stats.aggregation, the numbers of `labeling aggregate`) learns each
annotator's confusion matrix from how their labels line up with everyone else's on shared
works, so it needs no gold and no validated answer, but it does need overlap: below
MIN_SHARED_WORKS works with two or more labels the table is replaced by one sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from labeling.stats.aggregation import aggregate

MIN_SHARED_WORKS = 10  # works with >= 2 labels: fewer, and a confusion matrix is mostly prior
COLUMNS = ["annotator", "model_accuracy", "model_n", "gold", "gold_lo", "gold_hi", "gold_n"]


def shared_works(long: pd.DataFrame) -> int:
    """Works that two or more annotators labelled (on any question)."""
    if long.empty:
        return 0
    per_work = long[["work_id", "annotator"]].drop_duplicates().groupby("work_id").size()
    return int((per_work >= 2).sum())


def model_accuracy(long: pd.DataFrame, questions: Sequence[Any],
                   annotators: pd.DataFrame) -> tuple[pd.DataFrame, str]:
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
            "their overlap with the others).")
    report = aggregate(long, questions, "dawid-skene")
    model = pd.DataFrame([{"annotator": a["annotator"], "model_accuracy": a["accuracy"],
                           "model_n": a["n"]} for a in report["annotators"]])
    gold_cols = ["annotator", "gold", "gold_lo", "gold_hi", "gold_n"]
    gold = (annotators[gold_cols] if not annotators.empty and "gold" in annotators
            else pd.DataFrame(columns=gold_cols))
    out = model.merge(gold, on="annotator", how="left")
    out["gold_n"] = out["gold_n"].fillna(0).astype(int)
    return out[COLUMNS], ""
