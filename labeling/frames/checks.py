"""Rules for one frame record: type checks, consistency checks, and the columns it maps to."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from labeling.frames.limits import storage_errors
from labeling.numbers import is_finite_number, is_number
from labeling.schema import Question, Schema, get_path

EXPECTED_PREDICTION_STATUS = "machine_predicted_unvalidated"
# re.ASCII: without it \d also matches other scripts' digits ("W１０００００4").
_ID_RE = re.compile(r"(?:https?://openalex\.org/)?(W[0-9]+)", re.IGNORECASE | re.ASCII)
ID_RULE = "ASCII W followed by ASCII digits"

_STR_FIELDS = (
    "doi", "title", "lang", "type", "venue", "topic", "field",
    "ca_institutions", "funders", "keywords",
)  # fmt: skip
_INT_FIELDS = ("year", "cited_by")
_BOOL_FIELDS = ("is_retracted", "has_abstract")
_PRED_UNIT = ("teacher_disagreement_score", "threshold_uncertainty_score")
_PRED_STR = ("model_version", "prediction_status")
_MS_UNIT = ("score_opus", "score_gpt", "score_spread")
_MS_BOOL = ("provisional", "baseline", "maturity_gate_passed")
_MS_STR = ("validation_status", "note")
_NUMBER_TYPES = {float, int}


@dataclass
class Checked:
    """The outcome of checking one record: its id, errors (reject) and warnings (report)."""

    work_id: str | None
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    columns: dict[str, Any] | None = None  # the works row, when the record has no error


def normalize_work_id(value: Any) -> str | None:
    """`W123` from `W123` or `https://openalex.org/W123`; None when it is not a work id."""
    if not isinstance(value, str):
        return None
    m = _ID_RE.fullmatch(value.strip())
    return m.group(1).upper() if m else None


def _type_name(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def score_error(v: Any, where: str) -> str:
    """The message for a score that is a number but not one in [0, 1] (NaN and infinities too)."""
    if isinstance(v, float) and not math.isfinite(v):
        name = "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
        return f"{where}: score {name}: a number in [0, 1] expected"
    return f"{where}: score {v!r} outside [0, 1]"


def _check_unit(v: Any, where: str, errors: list[str]) -> None:
    if v is None:
        return
    if not is_number(v):
        errors.append(f"{where}: expected a number in [0, 1], got {_type_name(v)}")
    elif not math.isfinite(v) or not 0.0 <= v <= 1.0:
        errors.append(score_error(v, where))


def _check_vector(v: Any, n: int, where: str, errors: list[str]) -> bool:
    if v is None:
        return False
    if not isinstance(v, list):
        errors.append(f"{where}: expected a list of {n} scores, got {_type_name(v)}")
        return False
    if len(v) != n:
        errors.append(f"{where}: expected {n} scores (schema), got {len(v)}")
        return False
    # Fast path for the common case; NaN fails both comparisons, so it is caught too.
    if set(map(type, v)) <= _NUMBER_TYPES and 0.0 <= min(v) and max(v) <= 1.0:
        return True
    i, bad = next((i, x) for i, x in enumerate(v)
                  if not is_finite_number(x) or not 0.0 <= x <= 1.0)  # fmt: skip
    if is_number(bad):
        errors.append(score_error(bad, f"{where}[{i}]"))
    else:
        errors.append(f"{where}[{i}]: scores must be numbers in [0, 1], got {bad!r}")
    return False


def _check_question(rec: dict[str, Any], q: Question, c: Checked) -> None:
    errors, warnings = c.errors, c.warnings
    scores: dict[str, Any] = {}
    for teacher, path in q.scores.items():
        value = get_path(rec, path)
        if q.kind == "binary":
            before = len(errors)
            _check_unit(value, path, errors)
            if value is not None and len(errors) == before:
                scores[teacher] = value
        elif _check_vector(value, len(q.labels), path, errors):
            scores[teacher] = value
    calls: dict[str, Any] = {}
    for name, path in q.calls.items():
        value = get_path(rec, path)
        if value is None:
            continue
        if q.kind == "binary" and not isinstance(value, bool):
            errors.append(f"{path}: expected true/false, got {_type_name(value)}")
        elif q.kind == "single" and not isinstance(value, str):
            errors.append(f"{path}: expected a label name, got {_type_name(value)}")
        elif q.kind == "multi" and not (
            isinstance(value, list) and all(isinstance(x, str) for x in value)
        ):
            errors.append(f"{path}: expected a list of label names, got {_type_name(value)}")
        else:
            calls[name] = value
    if errors:
        return
    thr = q.threshold
    if q.kind == "single":
        for name, value in calls.items():
            if value not in q.labels:
                warnings.append(f"{q.name}: {name} call {value!r} is not a label of the schema")
        for teacher, vec in scores.items():
            call = calls.get(teacher)
            if call is None:
                continue
            top = vec.index(max(vec))
            if call != q.labels[top]:
                warnings.append(
                    f"{q.name}: {teacher}'s call {call!r} is not the arg-max of its own scores "
                    f"({q.labels[top]!r} {vec[top]:.3f})"
                )
        teacher_calls = [calls[t] for t in scores if calls.get(t) is not None]
        if calls.get("candidate") is not None and teacher_calls:
            if calls["candidate"] not in teacher_calls:
                warnings.append(f"{q.name}: candidate {calls['candidate']!r} is no teacher's call")
        if calls.get("consensus") is not None and teacher_calls:
            if any(tc != calls["consensus"] for tc in teacher_calls):
                warnings.append(
                    f"{q.name}: consensus {calls['consensus']!r} but the teachers' calls differ"
                )
    elif q.kind == "multi" and scores:
        above = [{q.labels[i] for i, s in enumerate(v) if s >= thr} for v in scores.values()]
        expected = {"candidate": set.union(*above), "consensus": set.intersection(*above)}
        for name, want in expected.items():
            got = calls.get(name)
            if got is not None and set(got) != want:
                warnings.append(
                    f"{q.name}: {name} {sorted(got)} does not match the scores at threshold "
                    f"{thr} ({sorted(want)})"
                )
    elif q.kind == "binary" and scores:
        hits = [s >= thr for s in scores.values()]
        for name, says in (("candidate", any(hits)), ("consensus", all(hits))):
            got = calls.get(name)
            if got is not None and got != says:
                warnings.append(
                    f"{q.name}: {name} is {got} but the scores at threshold {thr} say {says}"
                )


def check_record(rec: Any, schema: Schema) -> Checked:
    """Type-check a parsed record against the schema and list its inconsistencies."""
    if not isinstance(rec, dict):
        return Checked(None, [f"expected a JSON object, got {_type_name(rec)}"])
    if "id" not in rec:
        return Checked(None, ["missing id"])
    work_id = normalize_work_id(rec["id"])
    if work_id is None:
        return Checked(None, [f"id {rec['id']!r} is not an OpenAlex work id ({ID_RULE})"])
    c = Checked(work_id)
    errors = c.errors
    for key in _STR_FIELDS:
        v = rec.get(key)
        if v is not None and not isinstance(v, str):
            errors.append(f"{key}: expected a string, got {_type_name(v)}")
    for key in _INT_FIELDS:
        v = rec.get(key)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
            errors.append(f"{key}: expected an integer, got {_type_name(v)}")
    for key in _BOOL_FIELDS:
        v = rec.get(key)
        if v is not None and not isinstance(v, bool):
            errors.append(f"{key}: expected true/false, got {_type_name(v)}")
    routes = rec.get("routes")
    if routes is not None:
        if not isinstance(routes, dict):
            errors.append(f"routes: expected an object, got {_type_name(routes)}")
        else:
            for k, v in routes.items():
                if v is not None and not isinstance(v, bool):
                    errors.append(f"routes.{k}: expected true/false, got {_type_name(v)}")
    dl = rec.get("direct_labels")
    if dl is not None and not isinstance(dl, list):
        errors.append(f"direct_labels: expected a list, got {_type_name(dl)}")
    pred = rec.get("prediction")
    if pred is not None and not isinstance(pred, dict):
        errors.append(f"prediction: expected an object, got {_type_name(pred)}")
        pred = None
    ms = rec.get("machine_scores")
    if ms is not None and not isinstance(ms, dict):
        errors.append(f"machine_scores: expected an object, got {_type_name(ms)}")
        ms = None
    if pred:
        for key in _PRED_UNIT:
            _check_unit(pred.get(key), f"prediction.{key}", errors)
        for key in _PRED_STR:
            v = pred.get(key)
            if v is not None and not isinstance(v, str):
                errors.append(f"prediction.{key}: expected a string, got {_type_name(v)}")
    if ms:
        for key in _MS_UNIT:
            _check_unit(ms.get(key), f"machine_scores.{key}", errors)
        for key in _MS_BOOL:
            v = ms.get(key)
            if v is not None and not isinstance(v, bool):
                errors.append(f"machine_scores.{key}: expected true/false, got {_type_name(v)}")
        for key in _MS_STR:
            v = ms.get(key)
            if v is not None and not isinstance(v, str):
                errors.append(f"machine_scores.{key}: expected a string, got {_type_name(v)}")
    for q in schema.questions:
        _check_question(rec, q, c)
    if errors:
        return c
    columns = work_columns(rec, work_id)
    errors.extend(storage_errors(columns))
    if errors:
        return c
    c.columns = columns
    status = pred.get("prediction_status") if pred else None
    if status is not None and status != EXPECTED_PREDICTION_STATUS:
        c.warnings.append(f"prediction_status is {status!r}, not {EXPECTED_PREDICTION_STATUS!r}")
    if ms and all(is_number(ms.get(k)) for k in _MS_UNIT):
        if abs(abs(ms["score_opus"] - ms["score_gpt"]) - ms["score_spread"]) > 1e-6:
            c.warnings.append("machine_scores.score_spread is not |score_opus - score_gpt|")
    return c


def work_columns(rec: dict[str, Any], work_id: str) -> dict[str, Any]:
    """The indexed and bibliographic columns of the works table for a checked record."""
    pred = rec.get("prediction") or {}
    ms = rec.get("machine_scores") or {}
    opus, gpt = ms.get("score_opus"), ms.get("score_gpt")
    present = [s for s in (opus, gpt) if s is not None]
    return {
        "id": work_id,
        **{k: rec.get(k) for k in _STR_FIELDS + _INT_FIELDS + _BOOL_FIELDS},
        "routes": rec.get("routes"),
        "model_version": pred.get("model_version"),
        "prediction_status": pred.get("prediction_status"),
        "score_opus": opus,
        "score_gpt": gpt,
        "score_max": max(present) if present else None,
        "score_spread": ms.get("score_spread"),
        "teacher_disagreement": pred.get("teacher_disagreement_score"),
        "threshold_uncertainty": pred.get("threshold_uncertainty_score"),
    }


def split_record(rec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Split a record into its bibliographic part and its machine part (None if absent)."""
    bib = {k: v for k, v in rec.items() if k not in ("prediction", "machine_scores")}
    if "prediction" not in rec and "machine_scores" not in rec:
        return bib, None
    machine: dict[str, Any] = {k: rec[k] for k in ("prediction", "machine_scores") if k in rec}
    return bib, machine


def score_paths(schema: Schema) -> frozenset[str]:
    """The dotted paths of every score a record may hold (schema vectors and unit scores)."""
    paths = {path for q in schema.questions for path in q.scores.values()}
    paths |= {f"prediction.{k}" for k in _PRED_UNIT} | {f"machine_scores.{k}" for k in _MS_UNIT}
    return frozenset(paths)
