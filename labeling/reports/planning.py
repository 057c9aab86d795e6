"""Database glue for the sample-size planner: a campaign's strata and counts, then the plan.

The counts are those `labeling estimates` uses (the drawn items of a probability-sample
campaign, validated works only, missing at random within their stratum), so the plan is
about the interval that command will report. The planner itself is labeling.stats.planning.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import Engine

from labeling.errors import InputError
from labeling.reports.evaluation import (
    ALL,
    Validated,
    design_population,
    drawn_items,
    validated_works,
)
from labeling.review.campaigns import CampaignInfo, get_campaign
from labeling.review.validation import campaign_questions
from labeling.schema import Schema
from labeling.stats.estimates import estimability
from labeling.stats.machine_arrays import encode, layout
from labeling.stats.machines import systems
from labeling.stats.planning import MEASURES, Measure, StratumCounts, plan_sample


class PlanError(InputError):
    """A plan that cannot be made: not a sample, an unknown label, teacher or measure."""


def plan_for(
    engine: Engine,
    schema: Schema,
    campaign: str | int | CampaignInfo,
    half_width: float,
    *,
    label: str | None = None,
    measure: str = "prevalence",
    teacher: str | None = None,
    alpha: float = 0.05,
    validated: Validated | None = None,
    drawn: list[Any] | None = None,
) -> dict[str, Any]:
    """How many more validated works the campaign needs for +-half_width, per label.

    Args:
        engine: the database.
        schema: the label schema.
        campaign: a probability-sample campaign (name, id or CampaignInfo).
        half_width: the target half-width of the 95% interval.
        label: one label ("label" or "question:label"); None = every label of every question.
        measure: "prevalence", or a teacher's "precision" or "recall" for the label.
        teacher: the system whose precision or recall is planned (a teacher, candidate,
            consensus...), required unless measure is prevalence.
        alpha: 1 - confidence level.
        validated: validated_works of the same campaign, when already read (the Monitor).
        drawn: drawn_items of the campaign, when already read (the Monitor).

    Returns:
        {"campaign", "measure", "teacher", "half_width", "plans": [...], "largest"}: one
        plan per label (question, label, more, per stratum: now, more, available in the drawn
        sample), and the label needing the most works.
    """
    kind: Measure | None = next((m for m in MEASURES if m == measure), None)
    if kind is None:
        raise PlanError(f"measure must be one of {', '.join(MEASURES)}, not {measure!r}")
    if measure != "prevalence" and not teacher:
        raise PlanError(f"planning a {measure} needs --teacher (whose {measure})")
    if not 0 < half_width <= 0.5:
        raise PlanError(f"the half-width must be in (0, 0.5], not {half_width!r}")
    info = campaign if isinstance(campaign, CampaignInfo) else get_campaign(engine, campaign)
    verdict = estimability(info.is_probability_sample, info.strategy)
    if not verdict.estimable:
        raise PlanError(f"campaign {info.name!r}: {verdict.reason}")
    population, sampled = design_population(info)
    rows = drawn if drawn is not None else drawn_items(engine, info.id)
    v = validated or validated_works(engine, schema, info.id)
    where = v.position()
    chosen = [(r[1] or ALL, where[r[0]]) for r in rows if r[0] in where and v.finals[where[r[0]]]]
    wanted = _wanted(campaign_questions(info, schema), label)
    plans: list[dict[str, Any]] = []
    for q, labels in wanted:
        every = v.humans(q)  # human_value of each final answer, computed once per question
        humans = [every[i] for _, i in chosen]
        keep = [k for k, h in enumerate(humans) if h is not None]
        strata = np.array([chosen[k][0] for k in keep], dtype=object)
        matrix = v.matrix[[chosen[k][1] for k in keep]]
        names = systems(q, schema.teachers)
        if teacher is not None and measure != "prevalence" and teacher not in names:
            raise PlanError(
                f"question {q.name!r} has no system {teacher!r} (it has: {', '.join(names)})"
            )
        arrays = encode(q, [humans[k] for k in keep], matrix, layout(schema), names,
                        schema.teachers)  # fmt: skip
        for j, lab in enumerate(arrays.labels):
            if labels is not None and lab not in labels:
                continue
            y = arrays.human[:, j].astype(bool)
            if measure == "prevalence":
                units, a, b = strata, y, np.ones_like(y)
            else:
                sa = arrays.systems[teacher or ""]
                present = sa.present
                r = sa.calls[present, j].astype(bool)
                units, yy = strata[present], y[present]
                a, b = yy & r, (r if measure == "precision" else yy)
            counts = [
                StratumCounts(
                    stratum=str(s),
                    N=int(N_h),
                    n=int((units == s).sum()),
                    m=int(b[units == s].sum()),
                    c=int(a[units == s].sum()),
                )  # fmt: skip
                for s, N_h in population.items()
            ]
            plan = plan_sample(counts, half_width, kind, alpha)
            entry = {"question": q.name, "label": lab, **plan.as_dict()}
            for row in entry["strata"]:
                left = sampled.get(row["stratum"], 0) - row["n"]
                row["available"] = max(left, 0)
            entry["beyond_sample"] = sum(
                max(r["more"] - r["available"], 0) for r in entry["strata"]
            )
            plans.append(entry)
    if not plans:
        raise PlanError(f"no label {label!r} among the campaign's questions")
    largest = max(plans, key=lambda p: p["more"])
    return {
        "campaign": info.name,
        "measure": measure,
        "teacher": teacher,
        "half_width": half_width,
        "plans": plans,
        "largest": {"question": largest["question"], "label": largest["label"],
                    "more": largest["more"]},
    }  # fmt: skip


def _wanted(questions: list[Any], label: str | None) -> list[tuple[Any, set[str] | None]]:
    """(question, labels to plan or None for all) for a label spec ("L" or "Q:L")."""
    if label is None:
        return [(q, None) for q in questions]
    qname, _, lab = label.rpartition(":")
    out: list[tuple[Any, set[str] | None]] = []
    for q in questions:
        names = ["yes"] if q.kind == "binary" else list(q.labels)
        if (not qname or q.name == qname) and lab in names:
            out.append((q, {lab}))
    if not out:
        raise PlanError(f"no label {label!r} among the campaign's questions")
    if len(out) > 1:
        found = ", ".join(f"{q.name}:{lab}" for q, _ in out)
        raise PlanError(f"label {lab!r} is in several questions: say which ({found})")
    return out


def plan_sentence(plan: dict[str, Any]) -> str:
    """One line for a lead: about N more labelled works (n_h per stratum) to reach +-h on L."""
    top = next(p for p in plan["plans"] if (p["question"], p["label"]) ==
               (plan["largest"]["question"], plan["largest"]["label"]))  # fmt: skip
    what = f"{top['question']}:{top['label']}"
    if plan["measure"] != "prevalence":
        what = f"{plan['teacher']}'s {plan['measure']} on {what}"
    h = plan["half_width"]
    if top["more"] == 0:
        now = top["half_width_now"]
        return f"+-{h:g} on {what} is reached already (+-{now:.3f} now)."
    per = ", ".join(f"{r['stratum']}: {r['more']}" for r in top["strata"] if r["more"])
    beyond = top.get("beyond_sample", 0)
    extra = f"; {beyond} of them beyond the drawn sample" if beyond else ""
    return f"About {top['more']} more labelled works ({per}) to reach +-{h:g} on {what}{extra}."
