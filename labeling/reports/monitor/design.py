"""The Monitor's lines on the study design: labels still needed, and the anchoring arms."""

from __future__ import annotations

from typing import Any

import pandas as pd
from sqlalchemy import Engine

from labeling.errors import LabelingError
from labeling.reports.anchoring import anchoring_report
from labeling.reports.evaluation import Validated
from labeling.reports.planning import plan_for, plan_sentence
from labeling.review.assist import effective_rate
from labeling.review.campaigns import CampaignInfo
from labeling.schema import Schema

PLAN_HALF_WIDTH = 0.03  # the usual +-3 points of a prevalence
NO_ARMS = "No randomised arms here (no assist rate): anchoring cannot be measured."


def plan_line(
    engine: Engine,
    schema: Schema,
    campaign: CampaignInfo,
    validated: Validated,
    drawn: list[Any] | None = None,
) -> str:
    """'About N more labelled works (n_h per stratum) to reach +-0.03 on L', or why not
    (drawn: the campaign's drawn_items, when already read)."""
    if not campaign.is_probability_sample:
        return ""
    try:
        plan = plan_for(engine, schema, campaign, PLAN_HALF_WIDTH, validated=validated, drawn=drawn)
    except LabelingError as exc:
        return f"No sample-size plan: {exc}"
    return plan_sentence(plan)


def anchoring_rows(
    engine: Engine, schema: Schema, campaign: CampaignInfo
) -> tuple[pd.DataFrame, str]:
    """Agreement per arm, question and comparison (each teacher's call, the validated answer)."""
    if not 0 < effective_rate(campaign.blind, campaign.assist_rate) < 1:
        return pd.DataFrame(), NO_ARMS
    report = anchoring_report(engine, schema, campaign.id)
    rows = []
    for qname, q in report["questions"].items():
        against = [(f"{t}'s call", c) for t, c in q["teachers"].items()]
        for what, c in [*against, ("validated answer", q["validated"])]:
            rows.append({
                "question": qname, "agreement with": what,
                "shown": c["rate_shown"], "n shown": c["n_shown"],
                "hidden": c["rate_hidden"], "n hidden": c["n_hidden"],
                "difference": c["difference"], "lo": c["lo"], "hi": c["hi"],
                "p": c["p_value"], "copy rate": c["copy_rate"],
                "note": c["note"] or "",
            })  # fmt: skip
    arms = report["arms"]
    if not rows or arms["shown"] + arms["hidden"] == 0:
        return pd.DataFrame(), "No first answers in this campaign yet: no arm to compare."
    return pd.DataFrame(rows), ""
