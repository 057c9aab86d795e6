"""Aggregated answers and annotator accuracy from a long table of labels (pure, JSON-ready).

Input: the agreement report's long table (``work_id``, ``annotator``, ``question``,
``value``; see labeling.stats.agreement) and the questions (anything with name, kind, labels).
Two methods: ``dawid-skene`` (labeling.stats.dawid_skene, per-annotator confusion matrices)
and ``majority`` (vote shares). Choices, in one place:

- Single-choice and binary questions are one task each; the classes are the labels met, in
  schema order (values not in the schema after them). A multi-label question is one binary
  task per schema label ("does the label apply?", yes/no), fitted separately.
- A None/NaN value is not an answer (skips never reach the table); duplicate (work,
  annotator, question) rows: the last one counts. An empty multi-label list is an answer.
- Per work and question (Dawid-Skene): the answer is the most probable class (ties: the
  first; "yes" for a label), its posterior that class's probability; multi-label: the labels
  whose "yes" wins, posterior the least certain label's (what ``posterior >= P`` needs).
- Majority: labeling.stats.majority's definition (strictly more than half, no tie-break;
  multi-label answers compared as sets): the answer is the majority answer or None (a 1-1
  tie: None with 0.5), its posterior the most given answer's vote share.
- Per annotator: the accuracy is the mean probability that their answer is the true one
  (Dawid-Skene: the posterior of the class they chose, a multi-label answer's the product of
  its labels'; majority: 1 when it is the majority answer, else 0) over their n answers
  (majority: on works that have a majority answer). The pooled accuracy averages over every
  question's answers, like the Monitor's accuracy on gold checks. Confusion matrices: {true
  class: {given class: p}}, a row None when the annotator met no work of that true class.
- Numbers are rounded to 6 decimals; undefined ones are None, never NaN.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from labeling.stats.dawid_skene import (
    MAX_ITER,
    Fit,
    WarmStarts,
    dawid_skene,
    majority,
)
from labeling.stats.majority import majority_one_hot, set_majorities

METHODS = ("dawid-skene", "majority")
YES_NO = ("yes", "no")


def _num(x: float) -> float | None:
    """A finite float rounded for JSON, else None."""
    return round(float(x), 6) if np.isfinite(x) else None


def _answer(kind: str, value: Any) -> Any:
    """One stored value in its comparable form: a str, or a frozenset for multi-label."""
    if kind == "multi":
        if isinstance(value, str):
            return frozenset(v for v in value.split(";") if v)
        return frozenset(str(v) for v in value)
    if kind == "binary" and isinstance(value, bool | np.bool_):
        return YES_NO[0] if value else YES_NO[1]
    return str(value)


@dataclass
class _Long:
    """The long table as integer codes: works and annotators numbered in sorted order."""

    works: np.ndarray  # sorted distinct work ids
    work: np.ndarray  # each row's index into works
    names: np.ndarray  # sorted distinct annotators
    who: np.ndarray  # each row's index into names
    values: np.ndarray  # each row's value (object)
    answered: np.ndarray  # each row holds an answer (None and NaN do not)
    groups: dict[Any, np.ndarray]  # question -> its rows


def _sorted_codes(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Codes of a column numbered in the sorted order of its distinct values, and those values."""
    dtype = column.dtype
    if isinstance(dtype, pd.CategoricalDtype) and dtype.categories.is_monotonic_increasing:
        codes = np.asarray(column.cat.codes)
        if len(codes) == 0 or codes.min() >= 0:  # coded in sorted order already (no missing)
            used = np.zeros(len(dtype.categories), dtype=bool)
            used[codes] = True
            rank = np.cumsum(used) - 1  # unused categories dropped, as factorize would
            return rank[codes], np.asarray(dtype.categories, dtype=object)[used]
    codes, uniques = pd.factorize(column)  # a categorical column: from its codes
    uniques = np.asarray(uniques, dtype=object)
    order = np.argsort(uniques, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[codes], uniques[order]


def _coded(long: pd.DataFrame) -> _Long:
    """The long table's columns coded once for every question (hashing, never Python loops)."""
    work, works = _sorted_codes(long["work_id"])
    who, names = _sorted_codes(long["annotator"])
    values = long["value"].to_numpy(dtype=object)
    groups = long.groupby("question", sort=False).indices
    return _Long(works, work, names, who, values, ~pd.isna(values), groups)


def _question_rows(coded: _Long, name: str) -> np.ndarray:
    """A question's answered rows, the last of duplicate (work, annotator) rows kept, in order."""
    rows = np.asarray(coded.groups.get(name, np.zeros(0, dtype=np.int64)), dtype=np.int64)
    rows = rows[coded.answered[rows]]
    key = coded.work[rows] * len(coded.names) + coded.who[rows]
    _, last = np.unique(key[::-1], return_index=True)
    return np.sort(rows[len(rows) - 1 - last])


def _answer_codes(kind: str, values: np.ndarray) -> tuple[np.ndarray, list[Any]]:
    """Each value's code into its distinct answers (_answer forms, in order of first meeting)."""
    if pd.api.types.infer_dtype(values, skipna=False) == "string":
        raw, uniques = pd.factorize(values)  # plain strings: hashed in C
        forms = [_answer(kind, u) for u in uniques]
    else:
        # By object first: the long table repeats one object per distinct answer (lists are
        # not hashable, and hashing 100,000 of them as tuples costs more than all the rest).
        ids = np.fromiter(map(id, values), dtype=np.int64, count=len(values))
        raw = pd.factorize(ids)[0]
        firsts = np.unique(raw, return_index=True)[1]  # codes are 0..n-1 in meeting order
        forms = [_answer(kind, values[i]) for i in firsts]
    # Distinct raw values may share a form (True and "yes"): number the forms themselves.
    index: dict[Any, int] = {}
    form_code = np.array([index.setdefault(f, len(index)) for f in forms], dtype=np.int64)
    return form_code[raw] if len(raw) else np.zeros(0, dtype=np.int64), list(index)


def _classes(values: Sequence[Any], order: Sequence[str]) -> list[str]:
    """The classes met, in the given order, then unknown ones as first met."""
    met = list(dict.fromkeys(values))
    known, given = set(met), set(order)
    return [c for c in order if c in known] + [c for c in met if c not in given]


def _fit(
    method: str,
    items: np.ndarray,
    workers: np.ndarray,
    labels: np.ndarray,
    n_items: int,
    n_workers: int,
    n_classes: int,
    max_iter: int,
    start: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[Fit, np.ndarray]:
    """The method's fit and the matrix annotators are scored against (posteriors or votes)."""
    size = {"n_items": n_items, "n_workers": n_workers, "n_classes": n_classes}
    if method == "majority":
        fit = majority(items, workers, labels, **size)
        votes = np.bincount(items * n_classes + labels, minlength=n_items * n_classes)
        return fit, majority_one_hot(votes.reshape(n_items, n_classes))
    fit = dawid_skene(items, workers, labels, **size, max_iter=max_iter, start=start)
    return fit, fit.posteriors


def _task(
    method: str,
    items: np.ndarray,
    workers: np.ndarray,
    values: tuple[np.ndarray, Sequence[str]],
    order: Sequence[str],
    n_items: int,
    names: Sequence[str],
    max_iter: int,
    warm: tuple[WarmStarts, str] | None = None,
) -> dict[str, Any]:
    """Fit one categorical task; its JSON block plus the arrays the caller needs.

    values: each answer's code into the distinct values met (in order of first meeting).
    warm: the kept fits and this task's key in them (Dawid-Skene only).
    """
    codes, met = values
    classes = _classes(met, order)
    code = {c: i for i, c in enumerate(classes)}
    labels = np.array([code[v] for v in met], dtype=np.int64)[codes]
    start, rounds = None, max_iter
    if warm is not None and method == "dawid-skene":
        start = warm[0].start(warm[1], names, classes)
        rounds = max_iter if start is None else warm[0].max_iter
    fit, scoring = _fit(
        method, items, workers, labels, n_items, len(names), len(classes), rounds, start
    )
    if warm is not None and method == "dawid-skene":
        warm[0].fits[warm[1]] = (tuple(names), tuple(classes), fit.priors, fit.confusion)
    right = scoring[items, labels]  # each answer's probability of being the true class
    # Works with an answer to score against (majority: a strict one; Dawid-Skene: all).
    decided = scoring.sum(axis=1) > 0.5
    given = np.bincount(workers, minlength=len(names))
    n = np.bincount(workers[decided[items]], minlength=len(names))
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.bincount(workers, weights=right, minlength=len(names)) / n
    annotators = {}
    for w, who in enumerate(names):
        if not given[w]:
            continue
        confusion = {}
        for j, true in enumerate(classes):
            row = fit.confusion[w, j]
            confusion[true] = (
                None
                if not np.isfinite(row).all()
                else {given: _num(row[g]) for g, given in enumerate(classes)}
            )
        annotators[who] = {"accuracy": _num(accuracy[w]), "n": int(n[w]), "confusion": confusion}
    block = {
        "classes": classes,
        "prior": {c: _num(p) for c, p in zip(classes, fit.priors, strict=True)},
        "iterations": fit.iterations,
        "converged": fit.converged,
        "annotators": annotators,
    }
    best = fit.posteriors.argmax(axis=1)
    return {
        "block": block,
        "right": right,
        "decided": decided,
        "best": best,
        "posterior": fit.posteriors[np.arange(n_items), best],
        "distribution": fit.posteriors,
        "classes": classes,
    }


def _rounded(values: np.ndarray) -> list[Any]:
    """An array of probabilities as (nested) lists of floats rounded like _num."""
    return np.round(values, 6).tolist()


def _question(
    method: str,
    q: Any,
    coded: _Long,
    rows: np.ndarray,
    with_works: bool,
    max_iter: int,
    warm: WarmStarts | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One question's report block, and per work its answer, posterior and distribution."""
    work_codes, items = np.unique(coded.work[rows], return_inverse=True)
    works = coded.works[work_codes]
    who_codes, workers = np.unique(coded.who[rows], return_inverse=True)
    names_list = [str(x) for x in coded.names[who_codes]]
    counts = np.bincount(items, minlength=len(works))
    codes, met = _answer_codes(q.kind, coded.values[rows])
    block: dict[str, Any] = {"kind": q.kind, "n_works": len(works), "n_labels": len(rows)}
    if q.kind != "multi":
        order = YES_NO if q.kind == "binary" else tuple(q.labels)
        t = _task(
            method,
            items,
            workers,
            (codes, met),
            order,
            len(works),
            names_list,
            max_iter,
            None if warm is None else (warm, q.name),
        )
        block.update(t["block"])
        right, decided = t["right"], t["decided"]
        classes = t["classes"]
        per_work = (
            {}
            if not with_works
            else {
                w: {
                    "answer": classes[b] if ok else None,
                    "posterior": p,
                    "n": n,
                    "distribution": dict(zip(classes, dist, strict=True)),
                }
                for w, b, ok, p, n, dist in zip(
                    works,
                    t["best"].tolist(),
                    decided.tolist(),
                    _rounded(t["posterior"]),
                    counts.tolist(),
                    _rounded(t["distribution"]),
                    strict=True,
                )
            }
        )
    else:
        extra = sorted({lab for v in met for lab in v} - set(q.labels))
        right = np.ones(len(rows))
        block["labels"] = {}
        fits = {}
        for lab in [*q.labels, *extra]:
            yes = np.array([lab in v for v in met], dtype=bool)[codes]
            # the classes met: "yes" where any answer has the label, "no" where any lacks it
            seen = [c for c, hit in zip(YES_NO, (yes.any(), (~yes).any()), strict=True) if hit]
            lab_codes = np.where(yes, 0, 1 if yes.any() else 0)  # indexes into seen
            t = _task(
                method,
                items,
                workers,
                (lab_codes, seen),
                YES_NO,
                len(works),
                names_list,
                max_iter,
                None if warm is None else (warm, f"{q.name}\x1f{lab}"),
            )
            block["labels"][lab] = t["block"]
            right = right * t["right"]
            fits[lab] = t
        decided = np.ones(len(works), dtype=bool)
        if method == "majority":  # the whole label set against the set majority
            top, decided, set_share, set_answers = set_majorities(items, codes, met, list(fits))
            right = ((codes == top[items]) & decided[items]).astype(float)
        per_work = {}
        if with_works:
            labs = list(fits)
            yes = np.column_stack(
                [  # P(label applies) per work, one column per label
                    t["distribution"][:, t["classes"].index(YES_NO[0])]
                    if YES_NO[0] in t["classes"]
                    else np.zeros(len(works))
                    for t in fits.values()
                ]
            )
            chosen = np.column_stack(
                [  # argmax with ties to the first class ("yes")
                    t["best"] == t["classes"].index(YES_NO[0])
                    if YES_NO[0] in t["classes"]
                    else np.zeros(len(works), dtype=bool)
                    for t in fits.values()
                ]
            )
            least = np.column_stack([t["posterior"] for t in fits.values()]).min(axis=1)
            picks = chosen.tolist()
            answers: list[Any] = [[lab for lab, c in zip(labs, p, strict=True) if c] for p in picks]
            if method == "majority":
                least, answers = set_share, set_answers
            for w, answer, p, n, shares in zip(
                works, answers, _rounded(least), counts.tolist(), _rounded(yes), strict=True
            ):
                per_work[w] = {
                    "answer": answer,
                    "posterior": p,
                    "n": n,
                    "distribution": dict(zip(labs, shares, strict=True)),
                }
    if q.kind == "multi":  # a whole label set's accuracy (its labels' blocks have theirs)
        given = np.bincount(workers, minlength=len(names_list))
        n = np.bincount(workers[decided[items]], minlength=len(names_list))
        sums = np.bincount(workers, weights=right, minlength=len(names_list))
        with np.errstate(invalid="ignore", divide="ignore"):
            block["annotators"] = {
                who: {"accuracy": _num(sums[w] / n[w]), "n": int(n[w])}
                for w, who in enumerate(names_list)
                if given[w]
            }
    got = {"who": who_codes[workers], "right": right, "counted": decided[items]}
    return block, {"works": per_work, **got}


def aggregate(
    long: pd.DataFrame,
    questions: Sequence[Any],
    method: str = "dawid-skene",
    *,
    with_works: bool = True,
    max_iter: int = MAX_ITER,
    warm: WarmStarts | None = None,
) -> dict[str, Any]:
    """Aggregated answers per work and accuracy per annotator (see the module docstring).

    Args:
        long: labels as the agreement report's long table (current, non-skipped labels).
        questions: the questions to aggregate (objects with name, kind and labels).
        method: "dawid-skene" or "majority".
        with_works: False leaves the works list empty (the Monitor needs the annotators only).
        max_iter: most EM rounds per task (a fit stopped there says converged false).
        warm: kept fits to continue from, updated with this call's (Dawid-Skene; see
            labeling.stats.dawid_skene.WarmStarts); None starts every task afresh.

    Returns:
        {method, n_works, n_labels (distinct work-annotator pairs), questions: {name: block},
        works: [{work_id, n_labels (the fewest any of its questions has), answers, posteriors,
        distributions}], annotators: [{annotator, accuracy, n, questions: {name: {accuracy,
        n}}}]}; works sorted by id, annotators by name.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}: expected one of {', '.join(METHODS)}")
    blocks: dict[str, Any] = {}
    works: dict[str, dict[str, Any]] = {}
    coded = _coded(long)
    n_names = len(coded.names)
    # Per annotator over every question: answers, their summed probability of being right,
    # and the questions answered (in question order).
    n_all, right_all, given_all = np.zeros(n_names), np.zeros(n_names), np.zeros(n_names)
    asked: list[tuple[str, np.ndarray]] = []
    labelled = []
    for q in questions:
        rows = _question_rows(coded, q.name)
        if len(rows) == 0:
            blocks[q.name] = {"kind": q.kind, "n_works": 0, "n_labels": 0, "annotators": {}}
            continue
        block, got = _question(method, q, coded, rows, with_works, max_iter, warm)
        blocks[q.name] = block
        labelled.append(coded.work[rows] * n_names + coded.who[rows])
        n_all += np.bincount(got["who"][got["counted"]], minlength=n_names)
        given_all += (given_q := np.bincount(got["who"], minlength=n_names))
        right_all += np.bincount(got["who"], weights=got["right"], minlength=n_names)
        asked.append((q.name, given_q > 0))
        for w, entry in got["works"].items():
            out = works.setdefault(
                str(w),
                {
                    "work_id": str(w),
                    "n_labels": entry["n"],
                    "answers": {},
                    "posteriors": {},
                    "distributions": {},
                },
            )
            out["n_labels"] = min(out["n_labels"], entry["n"])
            out["answers"][q.name] = entry["answer"]
            out["posteriors"][q.name] = entry["posterior"]
            out["distributions"][q.name] = entry["distribution"]
    annotators = []
    for w in np.flatnonzero(given_all):  # majority: n counts answers on decided works only
        who = str(coded.names[w])
        annotators.append(
            {
                "annotator": who,
                "accuracy": _num(right_all[w] / n_all[w]) if n_all[w] else None,
                "n": int(n_all[w]),
                "questions": {q: blocks[q]["annotators"][who] for q, has in asked if has[w]},
            }
        )
    # Distinct (work, annotator) pairs and works, marked in arrays as long as the codes go.
    seen = np.zeros(len(coded.works) * n_names, dtype=bool)
    for keys in labelled:
        seen[keys] = True
    pairs = np.flatnonzero(seen)
    return {
        "method": method,
        "n_works": int(seen.reshape(len(coded.works), n_names).any(axis=1).sum()) if n_names else 0,
        "n_labels": int(len(pairs)),
        "questions": blocks,
        "works": [works[w] for w in sorted(works)],
        "annotators": annotators,
    }
