"""Reports for leads built from the database: agreement per campaign (or overall)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine, exists, literal_column, select
from sqlalchemy.orm import aliased

from db.engine import read_session
from db.models import Label, User
from labeling.agreement import MIN_PAIR_N, agreement_report, question_specs
from labeling.campaigns import get_campaign
from labeling.schema import Schema

_ABSENT = "\x00absent"  # a question the answers do not hold (no label can be this text)


def long_answers(rows: Sequence[tuple[str, str, dict[str, Any]]],
                 questions: Sequence[str]) -> pd.DataFrame:
    """(work id, annotator, answers) rows, in order, as the agreement report's long table.

    Built question by question: the report reads each question's rows in this same order, so
    the same rows give the same report (bootstrap draws included).
    """
    works = pd.Series([r[0] for r in rows], dtype=object)
    annotators = pd.Series([r[1] for r in rows], dtype=object)
    parts = []
    for q in questions:
        values = pd.Series([r[2].get(q, _ABSENT) for r in rows], dtype=object)
        has = (values != _ABSENT).to_numpy(dtype=bool) if len(values) else np.zeros(0, bool)
        parts.append(pd.DataFrame({
            "work_id": works[has].to_numpy(), "annotator": annotators[has].to_numpy(),
            "question": np.full(int(has.sum()), q, dtype=object),
            "value": values[has].to_numpy()}))
    if not parts:
        return pd.DataFrame({c: pd.Series([], dtype=object)
                             for c in ("work_id", "annotator", "question", "value")})
    out = pd.concat(parts, ignore_index=True)
    return out.astype(object)


def answers_long(engine: Engine, campaign_id: int | None,
                 questions: Sequence[str]) -> pd.DataFrame:
    """Each annotator's current answers (skips left out) as long_answers, ordered by campaign,
    work and annotator (multi-label values as lists)."""
    newer = aliased(Label)
    query = (
        select(Label.campaign_id, Label.work_id, User.name, Label.answers)
        .join(User, User.id == Label.user_id)
        .where(Label.skipped.is_(False), ~exists(select(literal_column("1")).where(
            newer.campaign_id == Label.campaign_id, newer.work_id == Label.work_id,
            newer.user_id == Label.user_id, newer.version > Label.version)))
    )
    if campaign_id is not None:
        query = query.where(Label.campaign_id == campaign_id)
    with read_session(engine) as session:
        rows = session.connection().execute(query).all()
    # Sorted here, not by the database, so that every engine's collation gives one order.
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    return long_answers([(w, a, ans) for _, w, a, ans in rows], questions)


def agreement_for(
    engine: Engine,
    schema: Schema,
    campaign: str | int | None = None,
    *,
    n_boot: int = 200,
    seed: int = 0,
    min_pair_n: int = MIN_PAIR_N,
    labels: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """The agreement report of one campaign's labels (or of every label when None).

    Args:
        engine: the database.
        schema: the label schema (question kinds and label lists).
        campaign: a campaign name or id; None pools every campaign.
        n_boot: bootstrap replicates for the confidence intervals.
        seed: bootstrap seed (same seed, same intervals).
        min_pair_n: common works a pair of annotators needs for Cohen's kappa (>= 2); pairs
            that share fewer are listed in the report's pairs_left_out.
        labels: the campaign's long_answers when already read (the Monitor has them).
    """
    questions = list(schema.questions)
    campaign_id = None
    if campaign is not None:
        info = get_campaign(engine, campaign)
        campaign_id = info.id
        if info.questions:
            questions = [q for q in questions if q.name in info.questions]
    report = agreement_report(
        answers_long(engine, campaign_id, [q.name for q in questions]) if labels is None
        else labels,
        question_specs(questions),
        n_boot=n_boot,
        seed=seed,
        min_pair_n=min_pair_n,
    )
    report["campaign"] = campaign
    return report
