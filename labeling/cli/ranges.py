"""The ranges of the numbers the commands take, checked by click before any database sees them.

A value out of range exits 2 with one line naming the option and the range (cli/errors.py),
on SQLite and PostgreSQL alike: counts and limits that reach an Integer column (or a LIMIT)
stay within 32 bits, seeds within what NumPy and the campaigns table accept, rates within
their documented intervals and never NaN.
"""

from __future__ import annotations

import math
from typing import Any

import click

from labeling.numbers import INT32_MAX, INT32_MIN, SEED_MAX

MAX_PROCESSES = 256  # worker processes; far above any machine this runs on
MAX_BOOTSTRAP = 100_000  # bootstrap replicates: beyond this a report takes hours
MAX_LEASE_MINUTES = 60 * 24 * 365  # a year; lease_seconds is an Integer column


class FiniteFloatRange(click.FloatRange):
    """click.FloatRange that also refuses NaN and infinities (NaN passes every comparison)."""

    name = "float range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The float, checked against the range; `nan`, `inf` are refused."""
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


def count_range(low: int = 1, high: int = INT32_MAX) -> click.IntRange:
    """A whole number of things, low..high (default 1 up to a 32-bit column's maximum)."""
    return click.IntRange(low, high)


SEED = click.IntRange(0, SEED_MAX)
ROW_ID = click.IntRange(INT32_MIN, INT32_MAX)  # an id column: out of range is never a row
PROCESSES = click.IntRange(1, MAX_PROCESSES)
