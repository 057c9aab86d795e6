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
from labeling.review.campaigns import get_campaign
from labeling.schema import Schema
from labeling.stats.agreement import MIN_PAIR_N, agreement_report, question_specs

_ABSENT = object()  # a question the answers do not hold


def long_answers(
    rows: Sequence[tuple[str, str, dict[str, Any]]], questions: Sequence[str]
) -> pd.DataFrame:
    """(work id, annotator, answers) rows, in order, as the agreement report's long table.

    Built question by question: the report reads each question's rows in this same order, so
    the same rows give the same report (bootstrap draws included).
    """
    # numpy object arrays, never pandas strings: pandas would convert each column to Arrow
    works = np.array([r[0] for r in rows], dtype=object)
    annotators = np.array([r[1] for r in rows], dtype=object)
    cols: dict[str, list[Any]] = {"work_id": [], "annotator": [], "question": [], "value": []}
    for q in questions:
        values = [r[2].get(q, _ABSENT) for r in rows]
        has = np.fromiter((v is not _ABSENT for v in values), dtype=bool, count=len(values))
        cols["work_id"].append(works[has])
        cols["annotator"].append(annotators[has])
        cols["question"].append(np.full(int(has.sum()), q, dtype=object))
        # a Series of objects keeps each list as one element (numpy would broadcast them)
        cols["value"].append(pd.Series(values, dtype=object).to_numpy()[has])
    return pd.DataFrame(
        {
            k: pd.Series(np.concatenate(v) if v else np.zeros(0, dtype=object), dtype=object)
            for k, v in cols.items()
        }
    )


def coded_long_answers(
    works: np.ndarray | pd.Categorical,
    annotators: np.ndarray | pd.Categorical,
    codes: np.ndarray,
    answers: Sequence[dict[str, Any]],
    questions: Sequence[str],
) -> pd.DataFrame:
    """long_answers of rows given as codes into distinct answers: the same rows, built with
    array indexing (each distinct answer is looked at once per question, not each row), the
    work and annotator columns as categoricals.

    Args:
        works, annotators: each row's work id and annotator (object arrays), in order, or
            as categoricals with sorted categories and no missing value (used as they are).
        codes: each row's index into answers.
        answers: the distinct answers (dicts).
        questions: the questions, in order.
    """
    cols: dict[str, list[Any]] = {"question": [], "value": []}
    taken = []
    for q in questions:
        values = pd.Series([a.get(q, _ABSENT) for a in answers], dtype=object).to_numpy()
        has = np.fromiter((v is not _ABSENT for v in values), dtype=bool, count=len(values))
        rows = np.flatnonzero(has[codes]) if len(codes) else np.zeros(0, dtype=np.int64)
        taken.append(rows)
        cols["question"].append(np.full(len(rows), q, dtype=object))
        cols["value"].append(values[codes[rows]])
    rows = np.concatenate(taken) if taken else np.zeros(0, dtype=np.int64)
    out = {
        k: pd.Series(np.concatenate(v) if v else np.zeros(0, dtype=object), dtype=object)
        for k, v in cols.items()
    }
    # Work and annotator as categoricals (sorted categories), coded once on the rows: every
    # report factorizes them again, and a categorical factorizes from its codes.
    for name, column in (("work_id", works), ("annotator", annotators)):
        if isinstance(column, pd.Categorical):  # already coded, categories sorted: reuse
            out[name] = pd.Series(
                pd.Categorical.from_codes(column.codes[rows], categories=column.categories)
            )
            continue
        codes_of, uniques = pd.factorize(np.asarray(column, dtype=object))
        order = np.argsort(np.asarray(uniques, dtype=object), kind="stable")
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        out[name] = pd.Series(
            pd.Categorical.from_codes(rank[codes_of][rows], categories=uniques[order])
        )
    return pd.DataFrame({k: out[k] for k in ("work_id", "annotator", "question", "value")})


def answers_long(engine: Engine, campaign_id: int | None, questions: Sequence[str]) -> pd.DataFrame:
    """Each annotator's current answers (skips left out) as long_answers, ordered by campaign,
    work and annotator (multi-label values as lists)."""
    newer = aliased(Label)
    query = (
        select(Label.campaign_id, Label.work_id, User.name, Label.answers)
        .join(User, User.id == Label.user_id)
        .where(
            Label.skipped.is_(False),
            ~exists(
                select(literal_column("1")).where(
                    newer.campaign_id == Label.campaign_id,
                    newer.work_id == Label.work_id,
                    newer.user_id == Label.user_id,
                    newer.version > Label.version,
                )
            ),
        )
    )
    if campaign_id is not None:
        query = query.where(Label.campaign_id == campaign_id)
    with read_session(engine) as session:
        rows = list(session.connection().execute(query).all())
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
        answers_long(engine, campaign_id, [q.name for q in questions])
        if labels is None
        else labels,
        question_specs(questions),
        n_boot=n_boot,
        seed=seed,
        min_pair_n=min_pair_n,
    )
    report["campaign"] = campaign
    return report
