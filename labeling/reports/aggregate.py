"""The aggregate report of one campaign: its current labels through majority or Dawid-Skene."""

from __future__ import annotations

from typing import Any

import pandas as pd
from sqlalchemy import Engine

from labeling.reports.agreement import answers_long
from labeling.review.campaigns import get_campaign
from labeling.review.validation import campaign_questions
from labeling.schema import Schema
from labeling.stats.aggregation import aggregate
from labeling.stats.overlap import MIN_SHARED_WORKS, answer_counts, shared_works, too_few_for_model


def aggregate_for(
    engine: Engine,
    schema: Schema,
    campaign: str | int,
    method: str = "dawid-skene",
    *,
    labels: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """The campaign's aggregated answers and annotator accuracies (stats.aggregation).

    Labels are read as `labeling agreement` reads them: each annotator's current version,
    skips left out, this campaign's only, on the questions the campaign asks. Dawid-Skene
    needs the Monitor's minimum of shared works (labeling.stats.overlap): below it the report
    has no model numbers, only the works with the counts of the answers given and a `note`.

    Args:
        engine: the database.
        schema: the label schema.
        campaign: a campaign name or id (CampaignError when unknown).
        method: "dawid-skene" or "majority".
        labels: the campaign's long_answers when already read.
    """
    info = get_campaign(engine, campaign)
    questions = campaign_questions(info, schema)
    long = answers_long(engine, info.id, [q.name for q in questions]) if labels is None else labels
    head = {"campaign": info.name, "rule": info.rule, "overlap": info.overlap}
    if method == "dawid-skene":  # majority needs no overlap: each work's vote stands alone
        shared = shared_works(long)
        note = too_few_for_model(shared)
        if note is not None:
            return {**head, **_too_few(long, questions, method, shared, note)}
    return {**head, **aggregate(long, questions, method)}


def _too_few(
    long: pd.DataFrame, questions: list[Any], method: str, shared: int, note: str
) -> dict[str, Any]:
    """The report without a model: the works, each with how often each answer was given."""
    works = answer_counts(long, questions)
    return {
        "method": method,
        "n_works": len(works),
        "n_labels": sum(w["n_labels"] for w in works),
        "shared_works": shared,
        "min_shared_works": MIN_SHARED_WORKS,
        "note": note,
        "works": works,
    }
