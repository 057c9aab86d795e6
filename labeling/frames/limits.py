"""What the works table can store: each column's limits, read from the models, as checks.

SQLite stores a 300-character DOI in a String(255) column without a word; PostgreSQL refuses
it (and any text holding NUL, and integers beyond the column's range) half-way through an
import. Checking each value against the column it goes to rejects such a line the same way
on both engines, before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import BigInteger, Integer, SmallInteger, String

from db.models import Work

# Where a works column's value comes from in a frame record, when not from the same key.
COLUMN_SOURCES = {
    "model_version": "prediction.model_version",
    "prediction_status": "prediction.prediction_status",
    "score_opus": "machine_scores.score_opus",
    "score_gpt": "machine_scores.score_gpt",
    "score_spread": "machine_scores.score_spread",
    "teacher_disagreement": "prediction.teacher_disagreement_score",
    "threshold_uncertainty": "prediction.threshold_uncertainty_score",
}


@dataclass(frozen=True)
class ColumnRule:
    """What one column accepts: text up to `length` characters, or integers in a range."""

    text: bool
    length: int | None = None
    low: int | None = None
    high: int | None = None


def _integer_bits(column_type: Any) -> int:
    if isinstance(column_type, BigInteger):
        return 64
    return 16 if isinstance(column_type, SmallInteger) else 32


@cache
def column_rules() -> dict[str, ColumnRule]:
    """The rule of every text and integer column of the works table, from db/models.py."""
    rules: dict[str, ColumnRule] = {}
    for column in Work.__table__.columns:
        kind = column.type
        if isinstance(kind, String):  # Text is a String without a length
            rules[column.name] = ColumnRule(True, length=kind.length)
        elif isinstance(kind, Integer):
            bits = _integer_bits(kind)
            rules[column.name] = ColumnRule(False, low=-(2 ** (bits - 1)), high=2 ** (bits - 1) - 1)
    return rules


def value_error(name: str, value: Any, rule: ColumnRule) -> str | None:
    """Why a column value cannot be stored (None when it can); named by its record path."""
    where = COLUMN_SOURCES.get(name, name)
    if rule.text and isinstance(value, str):
        if rule.length is not None and len(value) > rule.length:
            return f"{where}: {len(value)} characters, at most {rule.length}"
        if "\x00" in value:  # PostgreSQL text cannot hold NUL; SQLite would store it
            return f"{where}: contains a NUL character (\\u0000), which cannot be stored"
    elif not rule.text and isinstance(value, int) and not isinstance(value, bool):
        assert rule.low is not None and rule.high is not None
        if not rule.low <= value <= rule.high:
            return f"{where}: {value} is outside the storable range [{rule.low}, {rule.high}]"
    return None


@cache
def _checks() -> tuple[tuple[tuple[str, int | None], ...], tuple[tuple[str, int, int], ...]]:
    """The works columns to check, split by kind, for the per-record fast path."""
    texts, ints = [], []
    for name, rule in column_rules().items():
        if rule.text:
            texts.append((name, rule.length))
        else:
            assert rule.low is not None and rule.high is not None
            ints.append((name, rule.low, rule.high))
    return tuple(texts), tuple(ints)


def storage_errors(columns: dict[str, Any]) -> list[str]:
    """Every value of a works row that its column cannot store, as messages."""
    texts, ints = _checks()
    errors = []
    for name, length in texts:
        value = columns.get(name)
        # Fast path: most values fit and hold no NUL; value_error words the rest.
        if type(value) is str and ((length is not None and len(value) > length)
                                   or "\x00" in value):  # fmt: skip
            errors.append(value_error(name, value, column_rules()[name]) or "")
    for name, low, high in ints:
        value = columns.get(name)
        if type(value) is int and not low <= value <= high:
            errors.append(value_error(name, value, column_rules()[name]) or "")
    return errors
