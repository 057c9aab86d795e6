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
- Per work and question: the answer is the most probable class (ties: the first class, so
  schema order; "yes" for a label), its posterior is that class's probability (majority: its
  vote share). For a multi-label question the answer is the labels whose "yes" wins, and its
  posterior is the least certain label's posterior (what ``posterior >= P`` must hold for).
- Per annotator: the accuracy is the mean probability that their answer is the true one
  (Dawid-Skene: the posterior of the class they chose; majority: 1 when it is the majority
  answer, else 0), over their n answers. For a multi-label question an answer is right when
  its whole label set is: the product of its labels' probabilities (labels are modelled
  independently). The pooled accuracy averages over every question's answers, like the
  Monitor's accuracy on gold checks. Confusion matrices: {true class: {given class: p}}, a
  row None when (majority) the annotator met no work of that true class.
- Numbers are rounded to 6 decimals; undefined ones are None, never NaN.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from labeling.stats.dawid_skene import MAX_ITER, Fit, dawid_skene, majority, one_hot_argmax

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


def _present(value: Any) -> bool:
    """Whether a long-table value is an answer (None and NaN are not)."""
    return value is not None and not (isinstance(value, float) and np.isnan(value))


def _question_rows(long: pd.DataFrame, name: str, kind: str) -> pd.DataFrame:
    """A question's answers (work_id, annotator, value), the last of duplicates kept."""
    rows = long[long["question"] == name]
    rows = rows[np.array([_present(v) for v in rows["value"]], dtype=bool)]
    rows = rows.drop_duplicates(["work_id", "annotator"], keep="last")
    return pd.DataFrame(
        {
            "work_id": rows["work_id"].to_numpy(dtype=object),
            "annotator": rows["annotator"].to_numpy(dtype=object),
            "value": [_answer(kind, v) for v in rows["value"]],
        }
    )


def _classes(values: Sequence[Any], order: Sequence[str]) -> list[str]:
    """The classes met, in the given order, then unknown ones as first met."""
    met = list(dict.fromkeys(values))
    return [c for c in order if c in set(met)] + [c for c in met if c not in set(order)]


def _fit(
    method: str,
    items: np.ndarray,
    workers: np.ndarray,
    labels: np.ndarray,
    n_items: int,
    n_workers: int,
    n_classes: int,
    max_iter: int,
) -> tuple[Fit, np.ndarray]:
    """The method's fit and the matrix annotators are scored against (posteriors or votes)."""
    size = {"n_items": n_items, "n_workers": n_workers, "n_classes": n_classes}
    if method == "majority":
        fit = majority(items, workers, labels, **size)
        return fit, one_hot_argmax(fit.posteriors)
    fit = dawid_skene(items, workers, labels, **size, max_iter=max_iter)
    return fit, fit.posteriors


def _task(
    method: str,
    items: np.ndarray,
    workers: np.ndarray,
    values: Sequence[str],
    order: Sequence[str],
    n_items: int,
    names: Sequence[str],
    max_iter: int,
) -> dict[str, Any]:
    """Fit one categorical task; its JSON block plus the arrays the caller needs."""
    classes = _classes(values, order)
    code = {c: i for i, c in enumerate(classes)}
    labels = np.fromiter((code[v] for v in values), dtype=np.int64, count=len(values))
    fit, scoring = _fit(method, items, workers, labels, n_items, len(names), len(classes), max_iter)
    right = scoring[items, labels]  # each answer's probability of being the true class
    n = np.bincount(workers, minlength=len(names))
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.bincount(workers, weights=right, minlength=len(names)) / n
    annotators = {}
    for w, who in enumerate(names):
        if not n[w]:
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
        "best": best,
        "posterior": fit.posteriors[np.arange(n_items), best],
        "distribution": fit.posteriors,
        "classes": classes,
    }


def _rounded(values: np.ndarray) -> list[Any]:
    """An array of probabilities as (nested) lists of floats rounded like _num."""
    return np.round(values, 6).tolist()


def _question(
    method: str, q: Any, rows: pd.DataFrame, with_works: bool, max_iter: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One question's report block, and per work its answer, posterior and distribution."""
    works, items = np.unique(rows["work_id"].to_numpy(dtype=object), return_inverse=True)
    names, workers = np.unique(rows["annotator"].to_numpy(dtype=object), return_inverse=True)
    names_list = [str(x) for x in names]
    counts = np.bincount(items, minlength=len(works))
    values = list(rows["value"])
    block: dict[str, Any] = {"kind": q.kind, "n_works": len(works), "n_labels": len(rows)}
    if q.kind != "multi":
        order = YES_NO if q.kind == "binary" else tuple(q.labels)
        t = _task(method, items, workers, values, order, len(works), names_list, max_iter)
        block.update(t["block"])
        right = t["right"]
        classes = t["classes"]
        per_work = (
            {}
            if not with_works
            else {
                w: {
                    "answer": classes[b],
                    "posterior": p,
                    "n": n,
                    "distribution": dict(zip(classes, dist, strict=True)),
                }
                for w, b, p, n, dist in zip(
                    works,
                    t["best"].tolist(),
                    _rounded(t["posterior"]),
                    counts.tolist(),
                    _rounded(t["distribution"]),
                    strict=True,
                )
            }
        )
    else:
        met = sorted({lab for v in values for lab in v} - set(q.labels))
        right = np.ones(len(rows))
        block["labels"] = {}
        fits = {}
        for lab in [*q.labels, *met]:
            yes_no = [YES_NO[0] if lab in v else YES_NO[1] for v in values]
            t = _task(method, items, workers, yes_no, YES_NO, len(works), names_list, max_iter)
            block["labels"][lab] = t["block"]
            right = right * t["right"]
            fits[lab] = t
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
            for w, picks, p, n, shares in zip(
                works, chosen.tolist(), _rounded(least), counts.tolist(), _rounded(yes), strict=True
            ):
                per_work[w] = {
                    "answer": [lab for lab, c in zip(labs, picks, strict=True) if c],
                    "posterior": p,
                    "n": n,
                    "distribution": dict(zip(labs, shares, strict=True)),
                }
    if q.kind == "multi":  # a whole label set's accuracy (its labels' blocks have theirs)
        n = np.bincount(workers, minlength=len(names_list))
        sums = np.bincount(workers, weights=right, minlength=len(names_list))
        block["annotators"] = {
            who: {"accuracy": _num(sums[w] / n[w]), "n": int(n[w])}
            for w, who in enumerate(names_list)
            if n[w]
        }
    answers = pd.DataFrame({"annotator": [names_list[w] for w in workers], "right": right})
    return block, {"works": per_work, "answers": answers}


def aggregate(
    long: pd.DataFrame,
    questions: Sequence[Any],
    method: str = "dawid-skene",
    *,
    with_works: bool = True,
    max_iter: int = MAX_ITER,
) -> dict[str, Any]:
    """Aggregated answers per work and accuracy per annotator (see the module docstring).

    Args:
        long: labels as the agreement report's long table (current, non-skipped labels).
        questions: the questions to aggregate (objects with name, kind and labels).
        method: "dawid-skene" or "majority".
        with_works: False leaves the works list empty (the Monitor needs the annotators only).
        max_iter: most EM rounds per task (a fit stopped there says converged false).

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
    answers = []
    for q in questions:
        rows = _question_rows(long, q.name, q.kind)
        if rows.empty:
            blocks[q.name] = {"kind": q.kind, "n_works": 0, "n_labels": 0, "annotators": {}}
            continue
        block, got = _question(method, q, rows, with_works, max_iter)
        blocks[q.name] = block
        answers.append(got["answers"].assign(question=q.name))
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
    pooled = (
        pd.concat(answers, ignore_index=True)
        if answers
        else pd.DataFrame(columns=["annotator", "right", "question"])
    )
    annotators = []
    for who, mine in pooled.groupby("annotator", sort=True):
        annotators.append(
            {
                "annotator": str(who),
                "accuracy": _num(mine["right"].mean()),
                "n": len(mine),
                "questions": {
                    q: blocks[q]["annotators"][str(who)] for q in dict.fromkeys(mine["question"])
                },
            }
        )
    answered = np.array([_present(v) for v in long["value"]], dtype=bool)
    answered &= long["question"].isin([q.name for q in questions]).to_numpy(dtype=bool)
    labelled = long.loc[answered, ["work_id", "annotator"]].drop_duplicates()
    return {
        "method": method,
        "n_works": int(labelled["work_id"].nunique()),
        "n_labels": len(labelled),
        "questions": blocks,
        "works": [works[w] for w in sorted(works)],
        "annotators": annotators,
    }
