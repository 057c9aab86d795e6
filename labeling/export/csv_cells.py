"""Spreadsheet-safe CSV cells: the export's formula neutralisation and its exact inverse.

The rule (one, for every CSV the tool writes and import-labels reads): a text cell that
starts with = + - @ tab or CR, possibly after apostrophes, gets one more apostrophe in
front ("=1+1" -> "'=1+1", "'=x" -> "''=x"); no other cell changes. A spreadsheet shows
the cell as text, never runs it. Reading a CSV back, a cell that starts with an apostrophe
followed by such a cell loses exactly that one apostrophe, so every text survives the round
trip unchanged ("'already quoted" and "'" are written and read as they are).
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_FORMULA_FIRST = pa.array(FORMULA_START, pa.string())
# A cell the export prefixes: apostrophes (maybe none), then a formula start.
_RISKY = re.compile("'*[=+\\-@\t\r]")
_PREFIXED_RE2 = "^'+[=+\\-@\t\r]"  # the cells whose first character is the only question


def neutralise(text: str) -> str:
    """A CSV cell a spreadsheet would run as a formula, prefixed with an apostrophe."""
    return "'" + text if _RISKY.match(text) else text


def unneutralise(text: str) -> str:
    """The text a neutralised CSV cell was made from (neutralise's exact inverse)."""
    return text[1:] if text.startswith("'") and _RISKY.match(text, 1) else text


def neutralised(column: pa.Array) -> pa.Array:
    """A text column with neutralise applied to every cell (nulls stay null)."""
    first = pc.utf8_slice_codeunits(column, 0, 1)
    risky = pc.fill_null(pc.is_in(first, value_set=_FORMULA_FIRST), False)
    quoted = pc.fill_null(pc.equal(first, "'"), False)
    if pc.any(quoted).as_py():  # rare: only then is a regular expression worth running
        prefixed = pc.fill_null(pc.match_substring_regex(column, _PREFIXED_RE2), False)
        risky = pc.or_(risky, prefixed)
    if not pc.any(risky).as_py():
        return column
    return pc.if_else(risky, pc.binary_join_element_wise("'", column, ""), column)
