"""Humans against the machines: each machine call and score vs the validated human answer.

Pure functions over (answers, record) pairs; the output is JSON-safe (None, never NaN) and
every number carries the n it rests on. Choices, in one place:

- Systems compared, per question: each teacher's call (``codex``, ``gemma``: the record's
  call path when the schema has one, else the teacher head's scores at the question's
  threshold, as the work card shows them), the ``candidate`` and the ``consensus`` (schema
  ``calls`` paths), and, where a teacher has a call path, ``<teacher>_scores``: the student
  head's scores at the threshold (single choice: the top label if its score reaches the
  threshold, else no call). Each system says its ``source``.
- Missing data: a work whose record lacks a system's value (absent path, wrong type, null for
  multi and binary) is left out of that system's counts (its ``n_missing`` says how many).
  A null single-choice call is an abstention: "no call", a negative for every label.
- Per label: multi labels are present/absent; single-choice labels are one-vs-rest; binary
  questions have one label, "yes". Precision and recall with Wilson intervals (statsmodels),
  F1 from the same counts (no interval); undefined ratios are None.
- Single choice: scikit-learn confusion matrix, rows = human label, columns = the schema's
  labels then "(no call)"; accuracy with a Wilson interval.
- Calibration of each teacher's score per label (and pooled over the labels of a question):
  Brier score (scikit-learn) and a reliability table over equal-width bins of [0, 1] (mean
  score, observed rate with a Wilson interval, n), empty bins left out.
- The record's ``machine_scores`` (score_opus, score_gpt: they rank works, they assert no
  category) are read against "the human chose at least one label" of the first multi-label
  question asked: ROC AUC (scikit-learn; None with one class only), Brier and reliability.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from sklearn.metrics import brier_score_loss, confusion_matrix, roc_auc_score

from labeling.estimates import wilson
from labeling.schema import Question, Schema, get_path

NO_CALL = "(no call)"
_MISSING = object()
N_BINS = 10
RANKING_SCORES = ("score_opus", "score_gpt")


def _num(x: Any) -> float | None:
    """A finite float or None."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _is_num(v: Any) -> bool:
    """A real number (not a bool), finite."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def human_value(question: Question, answer: Any) -> Any:
    """A validated answer in comparable form (multi: frozenset; binary: bool); None if absent."""
    if answer is None:
        return None
    if question.kind == "multi":
        return frozenset(answer) if isinstance(answer, list | tuple | set | frozenset) else None
    if question.kind == "binary":
        if isinstance(answer, bool):
            return answer
        return answer == "yes" if answer in ("yes", "no") else None
    return answer if isinstance(answer, str) else None


def scores_of(question: Question, record: Mapping[str, Any], teacher: str) -> list[float] | None:
    """A teacher head's scores for a question, one per label (binary: [score]), or None."""
    path = question.scores.get(teacher)
    raw = get_path(dict(record), path) if path else None
    if question.kind == "binary":
        return [float(raw)] if _is_num(raw) else None
    if isinstance(raw, list) and len(raw) == len(question.labels) and all(map(_is_num, raw)):
        return [float(v) for v in raw]
    return None


def _from_scores(question: Question, vec: list[float] | None) -> Any:
    """The call implied by scores at the question's threshold (_MISSING without scores)."""
    if vec is None:
        return _MISSING
    thr = question.threshold
    if question.kind == "binary":
        return vec[0] >= thr
    if question.kind == "multi":
        return frozenset(lab for lab, v in zip(question.labels, vec, strict=True) if v >= thr)
    top = max(range(len(vec)), key=lambda i: (vec[i], -i))
    return question.labels[top] if vec[top] >= thr else None


def _from_call(question: Question, record: Mapping[str, Any], path: str) -> Any:
    """A call read from the record in comparable form (_MISSING when absent or malformed)."""
    raw = get_path(dict(record), path, _MISSING)
    if raw is _MISSING:
        return _MISSING
    if question.kind == "single":
        return raw if raw is None or isinstance(raw, str) else _MISSING
    if question.kind == "binary":
        return raw if isinstance(raw, bool) else _MISSING
    if isinstance(raw, list) and all(isinstance(v, str) for v in raw):
        return frozenset(raw)
    return _MISSING


def systems(question: Question, teachers: Sequence[str]) -> dict[str, str]:
    """The systems compared on a question and where each call comes from."""
    out: dict[str, str] = {}
    for t in teachers:
        if t in question.calls:
            out[t] = f"call {question.calls[t]}"
        elif t in question.scores:
            out[t] = f"{question.scores[t]} >= {question.threshold}"
    for name in ("candidate", "consensus"):
        if name in question.calls:
            out[name] = f"call {question.calls[name]}"
    for t in teachers:
        if t in question.calls and t in question.scores:
            out[f"{t}_scores"] = f"{question.scores[t]} >= {question.threshold}"
    return out


def system_call(
    question: Question, record: Mapping[str, Any], system: str, teachers: Sequence[str]
) -> Any:
    """One system's call on a record in comparable form, or _MISSING."""
    if system.endswith("_scores") and system[: -len("_scores")] in teachers:
        return _from_scores(question, scores_of(question, record, system[: -len("_scores")]))
    if system in question.calls:
        return _from_call(question, record, question.calls[system])
    if system in teachers:
        return _from_scores(question, scores_of(question, record, system))
    return _MISSING


def is_missing(value: Any) -> bool:
    """Whether a value from system_call is missing."""
    return value is _MISSING


def positive(question: Question, value: Any, label: str) -> bool:
    """Whether a (human or machine) value says `label` (binary: the label "yes")."""
    if question.kind == "multi":
        return label in value
    if question.kind == "binary":
        return bool(value) if label == "yes" else not value
    return value == label


def binary_metrics(y_true: Sequence[bool], y_pred: Sequence[bool]) -> dict[str, Any]:
    """Precision, recall (Wilson intervals), F1 and the counts of two 0/1 sequences.

    Args:
        y_true: the human answer per work.
        y_pred: the machine call per work.
    """
    t, p = np.asarray(y_true, dtype=bool), np.asarray(y_pred, dtype=bool)
    tp, fp = int((t & p).sum()), int((~t & p).sum())
    fn, tn = int((t & ~p).sum()), int((~t & ~p).sum())

    def ratio(k: int, n: int) -> dict[str, Any]:
        lo, hi = wilson(k, n)
        return {"estimate": k / n if n else None, "lo": lo, "hi": hi, "n": n}

    prec, rec = ratio(tp, tp + fp), ratio(tp, tp + fn)
    f1 = 2 * tp / (2 * tp + fp + fn) if (2 * tp + fp + fn) else None
    return {"n": len(t), "tp": tp, "fp": fp, "fn": fn, "tn": tn,
            "precision": prec, "recall": rec, "f1": f1, "f1_n": tp + fp + fn}


def reliability(
    scores: Sequence[float], y: Sequence[bool], n_bins: int = N_BINS
) -> dict[str, Any]:
    """Brier score and reliability table of probabilistic scores against 0/1 outcomes.

    Args:
        scores: predicted probabilities in [0, 1].
        y: the human outcome per score.
        n_bins: equal-width bins of [0, 1].
    """
    s, t = np.asarray(scores, dtype=float), np.asarray(y, dtype=int)
    if len(s) == 0:
        return {"n": 0, "brier": None, "bins": []}
    brier = brier_score_loss(t, s, pos_label=1)
    idx = np.minimum((s * n_bins).astype(int), n_bins - 1)
    rows = []
    for b in range(n_bins):
        mask = idx == b
        n = int(mask.sum())
        if not n:
            continue
        k = int(t[mask].sum())
        lo, hi = wilson(k, n)
        rows.append({"bin_lo": b / n_bins, "bin_hi": (b + 1) / n_bins, "n": n,
                     "mean_score": _num(s[mask].mean()), "observed": k / n, "lo": lo, "hi": hi})
    return {"n": int(len(s)), "positives": int(t.sum()), "brier": _num(brier), "bins": rows}


def _calibration(
    question: Question, pairs: list[tuple[Any, Mapping[str, Any]]], teachers: Sequence[str]
) -> dict[str, Any]:
    """Per teacher: calibration per label and pooled over the question's labels."""
    labels = ["yes"] if question.kind == "binary" else list(question.labels)
    out: dict[str, Any] = {}
    for t in teachers:
        if t not in question.scores:
            continue
        per: dict[str, tuple[list[float], list[bool]]] = {lab: ([], []) for lab in labels}
        for human, record in pairs:
            vec = scores_of(question, record, t)
            if vec is None:
                continue
            for i, lab in enumerate(labels):
                per[lab][0].append(vec[i])
                per[lab][1].append(positive(question, human, lab))
        pooled_s = [v for s, _ in per.values() for v in s]
        pooled_y = [v for _, y in per.values() for v in y]
        out[t] = {
            "labels": {lab: reliability(s, y) for lab, (s, y) in per.items()},
            "pooled": reliability(pooled_s, pooled_y),
        }
    return out


def compare_question(
    question: Question, pairs: Iterable[tuple[Any, Mapping[str, Any]]], teachers: Sequence[str]
) -> dict[str, Any]:
    """Every system against the human answer on one question.

    Args:
        question: the schema question.
        pairs: (validated answer of the question, frame record) per work; works whose answer
            is None are not counted.
        teachers: the schema's teacher names.
    """
    kept = [(human_value(question, a), r) for a, r in pairs]
    kept = [(h, r) for h, r in kept if h is not None]
    labels = ["yes"] if question.kind == "binary" else list(question.labels)
    result: dict[str, Any] = {"kind": question.kind, "n_works": len(kept),
                              "threshold": question.threshold, "systems": {}}
    for system, source in systems(question, teachers).items():
        calls = [(h, system_call(question, r, system, teachers)) for h, r in kept]
        present = [(h, c) for h, c in calls if c is not _MISSING]
        entry: dict[str, Any] = {"source": source, "n": len(present),
                                 "n_missing": len(calls) - len(present), "labels": {}}
        for lab in labels:
            y = [positive(question, h, lab) for h, _ in present]
            pred = [c is not None and positive(question, c, lab) for _, c in present]
            entry["labels"][lab] = binary_metrics(y, pred)
        if question.kind == "single":
            entry.update(_single_summary(question, present))
        result["systems"][system] = entry
    result["calibration"] = _calibration(question, kept, teachers)
    return result


def _single_summary(question: Question, present: list[tuple[Any, Any]]) -> dict[str, Any]:
    """Confusion matrix (rows human, columns machine) and accuracy of a single-choice system."""
    columns = [*question.labels, NO_CALL]
    y_true = [h for h, _ in present]
    y_pred = [NO_CALL if c is None else c for _, c in present]
    known = [(t, p) for t, p in zip(y_true, y_pred, strict=True)
             if t in question.labels and p in columns]
    correct = sum(t == p for t, p in known)
    lo, hi = wilson(correct, len(known))
    matrix = (
        confusion_matrix([t for t, _ in known], [p for _, p in known], labels=columns)
        if known else np.zeros((len(columns), len(columns)), dtype=int)
    )
    return {
        "no_calls": sum(p == NO_CALL for p in y_pred),
        "accuracy": {"estimate": correct / len(known) if known else None, "lo": lo, "hi": hi,
                     "n": len(known)},
        "confusion": {"rows": list(question.labels), "columns": columns,
                      "matrix": [[int(v) for v in row] for row in matrix[: len(question.labels)]],
                      "n": len(known)},
    }


def ranking_report(
    question: Question, works: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]
) -> dict[str, Any]:
    """The machine_scores against "the human chose at least one label" of a multi question.

    Args:
        question: a multi-label question.
        works: (validated final answers, frame record) per work.
    """
    out: dict[str, Any] = {"question": question.name,
                           "target": f"at least one label of '{question.name}' chosen",
                           "scores": {}}
    for key in RANKING_SCORES:
        s, y = [], []
        for answers, record in works:
            human = human_value(question, answers.get(question.name))
            value = get_path(dict(record), f"machine_scores.{key}")
            if human is not None and _is_num(value):
                s.append(float(value))
                y.append(bool(human))
        auc = roc_auc_score(y, s) if 0 < sum(y) < len(y) else None
        out["scores"][key] = {"auc": _num(auc), **reliability(s, y)}
    return out


def compare(
    schema: Schema,
    works: Iterable[tuple[Mapping[str, Any], Mapping[str, Any]]],
    questions: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The humans-vs-machines report for validated works.

    Args:
        schema: the label schema (questions, teachers, score and call paths).
        works: (validated final answers {question: value}, frame record) per work.
        questions: names of the questions to report (None = all of the schema's).
    """
    works = list(works)
    wanted = [q for q in schema.questions if questions is None or q.name in questions]
    multi = next((q for q in wanted if q.kind == "multi"), None)
    return {
        "n_works": len(works),
        "teachers": list(schema.teachers),
        "questions": {
            q.name: compare_question(
                q, [(answers.get(q.name), record) for answers, record in works], schema.teachers
            )
            for q in wanted
        },
        "machine_scores": ranking_report(multi, works) if multi is not None else None,
    }
