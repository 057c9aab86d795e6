"""UI helpers shared by the app shell and the pages: Markdown escaping of untrusted text."""

from __future__ import annotations

import re
from typing import Any

# Every character that can start Markdown (or HTML) syntax in Streamlit's renderer.
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~$:&\"'=^@%])")


def escape_markdown(text: Any) -> str:
    """Text that Markdown renders literally: punctuation escaped, newlines kept as spaces."""
    s = "" if text is None else str(text)
    s = s.replace("\r", " ").replace("\n", " ")
    return _MD_SPECIAL.sub(r"\\\1", s)
