"""How much overlap Dawid-Skene needs before its numbers mean anything, and what to say below.

Dawid-Skene learns each annotator's confusion matrix from how their labels line up with the
others' on shared works. With few shared works a confusion matrix is mostly its prior, and EM
can then settle on a near-certain posterior for an answer no annotator gave on that work (a
9-work campaign of two annotators: 0.99 for a genre neither chose). Below MIN_SHARED_WORKS
works with two labels or more, the Monitor and `labeling aggregate` therefore show no model
numbers at all, only this module's sentence and the plain counts of the answers given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from labeling.stats.majority import answer_key, is_missing

MIN_SHARED_WORKS = 10  # works with >= 2 labels: fewer, and a confusion matrix is mostly prior
MARK_CELLS = 20_000_000  # works x annotators above this: sorted pairs, not a mark per cell


def shared_works(long: pd.DataFrame) -> int:
    """Works that two or more annotators labelled (on any question)."""
    if long.empty:
        return 0
    work, works = pd.factorize(long["work_id"])  # a categorical factorizes from its codes
    who, names = pd.factorize(long["annotator"])
    width = max(len(names), 1)
    if len(works) * width > MARK_CELLS:
        pairs = np.unique(work.astype(np.int64) * width + who)
        return int((np.bincount(pairs // width) >= 2).sum())
    marked = np.zeros(len(works) * width, dtype=bool)
    marked[work.astype(np.int64) * width + who] = True
    return int((marked.reshape(len(works), width).sum(axis=1) >= 2).sum())


def too_few_for_model(shared: int) -> str | None:
    """The sentence shown instead of the model's numbers, or None when shared works suffice."""
    if shared >= MIN_SHARED_WORKS:
        return None
    return (
        f"Too few shared labels for the model: {shared} work(s) have two or more labels, "
        f"Dawid-Skene needs at least {MIN_SHARED_WORKS} (it learns each annotator from "
        "their overlap with the others)."
    )


def _text(kind: str, value: Any, labels: Sequence[str]) -> str:
    """One answer as the text counted: a label, yes/no, or labels joined by ';' (schema order)."""
    if kind == "multi" and isinstance(value, str):  # a stored "a;b" cell, as aggregation reads it
        value = [v for v in value.split(";") if v]
    key = answer_key(value)
    if isinstance(key, frozenset):
        return ";".join([lab for lab in labels if lab in key] + sorted(key - set(labels)))
    if kind == "binary" and isinstance(key, bool | np.bool_):
        return "yes" if key else "no"
    return str(key)


def answer_counts(long: pd.DataFrame, questions: Sequence[Any]) -> list[dict[str, Any]]:
    """Per work: how many annotators answered it and how often each answer was given.

    Each annotator's last row per (work, question) counts, as in labeling.stats.aggregation;
    None/NaN values are no answer.

    Returns:
        [{work_id, n_labels (annotators with an answer), counts: {question: {answer: n}}}],
        sorted by work id; a multi-label answer is its labels joined by ';' ('' for none).
    """
    kinds = {q.name: (q.kind, tuple(q.labels)) for q in questions}
    last: dict[tuple[str, str, str], Any] = {}
    for w, who, q, v in long[["work_id", "annotator", "question", "value"]].itertuples(
        index=False, name=None
    ):
        if q in kinds:
            last[(str(w), str(who), str(q))] = v
    works: dict[str, dict[str, Any]] = {}
    annotators: dict[str, set[str]] = {}
    for (w, who, q), v in last.items():
        if is_missing(v):
            continue
        kind, labels = kinds[q]
        entry = works.setdefault(w, {"work_id": w, "n_labels": 0, "counts": {}})
        shown = _text(kind, v, labels)
        per_q = entry["counts"].setdefault(q, {})
        per_q[shown] = per_q.get(shown, 0) + 1
        annotators.setdefault(w, set()).add(who)
    for w, entry in works.items():
        entry["n_labels"] = len(annotators[w])
        entry["counts"] = {
            q: dict(sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))
            for q, c in sorted(entry["counts"].items())
        }
    return [works[w] for w in sorted(works)]
