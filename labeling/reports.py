"""Reports for leads built from the database: agreement per campaign (or overall)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

from labeling.agreement import MIN_PAIR_N, agreement_report, question_specs
from labeling.campaigns import get_campaign
from labeling.labels import current_labels
from labeling.schema import Schema


def agreement_for(
    engine: Engine,
    schema: Schema,
    campaign: str | int | None = None,
    *,
    n_boot: int = 200,
    seed: int = 0,
    min_pair_n: int = MIN_PAIR_N,
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
    """
    questions = list(schema.questions)
    campaign_id = None
    if campaign is not None:
        info = get_campaign(engine, campaign)
        campaign_id = info.id
        if info.questions:
            questions = [q for q in questions if q.name in info.questions]
    labels = current_labels(engine, campaign_id)
    if not labels.empty:
        multi = {q.name for q in questions if q.kind == "multi"}
        labels = labels[labels["question"].isin({q.name for q in questions})].copy()
        # current_labels joins multi-label answers with ";"; agreement wants label lists.
        labels["value"] = [
            [x for x in str(v).split(";") if x] if q in multi else v
            for q, v in zip(labels["question"], labels["value"], strict=True)
        ]
    report = agreement_report(
        labels[["work_id", "annotator", "question", "value"]] if not labels.empty else labels,
        question_specs(questions),
        n_boot=n_boot,
        seed=seed,
        min_pair_n=min_pair_n,
    )
    report["campaign"] = campaign
    return report
