"""The demo database with labels from two annotators: agreements, disputes, a labelled sample."""

from __future__ import annotations

import zlib
from typing import Any

from sqlalchemy import Engine

from labeling.schema import Schema

ANNOTATORS = ("annotator", "annotator2")
# Works both annotators label in each demo campaign (k=2: the same works, one after the other).
MODEL_CAMPAIGN = "demo-model"
LABELLED = {"demo-top": 24, "demo-sample": 40, MODEL_CAMPAIGN: 12}
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
        campaign_id=cid,
        work_id=claim.work_id,
        user_id=uid,
        answers=answers(schema, claim.work_id, differ),
        schema_hash=schema.hash,
        scores_visible=True,
        model_version="m",
        time_on_item_ms=4000 + 100 * n,
        submission_id=f"{name}-{cid}-{claim.work_id}",
    )
    submit_label(engine, submission, schema=schema)


def add_labels(engine: Engine, schema: Schema) -> str:
    """Both annotators label the first works of demo-top, demo-sample and demo-model (a
    dawid-skene campaign, added when missing), and the lead settles demo-top's first
    dispute; returns the id of the work the lead settled."""
    from labeling.review.campaigns import get_campaign

    add_model_campaign(engine)
    users = {name: _user_id(engine, name) for name in ANNOTATORS}
    for campaign, n_works in LABELLED.items():
        cid = get_campaign(engine, campaign).id
        for n in range(n_works):
            for name in ANNOTATORS:
                _label(engine, schema, cid, users[name], name, n)
    return _settle_one_dispute(engine, schema)


def add_model_campaign(engine: Engine) -> None:
    """demo-model: the top of the frame by spread, k=2, settled by `aggregate --validate`."""
    from labeling.review.campaigns import create_campaign, find_campaign

    if find_campaign(engine, MODEL_CAMPAIGN) is not None:
        return
    create_campaign(
        engine, name=MODEL_CAMPAIGN, strategy="score_spread", overlap=2, rule="dawid-skene"
    )


def _settle_one_dispute(engine: Engine, schema: Schema) -> str:
    """The lead adjudicates demo-top's first disputed work with the first annotator's answers."""
    from sqlalchemy import select

    from db.engine import read_session
    from db.models import CampaignItem, Work
    from labeling.review.campaigns import get_campaign
    from labeling.review.validation import adjudicate

    cid = get_campaign(engine, "demo-top").id
    with read_session(engine) as session:
        work_id = (
            session.execute(
                select(Work.id)
                .join(CampaignItem, CampaignItem.work_id == Work.id)
                .where(CampaignItem.campaign_id == cid, Work.status == "human_disputed")
                .order_by(Work.id)
            )
            .scalars()
            .first()
        )
    assert work_id is not None, "demo-top has no dispute to settle"
    lead = _user_id(engine, "lead")
    adjudicate(
        engine,
        work_id,
        answers(schema, work_id, False),
        "checked the full text",
        lead,
        cid,
        schema=schema,
    )
    return work_id


def _user_id(engine: Engine, name: str) -> int:
    """The id of a demo user."""
    from labeling.auth.users import get_user

    user = get_user(engine, name)
    assert user is not None, f"the demo has no user {name!r}"
    return user.id
