"""Numbers from records and statistics: real, finite, or None (JSON has no NaN)."""

from __future__ import annotations

import math
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
