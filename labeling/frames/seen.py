"""The work ids a frame import has met so far, to reject an id repeated within the file.

A million ids as Python strings in a set take about 94 MB; a work id is `W` and digits, so
almost all of them are kept as 8-byte integers instead: the recent ones in a small set,
merged every MERGE ids into one sorted numpy array (about 8 MB for a million).
"""

from __future__ import annotations

import numpy as np

MERGE = 1 << 16
_MAX_DIGITS = 18  # every number of 18 digits fits in an int64


def _key(work_id: str) -> int | None:
    """The id's number when the id is `W` and 1-18 ASCII digits without a leading zero."""
    digits = work_id[1:]
    if (
        work_id[:1] == "W"
        and 0 < len(digits) <= _MAX_DIGITS
        and digits.isascii()
        and digits.isdigit()
        and (digits[0] != "0" or len(digits) == 1)
    ):
        return int(digits)
    return None


class SeenIds:
    """A set of work ids that only grows (see the module docstring)."""

    def __init__(self) -> None:
        self._sorted = np.empty(0, dtype=np.int64)
        self._recent: set[int] = set()
        self._other: set[str] = set()  # ids that are not W and digits as above

    def add(self, work_id: str) -> bool:
        """Add an id; False if it was there already."""
        key = _key(work_id)
        if key is None:
            if work_id in self._other:
                return False
            self._other.add(work_id)
            return True
        if key in self._recent:
            return False
        merged = self._sorted
        if merged.size:
            at = int(merged.searchsorted(key))
            if at < merged.size and int(merged[at]) == key:
                return False
        self._recent.add(key)
        if len(self._recent) >= MERGE:
            recent = np.fromiter(self._recent, dtype=np.int64, count=len(self._recent))
            self._sorted = np.union1d(merged, recent)
            self._recent = set()
        return True

    def __contains__(self, work_id: str) -> bool:
        key = _key(work_id)
        if key is None:
            return work_id in self._other
        if key in self._recent:
            return True
        at = int(self._sorted.searchsorted(key))
        return at < self._sorted.size and int(self._sorted[at]) == key
