"""Small factories for storage tests: works inserted directly, users, valid answers."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Engine, insert

from db.engine import write_session
from db.models import User, Work, utcnow
from labeling.schema import Schema
from labeling.vocabulary import STATUS_UNVALIDATED


def work_row(
    work_id: str,
    *,
    score_opus: float | None = 0.5,
    score_gpt: float | None = 0.5,
    score_max: float | None = None,
    score_spread: float | None = None,
    teacher_disagreement: float | None = 0.0,
    threshold_uncertainty: float | None = 0.0,
    status: str = STATUS_UNVALIDATED,
    is_gold: bool = False,
    field: str | None = None,
    year: int | None = None,
    routes: dict[str, bool] | None = None,
) -> dict[str, Any]:
    """Column values of one works row; score_max and score_spread derive from the heads."""
    if score_max is None and score_opus is not None and score_gpt is not None:
        score_max = max(score_opus, score_gpt)
    if score_spread is None and score_opus is not None and score_gpt is not None:
        score_spread = abs(score_opus - score_gpt)
    now = utcnow()
    return {
        "id": work_id,
        "title": f"Title of {work_id}",
        "year": year,
        "field": field,
        "routes": routes,
        "record": {"id": work_id},
        "status": status,
        "is_gold": is_gold,
        "record_hash": hashlib.sha256(work_id.encode()).hexdigest(),
        "score_opus": score_opus,
        "score_gpt": score_gpt,
        "score_max": score_max,
        "score_spread": score_spread,
        "teacher_disagreement": teacher_disagreement,
        "threshold_uncertainty": threshold_uncertainty,
        "model_version": "test-model",
        "imported_at": now,
        "updated_at": now,
    }


def insert_works(engine: Engine, rows: Iterable[dict[str, Any]]) -> list[str]:
    """Insert works rows (see work_row) in one transaction; returns their ids."""
    rows = list(rows)
    with write_session(engine) as session:
        session.execute(insert(Work), rows)
    return [r["id"] for r in rows]


def add_works(engine: Engine, n: int, *, prefix: str = "W", **kwargs: Any) -> list[str]:
    """N works W0001.. with score_max descending from 0.99 by id (W0001 highest)."""
    rows = []
    for i in range(1, n + 1):
        score = round(1.0 - i / (n + 1), 6)
        rows.append(work_row(f"{prefix}{i:04d}", score_opus=score, score_gpt=score / 2, **kwargs))
    return insert_works(engine, rows)


def add_user(engine: Engine, name: str, role: str = "annotator") -> int:
    """Create a user and return its id."""
    with write_session(engine) as session:
        user = User(name=name, role=role, active=True, failed_logins=0, created_at=utcnow())
        session.add(user)
        session.flush()
        return user.id


def answers_for(schema: Schema, variant: int = 0) -> dict[str, Any]:
    """A complete valid answers dict; different variants give different answers."""
    out: dict[str, Any] = {}
    for q in schema.questions:
        if q.kind == "multi":
            out[q.name] = [q.labels[variant % len(q.labels)]]
        elif q.kind == "binary":
            out[q.name] = "yes" if variant % 2 == 0 else "no"
        else:
            out[q.name] = q.labels[variant % len(q.labels)]
    return out


def label_next(
    engine: Engine,
    schema: Schema,
    campaign: str,
    name: str,
    answers: dict[str, Any],
    **fields: Any,
) -> str:
    """`name` claims their next work of a campaign and submits `answers` (plus any other
    submit_label fields); returns the work id."""
    from labeling.auth.users import get_user
    from labeling.review.campaigns import get_campaign
    from labeling.review.labels import LabelSubmission, submit_label
    from labeling.review.queue import claim_next

    cid = get_campaign(engine, campaign).id
    uid = get_user(engine, name).id
    claim = claim_next(engine, cid, uid)
    assert claim is not None, f"{name} got no work from {campaign}"
    values = {"schema_hash": schema.hash, "scores_visible": True, "model_version": "m",
              "time_on_item_ms": 1000, "submission_id": f"{name}-{cid}-{claim.work_id}",
              **fields}  # fmt: skip
    submit_label(engine, LabelSubmission(
        campaign_id=cid, work_id=claim.work_id, user_id=uid, answers=answers, **values,
    ), schema=schema)  # fmt: skip
    return claim.work_id
