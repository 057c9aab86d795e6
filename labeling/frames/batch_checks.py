"""A chunk of typed records at once: works columns, consistency warnings, machine columns.

The per-record rules of check_record and machine_columns, computed over the chunk's score
matrices with numpy instead of record by record; every result (messages, their order,
the stored JSON) is the same as theirs (tests/frames/test_batch_checks.py compares them).
Only records the typed model accepted come here, so every value has its schema type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, get_args, get_origin

import numpy as np
import orjson

from labeling.frames.checks import (
    _BOOL_FIELDS,
    _INT_FIELDS,
    _STR_FIELDS,
    EXPECTED_PREDICTION_STATUS,
)
from labeling.frames.limits import COLUMN_SOURCES
from labeling.frames.machine_columns import (
    SCORE_FROM_WORK,
    MachinePlan,
    _as_bool,
    as_list,
    as_text,
    machine_plan,
)
from labeling.frames.record_model import Columns
from labeling.schema import Question, Schema

Warnings = list[list[str]]


def _matrix(vectors: list[Any], width: int) -> tuple[np.ndarray, np.ndarray]:
    """Present vectors as rows of a matrix (absent ones as zeros) and the presence mask."""
    present = np.fromiter((v is not None for v in vectors), bool, len(vectors))
    m = np.zeros((len(vectors), width))
    if present.any():
        m[present] = np.array([v for v in vectors if v is not None], dtype=float)
    return m, present


def _unit(values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    present = np.fromiter((v is not None for v in values), bool, len(values))
    return np.array([0.0 if v is None else v for v in values], dtype=float), present


def _single(q: Question, scores: dict[str, list[Any]], calls: dict[str, list[Any]],
            out: Warnings) -> None:  # fmt: skip
    labels = set(q.labels)
    for name, values in calls.items():
        for i, v in enumerate(values):
            if v is not None and v not in labels:
                out[i].append(f"{q.name}: {name} call {v!r} is not a label of the schema")
    index = {label: i for i, label in enumerate(q.labels)}
    for teacher, vectors in scores.items():
        if teacher not in calls:
            continue
        m, present = _matrix(vectors, len(q.labels))
        top = m.argmax(axis=1)  # the first maximum, as list.index(max(...))
        call = np.array([-2 if c is None else index.get(c, -1) for c in calls[teacher]])
        for i in np.flatnonzero(present & (call != -2) & (call != top)).tolist():
            t = int(top[i])
            out[i].append(f"{q.name}: {teacher}'s call {calls[teacher][i]!r} is not the arg-max "
                          f"of its own scores ({q.labels[t]!r} {m[i, t]:.3f})")  # fmt: skip
    candidate, consensus = calls.get("candidate"), calls.get("consensus")
    if candidate is None and consensus is None:
        return
    called = [t for t in scores if t in calls]
    for i in range(len(out)):
        teacher_calls = [calls[t][i] for t in called
                         if scores[t][i] is not None and calls[t][i] is not None]  # fmt: skip
        if not teacher_calls:
            continue
        if candidate is not None and candidate[i] is not None and candidate[i] not in teacher_calls:
            out[i].append(f"{q.name}: candidate {candidate[i]!r} is no teacher's call")
        if consensus is not None and consensus[i] is not None:
            if any(tc != consensus[i] for tc in teacher_calls):
                out[i].append(
                    f"{q.name}: consensus {consensus[i]!r} but the teachers' calls differ"
                )


def _masks(q: Question, scores: dict[str, list[Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per record: labels at or above the threshold for any / every present teacher, as bits."""
    n, width = len(next(iter(scores.values()))), len(q.labels)
    union, inter = np.zeros((n, width), bool), np.ones((n, width), bool)
    seen = np.zeros(n, bool)
    for vectors in scores.values():
        m, present = _matrix(vectors, width)
        above = m >= q.threshold
        union |= above & present[:, None]
        inter &= above | ~present[:, None]
        seen |= present
    weights = 1 << np.arange(width, dtype=np.int64)
    return union @ weights, inter @ weights, seen


def _labels_of(q: Question) -> Callable[[int], list[str]]:
    """The labels of a bit mask (memoised: few masks recur across a frame)."""
    memo: dict[int, list[str]] = {}

    def labels(mask: int) -> list[str]:
        if mask not in memo:
            memo[mask] = [lab for i, lab in enumerate(q.labels) if mask >> i & 1]
        return memo[mask]

    return labels


def _multi(q: Question, scores: dict[str, list[Any]], calls: dict[str, list[Any]],
           out: Warnings) -> None:  # fmt: skip
    if not scores:
        return
    union, inter, seen = _masks(q, scores)
    labels = _labels_of(q)
    for name, want in (("candidate", union), ("consensus", inter)):
        for i, got in enumerate(calls.get(name, ())):
            if got is None or not seen[i]:
                continue
            expected = labels(int(want[i]))
            if set(got) != set(expected):
                out[i].append(f"{q.name}: {name} {sorted(got)} does not match the scores at "
                              f"threshold {q.threshold} ({sorted(expected)})")  # fmt: skip


def _binary(q: Question, scores: dict[str, list[Any]], calls: dict[str, list[Any]],
            out: Warnings) -> None:  # fmt: skip
    if not scores:
        return
    n = len(out)
    any_hit, all_hit, seen = np.zeros(n, bool), np.ones(n, bool), np.zeros(n, bool)
    for values in scores.values():
        s, present = _unit(values)
        hit = s >= q.threshold
        any_hit |= hit & present
        all_hit &= hit | ~present
        seen |= present
    for name, says in (("candidate", any_hit), ("consensus", all_hit)):
        for i, got in enumerate(calls.get(name, ())):
            if got is not None and seen[i] and got != bool(says[i]):
                out[i].append(f"{q.name}: {name} is {got} but the scores at threshold "
                              f"{q.threshold} say {bool(says[i])}")  # fmt: skip


_KINDS = {"single": _single, "multi": _multi, "binary": _binary}


def batch_warnings(schema: Schema, cols: Columns) -> Warnings:
    """The consistency warnings of each record, in check_record's order."""
    out: Warnings = [[] for _ in range(len(cols))]
    for q in schema.questions:
        scores = {t: cols[p] for t, p in q.scores.items()}
        scores = {t: v for t, v in scores.items() if any(x is not None for x in v)}
        calls = {name: cols[p] for name, p in q.calls.items()}
        _KINDS[q.kind](q, scores, calls, out)
    for i, status in enumerate(cols["prediction.prediction_status"]):
        if status is not None and status != EXPECTED_PREDICTION_STATUS:
            out[i].append(f"prediction_status is {status!r}, not {EXPECTED_PREDICTION_STATUS!r}")
    units = [_unit(cols[f"machine_scores.{k}"])
             for k in ("score_opus", "score_gpt", "score_spread")]  # fmt: skip
    (opus, p1), (gpt, p2), (spread, p3) = units
    for i in np.flatnonzero(p1 & p2 & p3 & (np.abs(np.abs(opus - gpt) - spread) > 1e-6)).tolist():
        out[i].append("machine_scores.score_spread is not |score_opus - score_gpt|")
    return out


def batch_columns(values: Columns) -> list[dict[str, Any]]:
    """The works columns of each record, as check_record's work_columns makes them."""
    raw_ids = values["id"]
    # The model admits only (https://openalex.org/)W<digits>: its last part is the id.
    cols: dict[str, list[Any]] = {"id": [r.rsplit("/", 1)[-1].upper() for r in raw_ids]}
    for key in (*_STR_FIELDS, *_INT_FIELDS, *_BOOL_FIELDS, "routes"):
        cols[key] = values[key]
    for column in ("model_version", "prediction_status", "score_opus", "score_gpt"):
        cols[column] = values[COLUMN_SOURCES[column]]
    cols["score_max"] = [
        None if o is None and g is None else max(x for x in (o, g) if x is not None)
        for o, g in zip(cols["score_opus"], cols["score_gpt"], strict=True)
    ]
    for column in ("score_spread", "teacher_disagreement", "threshold_uncertainty"):
        cols[column] = values[COLUMN_SOURCES[column]]
    names = list(cols)
    return [dict(zip(names, row, strict=True)) for row in zip(*cols.values(), strict=True)]


def batch_machine(schema: Schema, cols: Columns) -> list[str]:
    """The stored machine columns (works.machine) of each record, as machine_digest makes them."""
    plan, kinds = _plan(schema)
    none = [None] * len(cols)
    columns: list[list[Any]] = []
    for (col, at, fn), q in zip(plan.steps, kinds, strict=True):
        if col in SCORE_FROM_WORK:
            continue
        if at < 0:
            columns.append(none)
            continue
        path = plan.paths[at]
        values = cols[path]
        if q is not None and q.kind == "multi":
            m, present = _matrix(values, len(q.labels))
            masks = (m >= q.threshold) @ (1 << np.arange(len(q.labels), dtype=np.int64))
            labels = _labels_of(q)
            columns.append([labels(int(k)) if p else None
                            for k, p in zip(masks, present, strict=True)])  # fmt: skip
        elif q is not None:  # binary: yes / no at the threshold
            s, present = _unit(values)
            hit = s >= q.threshold
            columns.append([("yes" if h else "no") if p else None
                            for h, p in zip(hit, present, strict=True)])  # fmt: skip
        elif _unchanged_by(fn, cols.model.types[path]):
            columns.append(values)
        else:
            columns.append([fn(v) for v in values])
    return [orjson.dumps(row).decode() for row in zip(*columns, strict=True)]


def _unchanged_by(fn: Callable[[Any], Any], kind: Any) -> bool:
    """Whether a machine column's conversion returns every value of this model type as is."""
    if get_origin(kind) is Annotated:
        kind = get_args(kind)[0]
    return (
        (fn is as_text and kind is str)
        or (fn is _as_bool and kind is bool)
        or (fn is as_list and kind == list[str])
    )


_plans: dict[str, tuple[MachinePlan, list[Question | None]]] = {}


def _plan(schema: Schema) -> tuple[MachinePlan, list[Question | None]]:
    """The machine plan and its thresholded steps (once per schema and process)."""
    if schema.hash not in _plans:
        _plans[schema.hash] = (machine_plan(schema), _step_questions(schema))
    return _plans[schema.hash]


def _step_questions(schema: Schema) -> list[Question | None]:
    """Per machine_plan step: the question whose scores it thresholds (None: another step)."""
    kinds: list[Question | None] = []
    for q in schema.questions:
        for who in (*schema.teachers, "candidate", "consensus"):
            thresholded = who not in q.calls and who in q.scores and q.kind in ("multi", "binary")
            kinds.append(q if thresholded else None)
    steps = machine_plan(schema).steps
    kinds += [None] * (len(steps) - len(kinds))
    return kinds
