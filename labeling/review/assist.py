"""Randomised assist arms: whether a (work, annotator) assignment is shown the teachers' scores.

A campaign with an assist rate R (0 < R < 1) shows the scores before submit to a share R of
its assignments and hides them from the rest, so that `labeling anchoring` can compare the
two arms: a randomised experiment on the annotators' anchoring. The draw is a pure function of
the campaign's seed, the work and the annotator (a keyed hash, uniform on [0, 1)): the same
assignment always gets the same arm, in any process and after any reload, without storing a
draw per assignment; each label records the arm it was given (`labels.scores_visible`).
R = 0 is the blind mode, R = 1 today's default.
"""

from __future__ import annotations

import hashlib


def effective_rate(blind: bool, assist_rate: float | None) -> float:
    """The share of assignments shown the scores: the assist rate, else 0 (blind) or 1."""
    if assist_rate is not None:
        return float(assist_rate)
    return 0.0 if blind else 1.0


def check_rate(assist_rate: float | None, blind: bool) -> None:
    """ValueError unless the assist rate is None or strictly between 0 and 1, without blind."""
    if assist_rate is None:
        return
    if isinstance(assist_rate, bool) or not 0.0 < float(assist_rate) < 1.0:
        raise ValueError(
            f"the assist rate must be strictly between 0 and 1, not {assist_rate!r} "
            "(0 is --blind, 1 the default)"
        )
    if blind:
        raise ValueError("a blind campaign shows no scores: give either --blind or an assist rate")


def draw(seed: int, campaign_id: int, work_id: str, user_id: int) -> float:
    """The assignment's uniform draw on [0, 1), a hash of the seed, campaign, work and user."""
    key = f"{seed}:{campaign_id}:{work_id}:{user_id}".encode()
    digest = hashlib.blake2b(key, digest_size=8, person=b"assist-arm").digest()
    return int.from_bytes(digest, "big") / 2**64


def scores_shown(
    rate: float, seed: int, campaign_id: int, work_id: str | None, user_id: int
) -> bool:
    """Whether this assignment sees the teachers' scores before it submits."""
    if rate >= 1.0:
        return True
    if rate <= 0.0 or work_id is None:
        return False
    return draw(seed, campaign_id, work_id, user_id) < rate
