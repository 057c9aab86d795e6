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
  Brier score (the mean squared difference, equal to scikit-learn's) and a reliability
  table over equal-width bins of [0, 1] (mean score, observed rate with a Wilson interval, n),
  empty bins left out.
- The record's ``machine_scores`` (score_opus, score_gpt: they rank works, they assert no
  category) are read against "the human chose at least one label" of the first multi-label
  question asked: ROC AUC (scikit-learn; None with one class only), Brier and reliability.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score

from labeling.numbers import finite_or_none, is_finite_number
from labeling.schema import Question, Schema, get_path
from labeling.stats.estimates import wilson
from labeling.stats.machine_arrays import (
    RANKING_SCORES,
    QuestionArrays,
    confusion,
    encode,
    encode_records,
    human_codes,
    label_counts,
    layout,
    wilson_many,
)

NO_CALL = "(no call)"
_MISSING = object()
N_BINS = 10


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
    raw: Any = get_path(dict(record), path) if path else None
    if question.kind == "binary":
        return [float(raw)] if is_finite_number(raw) else None
    fits = isinstance(raw, list) and len(raw) == len(question.labels)
    if fits and all(map(is_finite_number, raw)):
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
    return _metrics_from_counts(
        len(t), int((t & p).sum()), int((~t & p).sum()), int((t & ~p).sum()), int((~t & ~p).sum())
    )


def reliability(
    scores: Sequence[float] | np.ndarray, y: Sequence[bool] | np.ndarray, n_bins: int = N_BINS
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
    # scikit-learn's brier_score_loss, in its own arithmetic (two columns, halved: the same
    # bits, tests/stats/test_machines.py); its input checks cost 8 ms a call, 0.7 s for the
    # 90 calls of a large report.
    y = t.astype(float)
    brier = 0.5 * float(np.mean(((1 - y) - (1 - s)) ** 2 + (y - s) ** 2))
    idx = np.minimum((s * n_bins).astype(int), n_bins - 1)
    ns = np.bincount(idx, minlength=n_bins)
    ks = np.bincount(idx, weights=t, minlength=n_bins).astype(int)
    used = [b for b in range(n_bins) if ns[b]]
    cis = wilson_many(ks[used], ns[used])
    rows = []
    for b, (lo, hi) in zip(used, cis, strict=True):
        n, k = int(ns[b]), int(ks[b])
        rows.append(
            {
                "bin_lo": b / n_bins,
                "bin_hi": (b + 1) / n_bins,
                "n": n,
                "mean_score": finite_or_none(s[idx == b].mean()),
                "observed": k / n,
                "lo": lo,
                "hi": hi,
            }
        )
    return {
        "n": int(len(s)),
        "positives": int(t.sum()),
        "brier": finite_or_none(brier),
        "bins": rows,
    }


def _metrics_from_counts(
    n: int, tp: int, fp: int, fn: int, tn: int, intervals: Sequence[Any] | None = None
) -> dict[str, Any]:
    """Precision, recall (Wilson intervals), F1 and the counts, from a 2 x 2 table.

    intervals: the precision and recall intervals when already computed (wilson_many).
    """
    p_ci, r_ci = intervals or (wilson(tp, tp + fp), wilson(tp, tp + fn))

    def ratio(k: int, m: int, ci: tuple[Any, Any]) -> dict[str, Any]:
        return {"estimate": k / m if m else None, "lo": ci[0], "hi": ci[1], "n": m}

    f1 = 2 * tp / (2 * tp + fp + fn) if (2 * tp + fp + fn) else None
    return {
        "n": n,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "precision": ratio(tp, tp + fp, p_ci),
        "recall": ratio(tp, tp + fn, r_ci),
        "f1": f1,
        "f1_n": tp + fp + fn,
    }


def _calibration(question: Question, arrays: QuestionArrays) -> dict[str, Any]:
    """Per teacher: calibration per label and pooled over the question's labels."""
    out: dict[str, Any] = {}
    for t, (scores, ok) in arrays.scores.items():
        s, y = scores[ok], arrays.human[ok]
        out[t] = {
            "labels": {lab: reliability(s[:, j], y[:, j]) for j, lab in enumerate(arrays.labels)},
            # pooled label by label, in the order of the labels
            "pooled": reliability(s.T.reshape(-1), y.T.reshape(-1)),
        }
    return out


def compare_question(
    question: Question,
    pairs: Iterable[tuple[Any, Mapping[str, Any] | None]],
    teachers: Sequence[str],
    *,
    schema: Schema | None = None,
    encoded: np.ndarray | None = None,
    humans: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """Every system against the human answer on one question.

    Args:
        question: the schema question.
        pairs: (validated answer of the question, frame record) per work; works whose answer
            is None are not counted.
        teachers: the schema's teacher names.
        schema: the schema the records are encoded under (default: this question alone).
        encoded: the works' encoded records (machine_arrays.encode_record), one row per pair;
            computed from the records when not given.
        humans: each work's human_value when already known (then pairs may be empty, with
            encoded given).
    """
    pairs = list(pairs)
    schema = schema or Schema(
        questions=(question,), version="", teachers=tuple(teachers), hash="", path=""
    )
    if encoded is None:
        encoded = encode_records(schema, [r or {} for _, r in pairs])
    if humans is None:
        humans = [human_value(question, a) for a, _ in pairs]
    rows = [i for i, h in enumerate(humans) if h is not None]
    kept = [humans[i] for i in rows]
    arrays = encode(
        question, kept, encoded[rows], layout(schema), systems(question, teachers), teachers
    )
    result: dict[str, Any] = {
        "kind": question.kind,
        "n_works": len(kept),
        "threshold": question.threshold,
        "systems": {},
    }
    single_codes = None
    for system, sa in arrays.systems.items():
        present = sa.present
        n = int(present.sum())
        entry: dict[str, Any] = {
            "source": sa.source,
            "n": n,
            "n_missing": len(kept) - n,
            "labels": {},
        }
        c = label_counts(arrays.human[present], sa.calls[present])
        tp = c["tp"]
        cis = wilson_many(np.concatenate([tp, tp]), np.concatenate([tp + c["fp"], tp + c["fn"]]))
        width = len(arrays.labels)
        for j, lab in enumerate(arrays.labels):
            entry["labels"][lab] = _metrics_from_counts(
                n,
                int(c["tp"][j]),
                int(c["fp"][j]),
                int(c["fn"][j]),
                int(c["tn"][j]),
                intervals=(cis[j], cis[width + j]),
            )
        if question.kind == "single":
            idx = np.flatnonzero(present)
            assert sa.single is not None  # a single-choice question's arrays carry its calls
            if single_codes is None:  # the human labels' indexes, once for every system
                single_codes = human_codes(question, arrays.human_single)
            entry.update(_single_summary(question, single_codes[idx], sa.single[idx]))
        result["systems"][system] = entry
    result["calibration"] = _calibration(question, arrays)
    return result


def _single_summary(question: Question, humans: np.ndarray, codes: np.ndarray) -> dict[str, Any]:
    """Confusion matrix (rows human, columns machine) and accuracy of a single-choice system."""
    matrix, known, correct, no_calls = confusion(question, humans, codes)
    lo, hi = wilson(correct, known)
    return {
        "no_calls": no_calls,
        "accuracy": {
            "estimate": correct / known if known else None,
            "lo": lo,
            "hi": hi,
            "n": known,
        },
        "confusion": {
            "rows": list(question.labels),
            "columns": [*question.labels, NO_CALL],
            "matrix": [[int(v) for v in row] for row in matrix[: len(question.labels)]],
            "n": known,
        },
    }


def ranking_report(
    question: Question,
    works: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]],
    ranking: Mapping[str, np.ndarray] | None = None,
    humans: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """The machine_scores against "the human chose at least one label" of a multi question.

    Args:
        question: a multi-label question.
        works: (validated final answers, frame record) per work.
        ranking: each machine_scores key's values per work (NaN where absent), when already
            read (machine_arrays encodings); else read from the records.
        humans: each work's human_value of the question, when already known.
    """
    out: dict[str, Any] = {
        "question": question.name,
        "target": f"at least one label of '{question.name}' chosen",
        "scores": {},
    }
    if humans is None:
        humans = [human_value(question, answers.get(question.name)) for answers, _ in works]
    for key in RANKING_SCORES:
        if ranking is not None:
            values = ranking[key]
        else:
            raw = [get_path(dict(record or {}), f"machine_scores.{key}") for _, record in works]
            values = np.array([float(v) if is_finite_number(v) else np.nan for v in raw])
        keep = [i for i, h in enumerate(humans) if h is not None and not np.isnan(values[i])]
        s = values[keep] if keep else np.zeros(0)
        y = np.array([bool(humans[i]) for i in keep], dtype=bool)
        auc = roc_auc_score(y, s) if 0 < y.sum() < len(y) else None
        out["scores"][key] = {"auc": finite_or_none(auc), **reliability(s, y)}
    return out


def compare(
    schema: Schema,
    works: Iterable[tuple[Mapping[str, Any], Mapping[str, Any] | None]],
    questions: Sequence[str] | None = None,
    *,
    encoded: np.ndarray | None = None,
    humans: Callable[[Question], Sequence[Any]] | None = None,
) -> dict[str, Any]:
    """The humans-vs-machines report for validated works.

    Args:
        schema: the label schema (questions, teachers, score and call paths).
        works: (validated final answers {question: value}, frame record) per work.
        questions: names of the questions to report (None = all of the schema's).
        encoded: the works' records encoded under the schema (machine_arrays), one row per
            work, when already done (e.g. from the memo); a record may then be None.
        humans: each work's human_value of a question, when already known (evaluation's
            Validated.humans; the frame estimates use the same).
    """
    works = list(works)
    if encoded is None:
        encoded = encode_records(schema, [r or {} for _, r in works])
    lay = layout(schema)
    wanted = [q for q in schema.questions if questions is None or q.name in questions]
    multi = next((q for q in wanted if q.kind == "multi"), None)
    ranking = {key: encoded[:, col] for key, col in lay.ranking.items()}
    return {
        "n_works": len(works),
        "teachers": list(schema.teachers),
        "questions": {
            q.name: compare_question(
                q,
                [] if humans else [(answers.get(q.name), record) for answers, record in works],
                schema.teachers,
                schema=schema,
                encoded=encoded,
                humans=humans(q) if humans else None,
            )
            for q in wanted
        },
        "machine_scores": (
            ranking_report(multi, works, ranking, humans(multi) if humans else None)
            if multi is not None
            else None
        ),
    }
