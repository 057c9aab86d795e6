"""Links of a work card: the DOI and the OpenAlex page, from whatever the record holds."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

_WORK_ID = re.compile(r"^(?:https?://openalex\.org/)?(W\d+)$", re.IGNORECASE | re.ASCII)
_DOI_PREFIX = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|doi:)", re.IGNORECASE)


def _text(value: Any) -> str | None:
    return None if value is None else (str(value).strip() or None)


def doi_link(doi: Any) -> tuple[str | None, str | None]:
    """The bare DOI and its https://doi.org/ link (percent-encoded), or (None, None)."""
    bare = _text(doi)
    if not bare:
        return None, None
    bare = _DOI_PREFIX.sub("", bare)
    return bare, "https://doi.org/" + quote(bare, safe="/;:@-._~")


def openalex_link(work_id: Any) -> str | None:
    """https://openalex.org/W... for a valid work id, else None."""
    m = _WORK_ID.match(str(work_id or "").strip())
    return f"https://openalex.org/{m.group(1).upper()}" if m else None
