"""The Monitor's model-based accuracy: Dawid-Skene per annotator beside accuracy on gold checks.

Dawid-Skene (labeling.stats.aggregation, the numbers of `labeling aggregate`) learns each
annotator's confusion matrix from how their labels line up with everyone else's on shared
works, so it needs no gold and no validated answer, but it does need overlap: below
MIN_SHARED_WORKS works with two or more labels the table is replaced by one sentence.

The first view of a campaign in a process runs MAX_ITER rounds from majority shares; later
views continue each task from where its last fit stopped (WARM_ROUNDS rounds at most, the new
labels included), so every view's numbers come from at least MAX_ITER rounds of EM. Where EM
converges, both end at its fixed point, the CLI's numbers to its tolerance.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Any

import pandas as pd

from labeling.stats.aggregation import aggregate
from labeling.stats.dawid_skene import WarmStarts
from labeling.stats.overlap import shared_works, too_few_for_model

# At most this many EM rounds (the CLI: 500). Annotator accuracies settle long before the
# last posteriors do: on a simulated 20,000-work campaign (10 annotators, 2 labels a work, two
# questions of 13 classes that never converge) they moved by < 1e-4 between 100 and 500
# rounds, which cost 2.6 s and 6.6 s. Where EM converges sooner the numbers are the CLI's.
MAX_ITER = 100
# After the first view, each task continues from where its last fit stopped (WarmStarts) for
# at most this many rounds: on the large bench (14 tasks, most still moving after 2,000
# rounds) a view after a new label cost 0.6 s with 100 rounds from majority shares.
WARM_ROUNDS = 10
CACHE_SIZE = 8  # campaigns whose fits are kept per process
COLUMNS = ["annotator", "model_accuracy", "model_n", "gold", "gold_lo", "gold_hi", "gold_n"]


_WARM: OrderedDict[Hashable, WarmStarts] = OrderedDict()
_LOCK = threading.Lock()


def warm_starts(key: Hashable) -> WarmStarts:
    """The fits kept for key (a database and campaign), new and empty the first time."""
    with _LOCK:
        warm = _WARM.setdefault(key, WarmStarts(max_iter=WARM_ROUNDS))
        _WARM.move_to_end(key)
        while len(_WARM) > CACHE_SIZE:
            _WARM.popitem(last=False)
        return warm


def clear() -> None:
    """Forget every kept fit (tests, the bench's uncached figure)."""
    with _LOCK:
        _WARM.clear()


def model_fit(
    long: pd.DataFrame, questions: Sequence[Any], warm: WarmStarts | None = None
) -> tuple[pd.DataFrame | None, str]:
    """Per annotator: Dawid-Skene accuracy and n answers (annotator, model_accuracy, model_n),
    or None and the sentence shown instead (too little overlap).

    Args:
        long: the campaign's current labels as the agreement long table.
        questions: the campaign's questions (name, kind, labels).
        warm: the fits of the last view to continue from (warm_starts), updated in place;
            None: MAX_ITER rounds from majority shares.
    """
    too_few = too_few_for_model(shared_works(long))
    if too_few is not None:
        return None, too_few
    report = aggregate(
        long, questions, "dawid-skene", with_works=False, max_iter=MAX_ITER, warm=warm
    )
    model = pd.DataFrame(
        [
            {"annotator": a["annotator"], "model_accuracy": a["accuracy"], "model_n": a["n"]}
            for a in report["annotators"]
        ]
    )
    return model, ""


def with_gold(
    fit: tuple[pd.DataFrame | None, str], annotators: pd.DataFrame
) -> tuple[pd.DataFrame, str]:
    """model_fit's table beside each annotator's gold accuracy and its n (COLUMNS; gold None
    where the annotator met no gold check), or an empty table and the sentence."""
    model, sentence = fit
    if model is None:
        return pd.DataFrame(columns=COLUMNS), sentence
    gold_cols = ["annotator", "gold", "gold_lo", "gold_hi", "gold_n"]
    gold = (
        annotators[gold_cols]
        if not annotators.empty and "gold" in annotators
        else pd.DataFrame(columns=gold_cols)
    )
    out = model.merge(gold, on="annotator", how="left")
    out["gold_n"] = out["gold_n"].fillna(0).astype(int)
    return out[COLUMNS], ""


def model_accuracy(
    long: pd.DataFrame,
    questions: Sequence[Any],
    annotators: pd.DataFrame,
    warm: WarmStarts | None = None,
) -> tuple[pd.DataFrame, str]:
    """Per annotator: Dawid-Skene accuracy and n answers, beside gold accuracy and its n.

    Args:
        long: the campaign's current labels as the agreement long table.
        questions: the campaign's questions (name, kind, labels).
        annotators: the Monitor's annotator table (gold, gold_lo, gold_hi, gold_n).
        warm: as in model_fit.

    Returns:
        The table (COLUMNS; gold None where the annotator met no gold check) and the
        sentence shown instead when it is empty.
    """
    return with_gold(model_fit(long, questions, warm), annotators)
