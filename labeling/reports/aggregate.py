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
    skips left out, this campaign's only, on the questions the campaign asks.

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
    report = aggregate(long, questions, method)
    return {"campaign": info.name, "rule": info.rule, "overlap": info.overlap, **report}
