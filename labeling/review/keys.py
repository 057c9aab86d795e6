"""Keys of the label form: each question's jump key and each option's key."""

from __future__ import annotations

from collections.abc import Sequence

from labeling.review.labels import SKIP_REASONS
from labeling.schema import Question

ACTION_KEYS = {
    "submit": "Enter",
    "flag": "F",
    "back": "B",
    "resume": "N",
    "codebook": "D",
    "abstract": "A",
    "prev": "ArrowUp",
    "next": "ArrowDown",
    "conf_1": "L",
    "conf_2": "M",
    "conf_3": "H",
    **{f"skip_{r}": f"Alt+{i}" for i, r in enumerate(SKIP_REASONS, start=1)},
}

_TAKEN = {k.upper() for k in ACTION_KEYS.values()} | {"C", "R"}


def question_keys(questions: Sequence[Question]) -> list[str | None]:
    """Each question's jump key: its schema `key` if it is a free single letter, else None."""
    keys: list[str | None] = []
    used = set(_TAKEN)
    for q in questions:
        key = (q.key or "").strip().upper()
        ok = len(key) == 1 and key.isalpha() and key.isascii() and key not in used
        keys.append(key if ok else None)
        used.add(key)
    return keys


def option_key(index: int) -> str | None:
    """Key of the index-th option (0-based): 1..9, 0, then Shift+1..Shift+0; None beyond 20."""
    if index < 0 or index >= 20:
        return None
    digit = str((index + 1) % 10)
    return digit if index < 10 else f"Shift+{digit}"
