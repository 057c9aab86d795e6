"""Numbers from records and statistics: real, finite, or None (JSON has no NaN)."""

from __future__ import annotations

import math
from numbers import Integral
from typing import Any


def is_number(value: Any) -> bool:
    """A real number: an int or a float (NumPy floats too), never a bool; NaN included."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_finite_number(value: Any) -> bool:
    """A real number (not a bool) that is neither NaN nor infinite."""
    return is_number(value) and math.isfinite(value)


def finite_or_none(value: Any) -> float | None:
    """Return ``value`` as a Python float, or None when it is None, NaN or infinite."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


# What a number a person types may be, checked before it reaches the database (the CLI's
# options in labeling/cli/ranges.py, the campaign filter in labeling/review/filters.py):
# PostgreSQL refuses what does not fit a column, SQLite silently stores it.
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1  # an Integer column (db/models.py) on PostgreSQL
# Seeds: NumPy's generators refuse negative ones, and a campaign keeps its seed in an Integer
# column (campaigns.assist_seed).
SEED_MAX = INT32_MAX


def whole_in(value: Any, low: int, high: int) -> bool:
    """Whether `value` is a whole number (a NumPy int too, never a bool) in low..high."""
    return isinstance(value, Integral) and not isinstance(value, bool) and low <= int(value) <= high


def finite_float(value: Any) -> float | None:
    """`value` as a finite float, or None when it is no real number, NaN, or too large."""
    if not is_number(value):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int beyond the largest double (JSON has no such limit)
        return None
    return number if math.isfinite(number) else None
