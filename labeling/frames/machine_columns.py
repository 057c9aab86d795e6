"""The machine side of a gold-set row: each teacher's call, candidate, consensus and scores.

`machine_plan` says how each machine column is read from a frame record. The frame importer
stores, for every work, the columns that are not numbers (`works.machine`: a JSON array in
plan order, with `works.machine_hash`, the hash of the schema parts the plan depends on); the
numbers are already columns of the works table (SCORE_FROM_WORK). An export then reads a few
hundred bytes per work, most of them repeated across works, instead of parsing the 3 KB
record again. A stored value whose hash differs from the schema in use (the schema changed
since import) is recomputed from the record.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from labeling.schema import Question, Schema

ANSWER_KIND = {"multi": "list", "single": "str", "binary": "str"}


def as_list(value: Any) -> list[str] | None:
    """A call as a list of labels (None stays None)."""
    if value is None:
        return None
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    return [str(value)]


def as_text(value: Any) -> str | None:
    """A call or text as a string; booleans become yes/no like the human answers."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict | list):
        return orjson.dumps(value).decode()
    return str(value)


def _as_float(value: Any) -> float | None:
    """A finite or infinite number as float, else None."""
    kind = type(value)
    if kind is float:
        return value
    return float(value) if kind is int else None


def _as_bool(value: Any) -> bool | None:
    """A flag as bool, else None."""
    return value if isinstance(value, bool) else None


def _thresholded(q: Question) -> Callable[[Any], Any]:
    """A teacher's call from its scores: labels at or above the threshold, or yes/no."""

    labels, threshold, multi = q.labels, q.threshold, q.kind == "multi"

    def call(scores: Any) -> Any:
        """The call made from one score vector (multi) or score (binary)."""
        if multi and type(scores) is list and len(scores) == len(labels):
            try:
                return [lab for lab, v in zip(labels, scores, strict=True) if v >= threshold]
            except TypeError:  # a non-number among the scores
                return None
        if not multi and _as_float(scores) is not None:
            return "yes" if scores >= threshold else "no"
        return None

    return call


SCORE_COLUMNS = [
    ("score_opus", "float"), ("score_gpt", "float"), ("score_spread", "float"),
    ("scores_provisional", "bool"), ("scores_baseline", "bool"),
    ("scores_maturity_gate_passed", "bool"), ("validation_status", "str"), ("scores_note", "str"),
    ("prediction_status", "str"), ("teacher_disagreement_score", "float"),
    ("threshold_uncertainty_score", "float"),
]  # fmt: skip
_SCORE_FIELDS = [
    ("score_opus", "machine_scores.score_opus", _as_float),
    ("score_gpt", "machine_scores.score_gpt", _as_float),
    ("score_spread", "machine_scores.score_spread", _as_float),
    ("scores_provisional", "machine_scores.provisional", _as_bool),
    ("scores_baseline", "machine_scores.baseline", _as_bool),
    ("scores_maturity_gate_passed", "machine_scores.maturity_gate_passed", _as_bool),
    # Verbatim: the frame's text as it is (a non-string is kept as its text).
    ("validation_status", "machine_scores.validation_status", as_text),
    ("scores_note", "machine_scores.note", as_text),
    ("prediction_status", "prediction.prediction_status", as_text),
    ("teacher_disagreement_score", "prediction.teacher_disagreement_score", _as_float),
    ("threshold_uncertainty_score", "prediction.threshold_uncertainty_score", _as_float),
]


# Machine columns that are numbers and already stored as works columns at import.
SCORE_FROM_WORK = {
    "score_opus": "score_opus", "score_gpt": "score_gpt", "score_spread": "score_spread",
    "teacher_disagreement_score": "teacher_disagreement",
    "threshold_uncertainty_score": "threshold_uncertainty",
}  # fmt: skip


def call_columns(schema: Schema, questions: Sequence[Question]) -> list[tuple[str, str]]:
    """(name, kind) of each teacher's, the candidate's and the consensus' call columns."""
    return [(f"machine_{q.name}_{who}", ANSWER_KIND[q.kind])
            for q in questions for who in (*schema.teachers, "candidate", "consensus")]  # fmt: skip


@dataclass(frozen=True)
class MachinePlan:
    """The record paths the machine columns read, and how each column is made from them."""

    paths: list[str]
    steps: list[tuple[str, int, Callable[[Any], Any]]]
    _parts: list[tuple[str, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Split the paths once (the importer calls columns() for every record)."""
        object.__setattr__(self, "_parts", [tuple(p.split(".")) for p in self.paths])

    def columns(self, record: Any) -> dict[str, Any]:
        """The machine columns of one record-shaped dict."""
        values: list[Any] = []
        for parts in self._parts:  # get_path, inlined: this runs ~30 times per record
            node = record
            for part in parts:
                node = node.get(part) if type(node) is dict else None
            values.append(node)
        values.append(None)
        return {col: fn(values[i]) for col, i, fn in self.steps}

    @property
    def stored(self) -> list[str]:
        """The columns works.machine holds, in order (the rest are works columns)."""
        return [col for col, _, _ in self.steps if col not in SCORE_FROM_WORK]


def machine_plan(schema: Schema, questions: Sequence[Question] | None = None) -> MachinePlan:
    """How to read the machine columns from a record (every question by default).

    Each teacher's call comes from its call path, else from its scores thresholded at the
    question's threshold (multi and binary); candidate and consensus from their paths; the
    machine scores, validation status (verbatim) and prediction status from the record.
    """
    paths: list[str] = []
    steps: list[tuple[str, int, Callable[[Any], Any]]] = []

    def at(path: str) -> int:
        """The index of a path in the plan (added on first use)."""
        if path not in paths:
            paths.append(path)
        return paths.index(path)

    conv = {"multi": as_list, "single": as_text, "binary": as_text}
    for q in schema.questions if questions is None else questions:
        for who in (*schema.teachers, "candidate", "consensus"):
            col = f"machine_{q.name}_{who}"
            if who in q.calls:
                steps.append((col, at(q.calls[who]), conv[q.kind]))
            elif who in q.scores and q.kind in ("multi", "binary"):
                steps.append((col, at(q.scores[who]), _thresholded(q)))
            else:
                steps.append((col, -1, as_text))
    steps += [(col, at(path), fn) for col, path, fn in _SCORE_FIELDS]
    return MachinePlan(paths, steps)


def machine_hash(schema: Schema) -> str:
    """A short hash of what the stored machine columns depend on in a schema.

    Teachers, and per question its name, kind, labels, threshold and the score and call
    paths: editing prompts or codebook text does not make stored values stale.
    """
    parts: list[list[Any]] = [list(schema.teachers)]
    parts += [[q.name, q.kind, list(q.labels), q.threshold, sorted(q.scores.items()),
               sorted(q.calls.items())] for q in schema.questions]  # fmt: skip
    return hashlib.sha256(orjson.dumps(parts)).hexdigest()[:16]


def machine_digest(plan: MachinePlan, record: Any) -> str:
    """The stored machine columns of a record: the JSON array kept in works.machine."""
    columns = plan.columns(record)
    return orjson.dumps([columns[c] for c in plan.stored]).decode()
