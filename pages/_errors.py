"""The pages' one mapping from an error to what the page says: a level and a message.

The level follows the error's category (labeling/errors.py): a Conflict (contention, work
taken over) is a warning, worth trying again; every other error, and anything that is not a
LabelingError (a ValueError from a form field), is an error. The message is the exception's
own text, after an optional prefix ("Not created: ").
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from labeling.errors import Conflict, LabelingError, category

LEVELS: dict[type[LabelingError], str] = {Conflict: "warning"}


def error_level(exc: BaseException) -> str:
    """ "warning" or "error": how a page shows `exc`."""
    kind = category(exc)
    return LEVELS.get(kind, "error") if kind is not None else "error"


def error_text(exc: BaseException, prefix: str = "") -> str:
    """The message a page shows for `exc`: `prefix` then the exception's own words."""
    return f"{prefix}{exc}"


def error_flash(exc: BaseException, prefix: str = "") -> tuple[str, str]:
    """(level, message) for a page that shows `exc` on its next run (a flash message)."""
    return error_level(exc), error_text(exc, prefix)


def show_error(
    exc: BaseException, prefix: str = "", *, escape: Callable[[str], str] | None = None
) -> None:
    """Show `exc` now, as st.error or st.warning; `escape` the text if it is Markdown."""
    text = error_text(exc, prefix)
    getattr(st, error_level(exc))(escape(text) if escape else text)
