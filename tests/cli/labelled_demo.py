"""The demo database with labels from two annotators: agreements, disputes, a labelled sample."""

from __future__ import annotations

import zlib
from typing import Any

from sqlalchemy import Engine

from labeling.schema import Schema

ANNOTATORS = ("annotator", "annotator2")
# Works both annotators label in each demo campaign (k=2: the same works, one after the other).
LABELLED = {"demo-top": 24, "demo-sample": 40}
# One work in this many gets a second opinion that differs (a dispute under the unanimous rule).
DISAGREE_EVERY = 4


def _pick(work_id: str, salt: str, n: int) -> int:
    """A stable choice in 0..n-1 for a work (crc32: the same on every run and machine)."""
    return zlib.crc32(f"{work_id}:{salt}".encode()) % n


def answers(schema: Schema, work_id: str, differ: bool) -> dict[str, Any]:
    """Plausible answers for a work, mixed across labels; `differ` shifts every answer by one."""
    shift = 1 if differ else 0
    out: dict[str, Any] = {}
    for q in schema.questions:
        i = (_pick(work_id, q.name, len(q.labels)) + shift) % len(q.labels)
        if q.kind == "multi":
            j = (i + 1 + _pick(work_id, "second", len(q.labels) - 1)) % len(q.labels)
            out[q.name] = sorted({q.labels[i], q.labels[j]} if i % 3 == 0 else {q.labels[i]})
        else:
            out[q.name] = q.labels[i]
    return out


def _label(engine: Engine, schema: Schema, cid: int, uid: int, name: str, n: int) -> None:
    """`name` claims the campaign's next work and answers it (differing on every 4th work)."""
    from labeling.review.labels import LabelSubmission, submit_label
    from labeling.review.queue import claim_next

    claim = claim_next(engine, cid, uid)
    assert claim is not None, f"{name} got no work from campaign {cid}"
    differ = name == ANNOTATORS[1] and n % DISAGREE_EVERY == DISAGREE_EVERY - 1
    submission = LabelSubmission(
        campaign_id=cid, work_id=claim.work_id, user_id=uid,
        answers=answers(schema, claim.work_id, differ), schema_hash=schema.hash,
        scores_visible=True, model_version="m", time_on_item_ms=4000 + 100 * n,
        submission_id=f"{name}-{cid}-{claim.work_id}",
    )  # fmt: skip
    submit_label(engine, submission, schema=schema)


def add_labels(engine: Engine, schema: Schema) -> None:
    """Both annotators label the first works of demo-top and demo-sample."""
    from labeling.auth.users import get_user
    from labeling.review.campaigns import get_campaign

    users = {name: get_user(engine, name).id for name in ANNOTATORS}
    for campaign, n_works in LABELLED.items():
        cid = get_campaign(engine, campaign).id
        for n in range(n_works):
            for name in ANNOTATORS:
                _label(engine, schema, cid, users[name], name, n)
