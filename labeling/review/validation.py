"""Validation rules: when labels make a work validated ground truth; adjudication and reopen."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, insert, select
from sqlalchemy.orm import Session

from db.engine import write_session
from db.models import Adjudication, Campaign, Label, StatusEvent, User, Work, utcnow
from labeling.errors import InputError
from labeling.inputs import shown, storable
from labeling.review.status_sql import _ANSWERS, _LOCK_WORK, _SET_STATUS
from labeling.schema import BINARY_LABELS, Question, Schema
from labeling.vocabulary import (
    STATUS_DISPUTED,
    STATUS_IN_REVIEW,
    STATUS_UNVALIDATED,
    STATUS_VALIDATED,
)

RULES = ("unanimous", "majority", "dawid-skene")
MODEL_RULE = "dawid-skene"  # stored as "dawid-skene:p=0.95"; settled by `aggregate --validate`
MODEL_VIA = "model:dawid-skene"
SKIP_REASONS = ("no_abstract", "not_research", "out_of_scope", "other")
ADJUDICATED_PREFIX = "adjudicated:"
LEAD_ROLES = ("lead", "admin")
_RULE_VIA = re.compile(r"^rule:[a-z]+:k=\d+:c(\d+)$")


class AnswerError(InputError):
    """Answers that do not fit the schema; the message lists every problem."""


class ValidationError(InputError):
    """An adjudication or reopen that cannot be done (unknown work, not a lead, ...)."""


@dataclass(frozen=True)
class Verdict:
    """What the labels of one work amount to under a rule."""

    status: str
    final_answers: dict[str, Any] | None
    reason: str


def check_answers(
    answers: Mapping[str, Any], questions: Sequence[Question], *, require_all: bool = True
) -> dict[str, Any]:
    """Validate answers against questions and return them normalised.

    Args:
        answers: {question name: value}; single: a label, binary: "yes"/"no" (or a bool),
            multi: a list of distinct labels (may be empty). None means unanswered.
        questions: the questions allowed (the campaign's, in schema order).
        require_all: when True every question must be answered.

    Returns:
        {question: value} in question order; multi values as lists in schema label order.
    """
    if not isinstance(answers, Mapping):
        raise AnswerError("answers must be a mapping of question name to value")
    by_name = {q.name: q for q in questions}
    problems = [f"unknown question '{name}'" for name in answers if name not in by_name]
    out: dict[str, Any] = {}
    for q in questions:
        value = answers.get(q.name)
        if value is None:
            if require_all:
                problems.append(f"question '{q.name}' is not answered")
            continue
        try:
            out[q.name] = normalise_value(q, value)
        except AnswerError as exc:
            problems.append(str(exc))
    if problems:
        raise AnswerError("; ".join(problems))
    return out


def normalise_value(question: Question, value: Any) -> Any:
    """One answer checked against its question: a label, "yes"/"no", or a list of labels."""
    name = question.name
    if question.kind == "multi":
        if isinstance(value, str) or not isinstance(value, list | tuple | set | frozenset):
            raise AnswerError(f"question '{name}' takes a list of labels, not {value!r}")
        chosen = list(value)
        unknown = [v for v in chosen if v not in question.labels]
        if unknown:
            raise AnswerError(f"question '{name}': unknown labels {', '.join(map(str, unknown))}")
        if len(set(chosen)) != len(chosen):
            raise AnswerError(f"question '{name}': a label is chosen twice")
        return [lab for lab in question.labels if lab in set(chosen)]
    if question.kind == "binary":
        if isinstance(value, bool):
            return BINARY_LABELS[0] if value else BINARY_LABELS[1]
        if isinstance(value, str) and value.strip().lower() in BINARY_LABELS:
            return value.strip().lower()
        raise AnswerError(f"question '{name}' takes 'yes' or 'no', not {value!r}")
    if not isinstance(value, str) or value not in question.labels:
        raise AnswerError(f"question '{name}': {value!r} is not one of its labels")
    return value


def _key(value: Any) -> Any:
    """A comparable form of an answer (multi-label lists become sets)."""
    return frozenset(value) if isinstance(value, list | tuple | set | frozenset) else value


def _unkey(question: Question | str, key: Any) -> Any:
    """An answer back from its comparable form (sets as lists in schema order)."""
    if not isinstance(key, frozenset):
        return key
    if isinstance(question, Question):
        return [lab for lab in question.labels if lab in key]
    return sorted(key)


def rule_parts(rule: str) -> tuple[str, float | None]:
    """A campaign's rule column as (rule name, the model rule's posterior threshold)."""
    name, _, threshold = rule.partition(":p=")
    return name, float(threshold) if threshold else None


def evaluate(
    labels: Sequence[Mapping[str, Any]], questions: Sequence[Question | str], rule: str, k: int
) -> Verdict:
    """Apply a validation rule to the current answers of distinct annotators.

    Args:
        labels: one answers dict per annotator (current, non-skipped versions only).
        questions: the questions that must be settled (Question objects or names).
        rule: "unanimous" (k labels, all agreeing) or "majority" (k labels, a strict
            majority on every question); under "dawid-skene" a submit never settles a work
            (the posterior depends on every label of the campaign: see review.model_rule).
        k: the number of independent labels the rule needs (the campaign's overlap).

    Returns:
        The Verdict: status constant, final answers when validated, and a reason.
    """
    if rule_parts(rule)[0] not in RULES:
        raise ValueError(f"unknown rule {rule!r}: expected one of {', '.join(RULES)}")
    if k < 1:
        raise ValueError("k must be at least 1")
    if not labels:
        return Verdict(STATUS_UNVALIDATED, None, "no human labels yet")
    if rule_parts(rule)[0] == MODEL_RULE:
        return Verdict(
            STATUS_IN_REVIEW,
            None,
            f"{len(labels)} of {k} labels ({rule}; settled by `labeling aggregate --validate`)",
        )
    final: dict[str, Any] = {}
    disagree: list[str] = []
    short: list[str] = []
    for q in questions:
        name = q if isinstance(q, str) else q.name
        values = [_key(lab[name]) for lab in labels if lab.get(name) is not None]
        counts = Counter(values).most_common()
        if len(values) < k:
            short.append(name)
        if rule == "unanimous":
            if len(counts) > 1:
                disagree.append(name)
            elif counts:
                final[name] = _unkey(q, counts[0][0])
        else:
            if counts and 2 * counts[0][1] > len(values):
                final[name] = _unkey(q, counts[0][0])
            elif values:
                disagree.append(name)
    n = len(labels)
    if rule == "unanimous" and disagree:
        return Verdict(STATUS_DISPUTED, None, f"labels disagree on {', '.join(disagree)}")
    if short:
        return Verdict(STATUS_IN_REVIEW, None, f"{n} of {k} labels ({rule})")
    if disagree:
        return Verdict(STATUS_DISPUTED, None, f"no strict majority on {', '.join(disagree)}")
    agreeing = "all agree" if rule == "unanimous" else "strict majority on every question"
    return Verdict(STATUS_VALIDATED, final, f"{n} labels, {agreeing} ({rule}, k={k})")


def campaign_questions(campaign: Any, schema: Schema) -> list[Question]:
    """The questions a campaign asks (all of the schema's when it names none)."""
    names = getattr(campaign, "questions", None)
    if not names:
        return list(schema.questions)
    return [q for q in schema.questions if q.name in set(names)]


def current_answers(session: Session, campaign_id: int, work_id: str) -> list[dict[str, Any]]:
    """The latest non-skipped answers of each annotator on a work in a campaign."""
    rows = session.connection().execute(_ANSWERS, {"cid": campaign_id, "wid": work_id}).all()
    latest: dict[int, Any] = {}
    for row in rows:
        latest[row.user_id] = row
    return [dict(r.answers) for r in latest.values() if not r.skipped]


def _set_status(
    session: Session,
    work_id: str,
    old_status: str,
    verdict: Verdict,
    *,
    via: str | None,
    campaign_id: int | None,
    user_id: int | None,
    always_event: bool = False,
) -> None:
    """Write a work's status and final answers, with a StatusEvent when it changes."""
    now = utcnow()
    conn = session.connection()
    conn.execute(
        _SET_STATUS,
        {"wid": work_id, "st": verdict.status, "fa": verdict.final_answers, "via": via, "ts": now},
    )
    if always_event or verdict.status != old_status:
        conn.execute(
            insert(StatusEvent),
            {
                "work_id": work_id,
                "campaign_id": campaign_id,
                "user_id": user_id,
                "from_status": old_status,
                "to_status": verdict.status,
                "reason": verdict.reason,
                "created_at": now,
            },
        )


def reevaluate_work(
    session: Session, work_id: str, campaign: Any, schema: Schema, user_id: int | None = None
) -> Verdict | None:
    """Re-apply the campaign's rule to a work inside the caller's transaction.

    Args:
        session: the open write session (the work row is locked on PostgreSQL).
        work_id: the work whose labels changed.
        campaign: a Campaign row or CampaignInfo (id, rule, overlap, questions).
        schema: the label schema.
        user_id: who caused the change (recorded on the StatusEvent).

    Returns:
        The verdict, or None when the work is left alone (adjudicated, or validated by
        another campaign and this one has not concluded anything new).
    """
    work = session.connection().execute(_LOCK_WORK, {"wid": work_id}).one_or_none()
    if work is None:
        raise ValidationError(f"unknown work {work_id}")
    via_now = work.validated_via or ""
    if work.status == STATUS_VALIDATED and via_now.startswith(ADJUDICATED_PREFIX):
        return None
    labels = current_answers(session, campaign.id, work_id)
    questions = campaign_questions(campaign, schema)
    verdict = evaluate(labels, questions, campaign.rule, campaign.overlap)
    match = _RULE_VIA.match(via_now)
    # The model's verdicts change only in its own step (whichever campaign holds the work).
    other_campaign = (match is not None and int(match.group(1)) != campaign.id) or (
        via_now == MODEL_VIA
    )
    if (
        work.status == STATUS_VALIDATED
        and other_campaign
        and verdict.status in (STATUS_IN_REVIEW, STATUS_UNVALIDATED)
    ):
        return None
    via = (
        f"rule:{campaign.rule}:k={campaign.overlap}:c{campaign.id}"
        if verdict.status == STATUS_VALIDATED
        else None
    )
    if (work.status, work.final_answers, work.validated_via) != (
        verdict.status,
        verdict.final_answers,
        via,
    ):
        _set_status(
            session,
            work_id,
            work.status,
            verdict,
            via=via,
            campaign_id=campaign.id,
            user_id=user_id,
        )
    return verdict


def _lead(session: Session, user_id: int) -> User:
    """The user, if a lead or admin; ValidationError otherwise."""
    user = session.get(User, user_id)
    if user is None:
        raise ValidationError(f"unknown user id {user_id}")
    if user.role not in LEAD_ROLES:
        raise ValidationError(f"user '{user.name}' is a {user.role}: only leads can do this")
    return user


def _check_reason(reason: str | None) -> None:
    """ValidationError when a lead's reason is not text a database can store (a NUL)."""
    if reason is not None and not storable(reason):
        raise ValidationError("the reason contains a NUL character; remove it and try again")


def _locked_work(session: Session, work_id: str) -> Work:
    """The work row, locked for update; ValidationError when unknown."""
    if not storable(work_id):  # e.g. a NUL: no work has such an id (PostgreSQL refuses it)
        raise ValidationError(f"unknown work {shown(str(work_id))}")
    work = session.execute(
        select(Work).where(Work.id == work_id).with_for_update()
    ).scalar_one_or_none()
    if work is None:
        raise ValidationError(f"unknown work {work_id}")
    return work


def adjudicate(
    engine: Engine,
    work_id: str,
    answers: Mapping[str, Any],
    reason: str | None,
    lead_user_id: int,
    campaign_id: int | None = None,
    *,
    schema: Schema | None = None,
) -> Verdict:
    """Validate a work with a lead's answers, whatever its labels say (one transaction).

    Args:
        engine: the database.
        work_id: the work to settle.
        answers: the final answers; checked against the schema when one is given.
        reason: why (kept on the Adjudication and the StatusEvent).
        lead_user_id: the lead (or admin) deciding.
        campaign_id: the campaign the dispute came from, if any.
        schema: the label schema used to check (and normalise) the answers.
    """
    _check_reason(reason)
    final = dict(answers)
    if schema is not None:
        final = check_answers(answers, schema.questions, require_all=False)
    with write_session(engine) as session:
        lead = _lead(session, lead_user_id)
        work = _locked_work(session, work_id)
        session.add(
            Adjudication(
                work_id=work_id,
                campaign_id=campaign_id,
                user_id=lead.id,
                answers=final,
                reason=reason,
            )
        )
        verdict = Verdict(STATUS_VALIDATED, final, f"adjudicated by {lead.name}: {reason or ''}")
        _set_status(
            session,
            work_id,
            work.status,
            verdict,
            via=f"{ADJUDICATED_PREFIX}{lead.name}"[:64],
            campaign_id=campaign_id,
            user_id=lead.id,
            always_event=True,
        )
    return verdict


def _last_campaign(session: Session, work_id: str) -> Campaign | None:
    """The campaign of the work's latest adjudication or label, if any."""
    adj = session.execute(
        select(Adjudication.campaign_id)
        .where(Adjudication.work_id == work_id, Adjudication.campaign_id.is_not(None))
        .order_by(Adjudication.id.desc())
        .limit(1)
    ).scalar_one_or_none()
    if adj is None:
        adj = session.execute(
            select(Label.campaign_id)
            .where(Label.work_id == work_id)
            .order_by(Label.id.desc())
            .limit(1)
        ).scalar_one_or_none()
    return session.get(Campaign, adj) if adj is not None else None


def reopen(
    engine: Engine,
    work_id: str,
    lead_user_id: int,
    reason: str | None,
    *,
    schema: Schema | None = None,
) -> Verdict:
    """Take a validated work back to review: disputed if its labels disagree, else in review.

    Args:
        engine: the database.
        work_id: the work to reopen (its labels and adjudications are kept).
        lead_user_id: the lead (or admin) reopening it.
        reason: why (kept on the StatusEvent).
        schema: the label schema (needed to judge the labels; without it, names are used).
    """
    _check_reason(reason)
    with write_session(engine) as session:
        lead = _lead(session, lead_user_id)
        work = _locked_work(session, work_id)
        campaign = _last_campaign(session, work_id)
        status = STATUS_IN_REVIEW
        detail = "no labels"
        if campaign is not None:
            labels = current_answers(session, campaign.id, work_id)
            questions: Sequence[Question | str] = (
                campaign_questions(campaign, schema)
                if schema is not None
                else (campaign.questions or sorted({q for lab in labels for q in lab}))
            )
            verdict = evaluate(labels, questions, campaign.rule, campaign.overlap)
            detail = verdict.reason
            if verdict.status == STATUS_DISPUTED:
                status = STATUS_DISPUTED
        result = Verdict(status, None, f"reopened by {lead.name}: {reason or ''} ({detail})")
        _set_status(
            session,
            work_id,
            work.status,
            result,
            via=None,
            campaign_id=campaign.id if campaign is not None else None,
            user_id=lead.id,
            always_event=True,
        )
    return result
