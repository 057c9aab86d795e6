"""Typed text on its way to a query: what no database can hold never becomes a query."""

from __future__ import annotations

from typing import Any


def storable(text: Any) -> bool:
    """Whether a value is text every engine can store and compare (PostgreSQL refuses NUL)."""
    return isinstance(text, str) and "\x00" not in text


def shown(text: str) -> str:
    """Text for a message: NUL and other control characters written as escapes."""
    return "".join(c if c.isprintable() or c in " \t" else repr(c)[1:-1] for c in text)


def row_id(value: Any) -> int | None:
    """A typed value as a database row id (ASCII digits within a 64-bit integer), else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if 0 < value < 2**63 else None
    text = str(value)
    if not (text.isascii() and text.isdigit()) or len(text) > 19:
        return None
    number = int(text)
    return number if 0 < number < 2**63 else None
