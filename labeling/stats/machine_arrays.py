"""Human answers and machine calls as arrays: each record read once, every count a numpy sum.

A record is encoded once per schema into one flat float vector (encode_record, with a per
process memo keyed on the record's hash, so a warm Monitor reads only newly validated works):
for every question, each teacher's score vector (NaN where the record lacks a valid one), each
call path's value (single: label index, -1 no call, L a label outside the schema; binary: 0/1;
multi: 0/1 per label and a presence slot; NaN where absent or malformed) and the two ranking
scores. Slicing the stacked vectors gives, per question, an n x labels score matrix per teacher
and an n x labels boolean call matrix per system with a mask of the works where the system has
a value. The scalar rules of labeling.stats.machines give the same numbers work by work
(tests/stats/test_machine_arrays.py checks the whole report against them).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from statsmodels.stats.proportion import proportion_confint

from labeling.numbers import finite_or_none, is_finite_number, is_number
from labeling.schema import Question, Schema, get_path

_MISSING = object()
RANKING_SCORES = ("score_opus", "score_gpt")
NO_CALL_TEXT = "(no call)"
MEMO_SIZE = 2_000_000  # encoded records kept per process (about 1 KB each)


@dataclass(frozen=True)
class Layout:
    """Where each question's scores and calls sit in an encoded record."""

    width: int
    scores: dict[tuple[str, str], slice]  # (question, teacher) -> score columns
    calls: dict[tuple[str, str], slice]  # (question, call system) -> call columns
    ranking: dict[str, int]  # machine_scores key -> column


def layout(schema: Schema) -> Layout:
    """The encoding of records under a schema (every question, teacher and call path)."""
    at, scores, calls = 0, {}, {}
    for q in schema.questions:
        width = 1 if q.kind == "binary" else len(q.labels)
        for t in schema.teachers:
            if t in q.scores:
                scores[(q.name, t)] = slice(at, at + width)
                at += width
        for name in q.calls:
            size = len(q.labels) + 1 if q.kind == "multi" else 1
            calls[(q.name, name)] = slice(at, at + size)
            at += size
    ranking = {key: at + i for i, key in enumerate(RANKING_SCORES)}
    return Layout(at + len(RANKING_SCORES), scores, calls, ranking)


def _call_values(question: Question, raw: Any) -> list[float] | None:
    """A call path's value as the floats of its slots, or None when absent or malformed."""
    if raw is _MISSING:
        return None
    if question.kind == "single":
        if raw is None or raw == NO_CALL_TEXT:
            return [-1.0]
        if not isinstance(raw, str):
            return None
        labels = question.labels
        return [float(labels.index(raw)) if raw in labels else float(len(labels))]
    if question.kind == "binary":
        return [1.0 if raw else 0.0] if isinstance(raw, bool) else None
    if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
        return None
    return [1.0 if lab in raw else 0.0 for lab in question.labels] + [1.0]


def encode_record(schema: Schema, lay: Layout, record: Mapping[str, Any]) -> np.ndarray:
    """One record as its flat float vector (NaN where a value is absent or malformed)."""
    rec = record if isinstance(record, dict) else dict(record)
    out = np.full(lay.width, np.nan)
    for q in schema.questions:
        for t in schema.teachers:
            where = lay.scores.get((q.name, t))
            if where is None:
                continue
            raw = get_path(rec, q.scores[t])
            width = where.stop - where.start
            if q.kind == "binary":
                if is_finite_number(raw):
                    out[where] = float(raw)
            elif isinstance(raw, list) and len(raw) == width and all(map(is_number, raw)):
                vec = np.asarray(raw, dtype=float)
                if np.isfinite(vec).all():
                    out[where] = vec
        for name, path in q.calls.items():
            values = _call_values(q, get_path(rec, path, _MISSING))
            if values is not None:
                out[lay.calls[(q.name, name)]] = values
    for key, col in lay.ranking.items():
        value = get_path(rec, f"machine_scores.{key}")
        if is_finite_number(value):
            out[col] = float(value)
    return out


class RecordMemo:
    """Encoded records by (schema hash, record hash): records only change on re-import."""

    def __init__(self, size: int = MEMO_SIZE) -> None:
        """An empty memo holding at most `size` records."""
        self.size = size
        self._rows: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def matrix(
        self, schema: Schema, keys: Sequence[str | None], records: Sequence[Any]
    ) -> np.ndarray:
        """The stacked encodings of records (a record given as None must be in the memo)."""
        lay = layout(schema)
        rows = []
        with self._lock:
            for key, rec in zip(keys, records, strict=True):
                k = (schema.hash, key) if key is not None else None
                row = self._rows.get(k) if k else None
                if row is None:
                    row = encode_record(schema, lay, rec)
                    if k:
                        self._rows[k] = row
                        if len(self._rows) > self.size:
                            self._rows.popitem(last=False)
                rows.append(row)
        return np.vstack(rows) if rows else np.zeros((0, lay.width))

    def has(self, schema: Schema, key: str) -> bool:
        """Whether a record is already encoded."""
        return (schema.hash, key) in self._rows


MEMO = RecordMemo()


def encode_records(schema: Schema, records: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """The stacked encodings of records (not memoised: for records without a hash)."""
    lay = layout(schema)
    rows = [encode_record(schema, lay, r) for r in records]
    return np.vstack(rows) if rows else np.zeros((0, lay.width))


@dataclass
class SystemArrays:
    """One system's calls on the works: where present, positive per label, single calls."""

    source: str
    present: np.ndarray  # n bool: the system has a value on this work
    calls: np.ndarray  # n x labels bool: the call says this label (False where absent)
    single: np.ndarray | None = None  # single choice: label index, -1 no call, L other


@dataclass
class QuestionArrays:
    """A question's human answers and every system's calls over the same works."""

    labels: list[str]
    human: np.ndarray  # n x labels bool
    human_single: list[Any] = field(default_factory=list)  # single choice: the human label
    scores: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    systems: dict[str, SystemArrays] = field(default_factory=dict)


def _from_scores(question: Question, scores: np.ndarray, ok: np.ndarray) -> SystemArrays:
    """The call implied by scores at the threshold (multi: each label; single: top label)."""
    thr = question.threshold
    with np.errstate(invalid="ignore"):
        if question.kind != "single":
            return SystemArrays("", ok, (scores >= thr) & ok[:, None])
        filled = np.where(ok[:, None], scores, -np.inf)
        top = np.argmax(filled, axis=1)  # the first of equal maxima, like the scalar rule
        called = ok & (filled[np.arange(len(top)), top] >= thr)
    calls = np.zeros_like(scores, dtype=bool)
    calls[np.flatnonzero(called), top[called]] = True
    return SystemArrays("", ok, calls, np.where(called, top, -1))


def _from_slots(question: Question, slots: np.ndarray) -> SystemArrays:
    """A call path's system from its encoded slots."""
    n = len(slots)
    if question.kind == "multi":
        present = ~np.isnan(slots[:, -1])
        return SystemArrays("", present, (slots[:, :-1] == 1) & present[:, None])
    value = slots[:, 0]
    present = ~np.isnan(value)
    if question.kind == "binary":
        return SystemArrays("", present, ((value == 1) & present)[:, None])
    code = np.where(present, value, -2).astype(int)
    calls = np.zeros((n, len(question.labels)), dtype=bool)
    hit = (code >= 0) & (code < len(question.labels))
    calls[np.flatnonzero(hit), code[hit]] = True
    return SystemArrays("", present, calls, code)


def encode(
    question: Question,
    humans: Sequence[Any],
    matrix: np.ndarray,
    lay: Layout,
    systems: Mapping[str, str],
    teachers: Sequence[str],
) -> QuestionArrays:
    """Arrays of one question over works with a human answer (human_value form, not None).

    Args:
        question: the schema question.
        humans: each work's human answer in comparable form (machines.human_value).
        matrix: the works' encoded records (encode_record), one row per work.
        lay: the layout of the encoding.
        systems: system name -> source (machines.systems).
        teachers: the schema's teacher names.
    """
    labels = ["yes"] if question.kind == "binary" else list(question.labels)
    n = len(humans)
    human = np.zeros((n, len(labels)), dtype=bool)
    index = {lab: j for j, lab in enumerate(labels)}
    if question.kind == "multi":
        for i, h in enumerate(humans):
            for lab in h:
                if lab in index:
                    human[i, index[lab]] = True
    elif question.kind == "binary":
        human[:, 0] = [bool(h) for h in humans]
    else:
        codes = np.array([index.get(h, -1) for h in humans], dtype=int)
        hit = np.flatnonzero(codes >= 0)
        human[hit, codes[hit]] = True
    out = QuestionArrays(
        labels, human.reshape(n, len(labels)), list(humans) if question.kind == "single" else []
    )
    for t in teachers:
        where = lay.scores.get((question.name, t))
        if where is not None:
            block = matrix[:, where]
            out.scores[t] = (block, ~np.isnan(block).any(axis=1))
    for name, source in systems.items():
        base = name[: -len("_scores")] if name.endswith("_scores") else None
        if base in teachers and base in out.scores:
            arrays = _from_scores(question, *out.scores[base])
        elif (question.name, name) in lay.calls:
            arrays = _from_slots(question, matrix[:, lay.calls[(question.name, name)]])
        elif name in out.scores:
            arrays = _from_scores(question, *out.scores[name])
        else:
            arrays = SystemArrays(
                "",
                np.zeros(n, dtype=bool),
                np.zeros((n, len(labels)), dtype=bool),
                np.full(n, -2) if question.kind == "single" else None,
            )
        arrays.source = source
        out.systems[name] = arrays
    return out


def label_counts(human: np.ndarray, calls: np.ndarray) -> dict[str, np.ndarray]:
    """tp, fp, fn, tn per label (columns) of two n x labels boolean matrices."""
    return {
        "tp": (human & calls).sum(0),
        "fp": (~human & calls).sum(0),
        "fn": (human & ~calls).sum(0),
        "tn": (~human & ~calls).sum(0),
    }


def human_codes(question: Question, humans: Sequence[Any] | np.ndarray) -> np.ndarray:
    """Each human label's index in the question's labels (-1 outside the schema)."""
    index = {lab: j for j, lab in enumerate(question.labels)}
    return np.array([index.get(x, -1) for x in humans], dtype=int)


def confusion(
    question: Question, humans: Sequence[Any] | np.ndarray, codes: np.ndarray
) -> tuple[np.ndarray, int, int, int]:
    """Confusion counts (rows human label, columns labels then no call), known n, correct,
    no calls; works whose human label or call is outside the schema are not counted.

    Args:
        question: a single-choice question.
        humans: the human label of each work, or their human_codes.
        codes: each work's call: label index, -1 no call, len(labels) a label outside.
    """
    k = len(question.labels) + 1
    if isinstance(humans, np.ndarray) and humans.dtype.kind == "i":
        h = humans  # already the labels' indexes (human_codes)
    else:
        h = human_codes(question, humans)
    p = np.where(codes == -1, k - 1, np.where(codes < k - 1, codes, -1)).astype(int)
    known = (h >= 0) & (p >= 0)
    matrix = np.bincount(h[known] * k + p[known], minlength=k * k).reshape(k, k)
    return matrix, int(known.sum()), int((h[known] == p[known]).sum()), int((codes == -1).sum())


def wilson_many(
    k: Sequence[int] | np.ndarray, n: Sequence[int] | np.ndarray, alpha: float = 0.05
) -> list[tuple[float | None, float | None]]:
    """intervals.wilson for many (k, n) at once: one statsmodels call instead of one each."""
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    out: list[tuple[float | None, float | None]] = [(None, None)] * len(n)
    has = np.flatnonzero(n > 0)
    if len(has):
        lo, hi = proportion_confint(k[has], n[has], alpha=alpha, method="wilson")
        for i, a, b in zip(has, np.atleast_1d(lo), np.atleast_1d(hi), strict=True):
            a, b = max(0.0, float(a)), min(1.0, float(b))
            out[i] = (finite_or_none(a), finite_or_none(b))
    return out
