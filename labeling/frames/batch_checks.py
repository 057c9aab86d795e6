"""A chunk of typed records at once: works columns, consistency warnings, machine columns.

The per-record rules of check_record and machine_columns, computed over the chunk's score
matrices with numpy instead of record by record; every result (messages, their order,
the stored JSON) is the same as theirs (tests/frames/test_batch_checks.py compares them).
Only records the typed model accepted come here, so every value has its schema type.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain, repeat
from operator import is_not
from typing import Annotated, Any, Literal, get_args, get_origin

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
from labeling.frames.score_vectors import matrix_key, read_vectors
from labeling.schema import Question, Schema

Warnings = list[list[str]]


def _matrix(cols: Columns, path: str, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The vectors at a path as rows of a matrix (absent ones as zeros), and the presence mask.

    Built once per chunk and path (the warnings and the machine columns both read them):
    from the raw JSON by score_vectors (typed_chunk has read them all already), or from the
    lists of the floor's model through a flat iterator (np.array on a list of lists
    costs twice as much).
    """
    key = matrix_key(path)
    if key not in cols.derived and path in cols.model.vectors:  # raw JSON (see score_vectors)
        m, present, bad = read_vectors(cols[path], width)
        if bad:
            raise ValueError(f"{path}: not a vector of {width} scores in records {bad}")
        cols.derived[key] = (m, present)
    if key not in cols.derived:  # lists of floats (the floor's model)
        vectors = cols[path]
        n = len(vectors)
        present = _there(vectors)
        if present.all():  # the model fixed every vector's length: the reshape is exact
            m = np.fromiter(chain.from_iterable(vectors), float, n * width).reshape(n, width)
        else:
            m = np.zeros((n, width))
            if present.any():
                flat = chain.from_iterable(v for v in vectors if v is not None)
                m[present] = np.fromiter(flat, float).reshape(-1, width)
        cols.derived[key] = (m, present)
    return cols.derived[key]


def _has_scores(cols: Columns, q: Question, path: str) -> bool:
    """Whether any record of the chunk has scores at a path (a vector's, by its matrix)."""
    if path in cols.model.vectors:
        return bool(_matrix(cols, path, len(q.labels))[1].any())
    values = cols[path]
    return values.count(None) < len(values)


def _there(values: list[Any]) -> np.ndarray:
    """Which values are not None (compared in C, not by a Python step per value)."""
    return np.fromiter(map(is_not, values, repeat(None)), bool, len(values))


def _unit(values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Scores (None as 0.0) and which are there; numpy reads None as NaN, never a score."""
    s = np.array(values, dtype=float)
    present = ~np.isnan(s)
    s[~present] = 0.0
    return s, present


def _codes(values: list[Any], codes: dict[Any, int]) -> np.ndarray:
    """Each value as its number in `codes` (a new value gets the next one), None as -1.

    The new values are numbered first, then every value is looked up in C (map): one
    Python step per value cost a sixth of batch_warnings.
    """
    codes.setdefault(None, -1)
    for v in set(values).difference(codes):
        codes[v] = len(codes)
    return np.fromiter(map(codes.__getitem__, values), np.int64, len(values))


def _single(q: Question, scores: dict[str, str], calls: dict[str, list[Any]], cols: Columns,
            out: Warnings) -> None:  # fmt: skip
    # Each call as its label's position, None as -2, a value that is no label as -1: looked
    # up once, in C (map), for every check below (a set's issuperset over the calls first
    # made batch_warnings 3.5 us a line instead of 3.3; issue 16, twenty-eighth pass).
    index: dict[str | None, int] = {None: -2, **{lab: i for i, lab in enumerate(q.labels)}}
    coded = {name: np.fromiter(map(index.get, values, repeat(-1)), np.int64, len(values))
             for name, values in calls.items()}  # fmt: skip
    unknown = {name: np.flatnonzero(c == -1).tolist() for name, c in coded.items()}
    for name, at in unknown.items():
        for i in at:
            out[i].append(f"{q.name}: {name} call {calls[name][i]!r} is not a label of the schema")
    for teacher, path in scores.items():
        if teacher not in calls:
            continue
        m, present = _matrix(cols, path, len(q.labels))
        top = m.argmax(axis=1)  # the first maximum, as list.index(max(...))
        call = coded[teacher]
        for i in np.flatnonzero(present & (call != -2) & (call != top)).tolist():
            t = int(top[i])
            out[i].append(f"{q.name}: {teacher}'s call {calls[teacher][i]!r} is not the arg-max "
                          f"of its own scores ({q.labels[t]!r} {m[i, t]:.3f})")  # fmt: skip
    candidate, consensus = calls.get("candidate"), calls.get("consensus")
    called = [t for t in scores if t in calls]
    if (candidate is None and consensus is None) or not called:
        return
    # A teacher's call counts where it and the teacher's scores are there; calls are compared
    # by number, every distinct string (a label or not) with its own: the label positions
    # are such numbers while every call is a label (None, -2, is never a call).
    if any(unknown[name] for name in (*called, "candidate", "consensus") if name in unknown):
        codes: dict[Any, int] = {}
        coded = {name: _codes(calls[name], codes) for name in (*called, "candidate", "consensus")
                 if name in calls}  # fmt: skip
    calls_at = np.stack([np.where(_matrix(cols, scores[t], len(q.labels))[1], coded[t], -1)
                         for t in called], axis=1)  # fmt: skip
    counted = calls_at >= 0
    some = counted.any(axis=1)
    if candidate is not None:
        c = coded["candidate"]
        no_one = ~((calls_at == c[:, None]) & counted).any(axis=1)
        for i in np.flatnonzero(some & (c >= 0) & no_one).tolist():
            out[i].append(f"{q.name}: candidate {candidate[i]!r} is no teacher's call")
    if consensus is not None:
        c = coded["consensus"]
        differ = ((calls_at != c[:, None]) & counted).any(axis=1)
        for i in np.flatnonzero(some & (c >= 0) & differ).tolist():
            out[i].append(f"{q.name}: consensus {consensus[i]!r} but the teachers' calls differ")


def _masks(q: Question, scores: dict[str, str], cols: Columns,
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Per record: labels at or above the threshold for any / every present teacher, as bits."""
    n, width = len(cols), len(q.labels)
    union, inter = np.zeros((n, width), bool), np.ones((n, width), bool)
    seen = np.zeros(n, bool)
    for path in scores.values():
        m, present = _matrix(cols, path, width)
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


def _multi(q: Question, scores: dict[str, str], calls: dict[str, list[Any]], cols: Columns,
           out: Warnings) -> None:  # fmt: skip
    if not scores:
        return
    union, inter, seen = _masks(q, scores, cols)
    labels = _labels_of(q)
    bit = {label: 1 << i for i, label in enumerate(q.labels)}
    # A call's labels as bits, -1 when not only labels (and for None): each distinct call is
    # worked out once, then every call looked up in C (a Python step per call cost 1.7 us).
    masks: dict[tuple[str, ...] | None, int] = {None: -1}
    for name, want in (("candidate", union), ("consensus", inter)):
        got = calls.get(name)
        if got is None:
            continue
        there = _there(got)
        keys = [None if g is None else tuple(g) for g in got]
        for key in set(keys).difference(masks):
            assert key is not None
            known = all(c in bit for c in key)
            masks[key] = sum(bit[c] for c in set(key)) if known else -1
        bits = np.fromiter(map(masks.__getitem__, keys), np.int64, len(keys))
        for i in np.flatnonzero(there & seen & (bits != want)).tolist():
            expected = labels(int(want[i]))
            out[i].append(f"{q.name}: {name} {sorted(got[i])} does not match the scores at "
                          f"threshold {q.threshold} ({sorted(expected)})")  # fmt: skip


def _binary(q: Question, scores: dict[str, str], calls: dict[str, list[Any]], cols: Columns,
            out: Warnings) -> None:  # fmt: skip
    if not scores:
        return
    n = len(out)
    any_hit, all_hit, seen = np.zeros(n, bool), np.ones(n, bool), np.zeros(n, bool)
    for path in scores.values():
        s, present = _unit(cols[path])
        hit = s >= q.threshold
        any_hit |= hit & present
        all_hit &= hit | ~present
        seen |= present
    for name, says in (("candidate", any_hit), ("consensus", all_hit)):
        got = calls.get(name)
        if got is None:
            continue
        flag = np.fromiter(map(_FLAGS.__getitem__, got), np.int64, len(got))
        for i in np.flatnonzero((flag >= 0) & seen & (flag != says)).tolist():
            out[i].append(f"{q.name}: {name} is {got[i]} but the scores at threshold "
                          f"{q.threshold} say {bool(says[i])}")  # fmt: skip


_FLAGS = {None: -1, False: 0, True: 1}  # a binary call as a number
_YES_NO = {-1: None, 0: "no", 1: "yes"}  # a binary call from its scores
_KINDS = {"single": _single, "multi": _multi, "binary": _binary}


def batch_warnings(schema: Schema, cols: Columns) -> Warnings:
    """The consistency warnings of each record, in check_record's order."""
    out: Warnings = [[] for _ in range(len(cols))]
    for q in schema.questions:
        # A teacher none of whose records has scores is left out, as check_record does.
        scores = {t: p for t, p in q.scores.items() if _has_scores(cols, q, p)}
        calls = {name: cols[p] for name, p in q.calls.items()}
        _KINDS[q.kind](q, scores, calls, cols, out)
    for i, status in enumerate(cols["prediction.prediction_status"]):
        if status is not None and status != EXPECTED_PREDICTION_STATUS:
            out[i].append(f"prediction_status is {status!r}, not {EXPECTED_PREDICTION_STATUS!r}")
    units = [_unit(cols[f"machine_scores.{k}"])
             for k in ("score_opus", "score_gpt", "score_spread")]  # fmt: skip
    (opus, p1), (gpt, p2), (spread, p3) = units
    for i in np.flatnonzero(p1 & p2 & p3 & (np.abs(np.abs(opus - gpt) - spread) > 1e-6)).tolist():
        out[i].append("machine_scores.score_spread is not |score_opus - score_gpt|")
    return out


def batch_columns(values: Columns) -> dict[str, list[Any]]:
    """The works columns of the records, column by column (lists in check_record's key order).

    Each record's values are the ones check_record's work_columns gives it.
    """
    raw_ids = values["id"]
    # The model admits only (https://openalex.org/)W<digits>: its last part is the id, which
    # a chunk of such ids, uppercase and without a slash (real frames'), has already.
    joined = "".join(raw_ids)
    ids = raw_ids if "/" not in joined and joined.isupper() else [
        r.rsplit("/", 1)[-1].upper() for r in raw_ids]  # fmt: skip
    cols: dict[str, list[Any]] = {"id": ids}
    for key in (*_STR_FIELDS, *_INT_FIELDS, *_BOOL_FIELDS, "routes"):
        cols[key] = values[key]
    for column in ("model_version", "prediction_status", "score_opus", "score_gpt"):
        cols[column] = values[COLUMN_SOURCES[column]]
    # The larger of the two (the first when equal, as max() gives), or the one there is.
    cols["score_max"] = [
        g if o is None else o if g is None or o >= g else g
        for o, g in zip(cols["score_opus"], cols["score_gpt"], strict=True)
    ]
    for column in ("score_spread", "teacher_disagreement", "threshold_uncertainty"):
        cols[column] = values[COLUMN_SOURCES[column]]
    return cols


def batch_machine(schema: Schema, cols: Columns, utf8: bool = False) -> list[str] | list[bytes]:
    """The stored machine columns (works.machine) of each record, as machine_digest makes them.

    utf8: as the text's UTF-8 bytes (orjson's output), for a writer that takes text so.
    """
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
        # Each record's value looked up by a number, in C: -1 where it has no scores.
        if q is not None and q.kind == "multi":
            m, present = _matrix(cols, path, len(q.labels))
            masks = (m >= q.threshold) @ (1 << np.arange(len(q.labels), dtype=np.int64))
            keys = np.where(present, masks, -1).tolist()
            labels = _labels_of(q)
            memo: dict[int, list[str] | None] = {k: labels(k) for k in set(keys) if k >= 0}
            memo[-1] = None
            columns.append(list(map(memo.__getitem__, keys)))
        elif q is not None:  # binary: yes / no at the threshold
            s, present = _unit(values)
            keys = np.where(present, s >= q.threshold, -1).tolist()
            columns.append(list(map(_YES_NO.__getitem__, keys)))
        elif _unchanged_by(fn, cols.model.types[path]):
            columns.append(values)
        else:
            columns.append([fn(v) for v in values])
    if utf8:
        return list(map(orjson.dumps, zip(*columns, strict=True)))
    return [orjson.dumps(row).decode() for row in zip(*columns, strict=True)]


def _unchanged_by(fn: Callable[[Any], Any], kind: Any) -> bool:
    """Whether a machine column's conversion returns every value of this model type as is."""
    if get_origin(kind) is Annotated:
        kind = get_args(kind)[0]
    return (
        (fn is as_text and _text(kind))
        or (fn is _as_bool and kind is bool)
        or (fn is as_list and get_origin(kind) is list and _text(get_args(kind)[0]))
    )


def _text(kind: Any) -> bool:
    """Whether a model type's values are all str (str, or a Literal of labels)."""
    if get_origin(kind) is Literal:
        return all(type(label) is str for label in get_args(kind))
    return kind is str


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
