"""The dawid-skene validation rule: posterior >= P with at least k labels, as an explicit step.

A Dawid-Skene posterior depends on every label of the campaign (each annotator's confusion
matrix is estimated from all their labels), so one submit cannot settle its work alone: under
this rule a submit leaves the work in review (validation.evaluate), and
`labeling aggregate --campaign C --validate` settles every labelled work of the campaign in
one transaction from the campaign's current labels:

- k or more labels on every question and the aggregated answer's posterior >= P on each
  (multi-label: each label's) -> validated, final answers = the aggregated answers,
  validated_via = "model:dawid-skene";
- k or more labels but a posterior below P -> disputed (for a lead to adjudicate);
- fewer than k labels -> in review.

Works validated any other way (adjudicated, gold, another campaign's rule) are left alone;
works this rule validated before are judged again, so a run always reflects the labels it
read. Every change is recorded as a StatusEvent, like adjudication's. The labels are read
just before the write transaction: a label submitted in between is judged on the next run.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Engine, select

from db.engine import write_session
from db.models import Work
from labeling.review.history import WorkState
from labeling.review.validation import (
    MODEL_RULE,
    MODEL_VIA,
    ValidationError,
    Verdict,
    _set_status,
    campaign_questions,
    rule_parts,
)
from labeling.schema import Schema
from labeling.vocabulary import ACT_MODEL, STATUS_DISPUTED, STATUS_IN_REVIEW, STATUS_VALIDATED

COUNTED = {
    STATUS_VALIDATED: "validated",
    STATUS_DISPUTED: "disputed",
    STATUS_IN_REVIEW: "in_review",
}
CHUNK = 2000  # work ids per locking query (SQLite's bound-parameter limit is far above)


def _chunks(ids: Sequence[str]) -> Iterator[Sequence[str]]:
    """The ids in slices of CHUNK."""
    for start in range(0, len(ids), CHUNK):
        yield ids[start : start + CHUNK]


def model_verdict(
    work: dict[str, Any], questions: Sequence[str], threshold: float, k: int
) -> Verdict:
    """What one work of the aggregate report amounts to under posterior >= P with k labels."""
    answered = [q for q in questions if q in work["posteriors"]]
    n = work["n_labels"] if len(answered) == len(questions) else 0
    if n < k:
        return Verdict(STATUS_IN_REVIEW, None, f"{n} of {k} labels ({MODEL_RULE})")
    low = [q for q in questions if (work["posteriors"][q] or 0.0) < threshold]
    if low:
        shown = ", ".join(f"{q} ({work['posteriors'][q]:.3f})" for q in low)
        return Verdict(
            STATUS_DISPUTED, None, f"{MODEL_RULE} posterior below {threshold:g} on {shown}"
        )
    least = min(work["posteriors"][q] for q in questions)
    return Verdict(
        STATUS_VALIDATED,
        {q: work["answers"][q] for q in questions},
        f"{n} labels, {MODEL_RULE} posterior >= {threshold:g} on every question "
        f"(lowest {least:.3f}; k={k})",
    )


def apply_model_rule(
    engine: Engine, schema: Schema, campaign: Any, report: dict[str, Any]
) -> dict[str, Any]:
    """Settle a dawid-skene campaign's labelled works from its aggregate report (one transaction).

    Args:
        engine: the database.
        schema: the label schema.
        campaign: the CampaignInfo (its rule must be dawid-skene).
        report: labeling.stats.aggregation.aggregate of the campaign's labels, dawid-skene.

    Returns:
        {rule, posterior, k, works, validated, disputed, in_review (counts of the verdicts),
        changed (works whose status or answers changed), left_alone (validated otherwise)}.
    """
    name, threshold = rule_parts(campaign.rule)
    if name != MODEL_RULE or threshold is None:
        raise ValidationError(
            f"campaign '{campaign.name}' has the rule {campaign.rule}: "
            f"--validate applies to campaigns created with --rule {MODEL_RULE}"
        )
    if report.get("method") != MODEL_RULE:
        raise ValidationError(f"the rule needs the {MODEL_RULE} aggregation")
    questions = [q.name for q in campaign_questions(campaign, schema)]
    works = {w["work_id"]: w for w in report["works"]}
    ids = sorted(works)
    out = {
        "rule": campaign.rule,
        "posterior": threshold,
        "k": campaign.overlap,
        "works": len(ids),
        "validated": 0,
        "disputed": 0,
        "in_review": 0,
        "changed": 0,
        "left_alone": 0,
    }
    with write_session(engine) as session:
        conn = session.connection()
        current = {}
        for chunk in _chunks(ids):
            query = (
                select(Work.id, Work.status, Work.validated_via, Work.final_answers, Work.is_gold)
                .where(Work.id.in_(chunk))
                .order_by(Work.id)
                .with_for_update()
            )
            current.update({row.id: row for row in conn.execute(query)})
        for wid in ids:
            row = current.get(wid)
            if row is None:  # a label on a work since deleted from the frame: nothing to set
                continue
            if row.status == STATUS_VALIDATED and row.validated_via != MODEL_VIA:
                out["left_alone"] += 1
                continue
            verdict = model_verdict(works[wid], questions, threshold, campaign.overlap)
            out[COUNTED[verdict.status]] += 1
            via = MODEL_VIA if verdict.status == STATUS_VALIDATED else None
            if (row.status, row.final_answers, row.validated_via) == (
                verdict.status,
                verdict.final_answers,
                via,
            ):
                continue
            out["changed"] += 1
            _set_status(
                session,
                wid,
                WorkState.of(row),
                verdict,
                via=via,
                campaign_id=campaign.id,
                user_id=None,
                act=ACT_MODEL,
                always_event=True,
            )
    return out
