"""Campaign filters: which works of the frame a campaign draws from, checked and as SQL."""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import false, func

from db.models import Work
from labeling.errors import CampaignError
from labeling.numbers import INT32_MAX, INT32_MIN, finite_float, whole_in
from labeling.vocabulary import STATUSES

SCORE_STRATEGIES = (
    "score_opus",
    "score_gpt",
    "score_max",
    "score_spread",
    "teacher_disagreement",
    "threshold_uncertainty",
)
FILTER_KEYS = ("status", "field", "year_min", "year_max", "routes", *SCORE_STRATEGIES)


def _number(value: Any, what: str) -> float | None:
    """A filter bound as a float (None stays None); CampaignError when not a finite number."""
    if value is None:
        return None
    number = finite_float(value)
    if number is None:  # NaN, 1e999 (JSON's infinity) or an int no double holds
        raise CampaignError(f"filter '{what}': {_short(value)} is not a number (a finite one)")
    return number


def _short(value: Any) -> str:
    """A value for a message, its middle cut when long (a 5000-digit number)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:18]}...{text[-18:]}"


def validate_filter(filter: dict[str, Any] | None) -> dict[str, Any]:
    """Check a campaign filter and return a normalised copy ({} when None).

    Args:
        filter: keys status (list), field (list), year_min, year_max, routes
            ({route: bool}) and score ranges ({"score_max": [lo, hi]}, either end None).
    """
    if filter is None:
        return {}
    if not isinstance(filter, dict):
        raise CampaignError("the filter must be a mapping")
    out: dict[str, Any] = {}
    for key, value in filter.items():
        if key not in FILTER_KEYS:
            raise CampaignError(
                f"unknown filter key '{key}': expected one of {', '.join(FILTER_KEYS)}"
            )
        if key in ("status", "field"):
            values = [value] if isinstance(value, str) else value
            if not isinstance(values, list | tuple) or not all(isinstance(v, str) for v in values):
                raise CampaignError(f"filter '{key}' must be a list of strings")
            if key == "status":
                bad = [v for v in values if v not in STATUSES]
                if bad:
                    raise CampaignError(f"filter 'status': unknown statuses {', '.join(bad)}")
            out[key] = list(values)
        elif key in ("year_min", "year_max"):
            if isinstance(value, bool) or not isinstance(value, int):
                raise CampaignError(f"filter '{key}' must be a whole year, not {_short(value)}")
            # works.year is an Integer column: PostgreSQL refuses a bound beyond it.
            if not whole_in(value, INT32_MIN, INT32_MAX):
                raise CampaignError(
                    f"filter '{key}': {_short(value)} is not a year (between {INT32_MIN} and "
                    f"{INT32_MAX})"
                )
            out[key] = value
        elif key == "routes":
            if not isinstance(value, dict) or not all(
                isinstance(k, str) and k.isidentifier() and isinstance(v, bool)
                for k, v in value.items()
            ):
                raise CampaignError("filter 'routes' must map route names to true/false")
            out[key] = dict(value)
        else:
            if not isinstance(value, list | tuple) or len(value) != 2:
                raise CampaignError(f"filter '{key}' must be a range [low, high]")
            lo, hi = _number(value[0], key), _number(value[1], key)
            if lo is not None and hi is not None and lo > hi:
                raise CampaignError(f"filter '{key}': low {lo} is above high {hi}")
            out[key] = [lo, hi]
    if out.get("year_min", -math.inf) > out.get("year_max", math.inf):
        raise CampaignError("filter: year_min is after year_max")
    return out


def filter_clauses(filter: dict[str, Any]) -> list[Any]:
    """SQL conditions on the works table for a validated filter."""
    clauses: list[Any] = []
    if "status" in filter:
        clauses.append(Work.status.in_(filter["status"]))
    if "field" in filter:
        clauses.append(Work.field.in_(filter["field"]))
    if "year_min" in filter:
        clauses.append(Work.year >= filter["year_min"])
    if "year_max" in filter:
        clauses.append(Work.year <= filter["year_max"])
    for route, wanted in filter.get("routes", {}).items():
        clauses.append(func.coalesce(Work.routes[route].as_boolean(), false()) == wanted)
    for col in SCORE_STRATEGIES:
        if col in filter:
            lo, hi = filter[col]
            column = getattr(Work, col)
            clauses.append(column.is_not(None))
            if lo is not None:
                clauses.append(column >= lo)
            if hi is not None:
                clauses.append(column <= hi)
    return clauses
