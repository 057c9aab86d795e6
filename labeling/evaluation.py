"""Database glue for the lead's numbers: humans vs machines, and frame estimates.

Loads validated works (and, for estimates, a probability-sample campaign's design and items)
and calls the pure functions of ``labeling.machines`` and ``labeling.estimates``. The output is
JSON-safe. For frame estimates, sampled works that are not validated yet (unlabelled, in
review, disputed, skipped) are treated as missing at random within their stratum: the weights
become N_h / (validated works of stratum h). The report shows the response per stratum so a
lead can judge that assumption (disputed works are rarely missing at random).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine, select

from db.engine import read_session
from db.models import STATUS_VALIDATED, CampaignItem, Work
from labeling.campaigns import CampaignInfo, get_campaign
from labeling.estimates import estimability, precision_recall, stratified_prevalence
from labeling.machines import (
    compare,
    human_value,
    is_missing,
    positive,
    system_call,
    systems,
)
from labeling.schema import Question, Schema
from labeling.validation import campaign_questions

ALL = "all"
MISSING_AT_RANDOM = (
    "sampled works not validated yet are assumed missing at random within their stratum"
)


def _campaign(engine: Engine, campaign: str | int | CampaignInfo) -> CampaignInfo:
    """The CampaignInfo for a name, id or CampaignInfo."""
    return campaign if isinstance(campaign, CampaignInfo) else get_campaign(engine, campaign)


def load_validated(
    engine: Engine, campaign_id: int | None = None
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(final answers, frame record) of every validated work, or of one campaign's.

    Args:
        engine: the database.
        campaign_id: only works queued in this campaign (None = every validated work).
    """
    query = select(Work.final_answers, Work.record).where(Work.status == STATUS_VALIDATED)
    if campaign_id is not None:
        query = query.join(CampaignItem, CampaignItem.work_id == Work.id).where(
            CampaignItem.campaign_id == campaign_id
        )
    with read_session(engine) as session:
        rows = session.execute(query.order_by(Work.id)).all()
    return [(dict(r.final_answers or {}), dict(r.record or {})) for r in rows]


def machine_report(
    engine: Engine, schema: Schema, campaign: str | int | CampaignInfo | None = None
) -> dict[str, Any]:
    """Every machine call and score against the validated human answers.

    Args:
        engine: the database.
        schema: the label schema.
        campaign: restrict to the works of this campaign (name, id or CampaignInfo) and its
            questions; None = every validated work, every question.
    """
    info = _campaign(engine, campaign) if campaign is not None else None
    works = load_validated(engine, info.id if info else None)
    questions = [q.name for q in campaign_questions(info, schema)] if info else None
    report = compare(schema, works, questions)
    report["campaign"] = info.name if info else None
    return report


def _population(info: CampaignInfo) -> tuple[dict[str, int], dict[str, int]]:
    """N_h and sampled n_h per stratum from the campaign's recorded design."""
    design = info.sample or {}
    if design.get("strata"):
        rows = design["strata"]
        return ({r["stratum"]: int(r["N_h"]) for r in rows},
                {r["stratum"]: int(r["n_h"]) for r in rows})
    return {ALL: int(design.get("N", 0))}, {ALL: int(design.get("n", 0))}


def _sample(engine: Engine, campaign_id: int) -> list[Any]:
    """The drawn items of a campaign (gold and added items have no inclusion probability)."""
    query = (
        select(CampaignItem.work_id, CampaignItem.stratum, Work.status, Work.final_answers,
               Work.record)
        .join(Work, Work.id == CampaignItem.work_id)
        .where(CampaignItem.campaign_id == campaign_id, CampaignItem.inclusion_prob.is_not(None))
        .order_by(CampaignItem.position)
    )
    with read_session(engine) as session:
        return list(session.execute(query).all())


def _question_estimates(
    question: Question,
    units: Sequence[tuple[str, Any, dict[str, Any]]],
    population: dict[str, int],
    teachers: Sequence[str],
) -> dict[str, Any]:
    """Prevalence per label and each system's frame precision/recall for one question."""
    strata = [s for s, _, _ in units]
    labels = ["yes"] if question.kind == "binary" else list(question.labels)
    names = systems(question, teachers)
    calls = {
        name: [system_call(question, rec, name, teachers) for _, _, rec in units]
        for name in names
    }
    out: dict[str, Any] = {"n": len(units), "labels": {}}
    for lab in labels:
        y = [int(positive(question, h, lab)) for _, h, _ in units]
        prev = stratified_prevalence(y, strata, population)
        entry: dict[str, Any] = {**prev.as_dict(), "systems": {}}
        for name, source in names.items():
            keep = [i for i, c in enumerate(calls[name]) if not is_missing(c)]
            r = [int(calls[name][i] is not None and positive(question, calls[name][i], lab))
                 for i in keep]
            pr = precision_recall([y[i] for i in keep], r, [strata[i] for i in keep], population)
            entry["systems"][name] = {"source": source, "n": len(keep),
                                      **{k: v.as_dict() for k, v in pr.items()}}
        out["labels"][lab] = entry
    return out


def frame_estimates(
    engine: Engine, schema: Schema, campaign: str | int | CampaignInfo
) -> dict[str, Any]:
    """Design-based prevalence of every label in the frame, and each system's precision/recall.

    Args:
        engine: the database.
        schema: the label schema.
        campaign: a probability-sample campaign (name, id or CampaignInfo); any other
            campaign gets a plain refusal (estimable False and the reason).
    """
    info = _campaign(engine, campaign)
    head: dict[str, Any] = {"campaign": info.name, "campaign_id": info.id,
                            "strategy": info.strategy}
    verdict = estimability(info.is_probability_sample, info.strategy)
    if not verdict.estimable:
        return {**head, "estimable": False, "reason": verdict.reason, "questions": {}}
    population, sampled = _population(info)
    rows = _sample(engine, info.id)
    validated = [r for r in rows if r.status == STATUS_VALIDATED and r.final_answers]
    per_stratum = {
        s: {"stratum": s, "N": population[s], "sampled": sampled.get(s, 0), "validated": 0}
        for s in population
    }
    for r in validated:
        per_stratum[r.stratum or ALL]["validated"] += 1
    questions: dict[str, Any] = {}
    for q in campaign_questions(info, schema):
        units = []
        for r in validated:
            human = human_value(q, r.final_answers.get(q.name))
            if human is not None:
                units.append((r.stratum or ALL, human, dict(r.record or {})))
        questions[q.name] = _question_estimates(q, units, population, schema.teachers)
    return {
        **head, "estimable": True, "reason": None, "design": info.sample,
        "population": sum(population.values()), "n_sampled": len(rows),
        "n_validated": len(validated), "strata": list(per_stratum.values()),
        "assumption": MISSING_AT_RANDOM, "questions": questions,
    }
