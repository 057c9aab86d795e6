"""Validation rules: when labels make a work validated ground truth; adjudication and reopen."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from db.engine import read_session, write_session
from db.models import Adjudication, Campaign, CampaignItem, Label, StatusEvent, User, utcnow
from labeling.errors import Conflict, InputError
from labeling.inputs import shown, storable
from labeling.review.history import WorkState, set_state
from labeling.review.status_sql import _ANSWERS, _LOCK_WORK
from labeling.review.verdicts import open_disputes, recompare, record_verdict, settle
from labeling.schema import BINARY_LABELS, Question, Schema
from labeling.stats.majority import majority
from labeling.vocabulary import (
    ACT_ADJUDICATION,
    ACT_REOPEN,
    ACT_RULE,
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


class AlreadySettled(Conflict, ValidationError):
    """Another lead (or a label) changed the work first; the message says who and when."""


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
            found = majority(values)  # the one definition: strictly more than half, no tie-break
            if found is not None:
                final[name] = _unkey(q, found)
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
    before: WorkState,
    verdict: Verdict,
    *,
    via: str | None,
    campaign_id: int | None,
    user_id: int | None,
    act: str,
    always_event: bool = False,
) -> bool:
    """Write a work's status and final answers, with a StatusEvent when anything changes."""
    after = WorkState(verdict.status, verdict.final_answers, via, before.is_gold)
    return set_state(
        session.connection(),
        work_id,
        before,
        after,
        act=act,
        reason=verdict.reason,
        campaign_id=campaign_id,
        user_id=user_id,
        always_event=always_event,
    )


@dataclass(frozen=True)
class Settlement:
    """What a change of a campaign's labels did to a work (review.validation.reevaluate_work).

    status: the work's status afterwards; verdict: the campaign's verdict under its rule;
    cross: "corroborated" or "disputed" when the campaign's verdict on a work validated
    elsewhere was recorded now (the work's answers unchanged), else None.
    """

    status: str
    verdict: Verdict
    cross: str | None = None


def rule_campaign(via: str | None) -> int | None:
    """The campaign a `validated_via` of the form rule:NAME:k=K:cID names (None: another way)."""
    match = _RULE_VIA.match(via or "")
    return int(match.group(1)) if match is not None else None


def _adjudicated_in(session: Session, work_id: str) -> int | None:
    """The campaign of the work's latest adjudication (None: none, or none named)."""
    return session.execute(
        select(Adjudication.campaign_id)
        .where(Adjudication.work_id == work_id)
        .order_by(Adjudication.id.desc())
        .limit(1)
    ).scalar()


def _gold_check(session: Session, campaign_id: int, work_id: str) -> bool:
    """Whether the work is served as a gold check in this campaign."""
    return bool(
        session.execute(
            select(CampaignItem.is_gold).where(
                CampaignItem.campaign_id == campaign_id, CampaignItem.work_id == work_id
            )
        ).scalar()
    )


def reevaluate_work(
    session: Session, work_id: str, campaign: Any, schema: Schema, user_id: int | None = None
) -> Settlement:
    """Re-apply the campaign's rule to a work after its labels there changed (caller's tx).

    The one place where labels change a work's human side (README, "Ground truth"):
    - a work not yet validated takes the campaign's verdict (validated, disputed, in review);
    - a work validated under this campaign's rule takes its new verdict: other answers, or
      disputed when its labels no longer agree, or in review when fewer than k labels remain;
    - a work validated otherwise (another campaign, an adjudication, the model rule) keeps
      its answers: this campaign's concluded verdict corroborates them or opens a dispute
      across campaigns (review.verdicts); labels of an adjudicated dispute's own campaign,
      and gold checks (scored against the gold answer), change nothing.

    Args:
        session: the open write session (the work row is locked on PostgreSQL).
        work_id: the work whose labels changed.
        campaign: a Campaign row or CampaignInfo (id, name, rule, overlap, questions).
        schema: the label schema.
        user_id: who caused the change (recorded on the StatusEvent).

    Returns:
        The Settlement: the work's status afterwards, the campaign's verdict, and the
        outcome of a verdict recorded against answers validated elsewhere.
    """
    row = session.connection().execute(_LOCK_WORK, {"wid": work_id}).one_or_none()
    if row is None:
        raise ValidationError(f"unknown work {work_id}")
    state = WorkState.of(row)
    questions = campaign_questions(campaign, schema)
    if state.is_gold and _gold_check(session, campaign.id, work_id):
        # A gold check tests the annotator against the gold answer; it never changes it.
        return Settlement(state.status, Verdict(state.status, None, "gold check"))
    labels = current_answers(session, campaign.id, work_id)
    verdict = evaluate(labels, questions, campaign.rule, campaign.overlap)
    if state.status == STATUS_VALIDATED and rule_campaign(state.validated_via) != campaign.id:
        adjudicated = (state.validated_via or "").startswith(ADJUDICATED_PREFIX)
        if verdict.status != STATUS_VALIDATED or verdict.final_answers is None:
            return Settlement(state.status, verdict)  # concludes nothing (yet)
        if adjudicated and _adjudicated_in(session, work_id) == campaign.id:
            return Settlement(state.status, verdict)  # the lead settled these labels
        names = [q.name for q in questions]
        cross = record_verdict(
            session, work_id, campaign, verdict.final_answers, names, state, user_id
        )
        return Settlement(state.status, verdict, cross)
    via = (
        f"rule:{campaign.rule}:k={campaign.overlap}:c{campaign.id}"
        if verdict.status == STATUS_VALIDATED
        else None
    )
    status = verdict.status
    if state.status == STATUS_VALIDATED and status == STATUS_UNVALIDATED:
        # Every label of the validating campaign was skipped or withdrawn: held for review.
        status = STATUS_IN_REVIEW
        verdict = Verdict(status, None, f"{verdict.reason}: fewer than k={campaign.overlap}")
    changed = _set_status(
        session,
        work_id,
        state,
        verdict,
        via=via,
        campaign_id=campaign.id,
        user_id=user_id,
        act=ACT_RULE,
    )
    if changed and state.status == STATUS_VALIDATED:
        # The validating campaign's new verdict: other campaigns' verdicts are held against it.
        after = WorkState(status, verdict.final_answers, via, state.is_gold)
        recompare(session, work_id, after, user_id)
    return Settlement(status, verdict)


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


def _locked_state(session: Session, work_id: str) -> WorkState:
    """The work's human side, its row locked for update; ValidationError when unknown."""
    if not storable(work_id):  # e.g. a NUL: no work has such an id (PostgreSQL refuses it)
        raise ValidationError(f"unknown work {shown(str(work_id))}")
    row = session.connection().execute(_LOCK_WORK, {"wid": work_id}).one_or_none()
    if row is None:
        raise ValidationError(f"unknown work {work_id}")
    return WorkState.of(row)


def _last_act(session: Session, work_id: str) -> str:
    """Who last changed the work and when, in words ("lead 'ann' at 2026-12-07 10:02 UTC")."""
    row = session.execute(
        select(StatusEvent.created_at, StatusEvent.act, User.name)
        .outerjoin(User, User.id == StatusEvent.user_id)
        .where(StatusEvent.work_id == work_id)
        .order_by(StatusEvent.id.desc())
        .limit(1)
    ).one_or_none()
    if row is None:
        return "someone else"
    who = f"'{row.name}'" if row.name else "a file import or the model rule"
    when = row.created_at.strftime("%Y-%m-%d %H:%M:%S UTC") if row.created_at else "?"
    return f"{who} ({row.act or 'a status change'}) at {when}"


def last_act(engine: Engine, work_id: str) -> str:
    """Who last changed a work's human side and when, in words (for a lead told too late).

    Args:
        engine: the database.
        work_id: the work.
    """
    with read_session(engine) as session:
        return _last_act(session, work_id)


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

    Decided under the work's lock: a work validated meanwhile, with no dispute across
    campaigns open, is refused (AlreadySettled names who settled it and when), and nothing
    is stored. A validated work with an open dispute keeps its answers to the questions the
    lead did not answer; its open disputes are settled.

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
    given = dict(answers)
    if schema is not None:
        given = check_answers(answers, schema.questions, require_all=False)
    with write_session(engine) as session:
        lead = _lead(session, lead_user_id)
        state = _locked_state(session, work_id)
        open_ = open_disputes(session, [work_id])
        if state.status == STATUS_VALIDATED and not open_:
            raise AlreadySettled(
                f"{work_id} was already settled by {_last_act(session, work_id)} "
                f"({state.validated_via}): nothing was recorded"
            )
        final = dict(state.final_answers or {}) if state.status == STATUS_VALIDATED else {}
        final.update(given)
        if schema is not None:
            final = {q.name: final[q.name] for q in schema.questions if q.name in final}
        session.add(
            Adjudication(
                work_id=work_id,
                campaign_id=campaign_id,
                user_id=lead.id,
                answers=given,
                reason=reason,
            )
        )
        session.flush()
        settle(session, work_id, lead.id, utcnow())
        verdict = Verdict(STATUS_VALIDATED, final, f"adjudicated by {lead.name}: {reason or ''}")
        _set_status(
            session,
            work_id,
            state,
            verdict,
            via=f"{ADJUDICATED_PREFIX}{lead.name}"[:64],
            campaign_id=campaign_id,
            user_id=lead.id,
            act=ACT_ADJUDICATION,
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

    Decided under the work's lock: a work that is not validated (reopened meanwhile) is
    refused, naming who changed it last. Its open disputes across campaigns are settled;
    a gold work keeps its mark but is no gold check until it is validated again.

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
        state = _locked_state(session, work_id)
        if state.status != STATUS_VALIDATED:
            raise AlreadySettled(
                f"{work_id} is {state.status}, not validated (last changed by "
                f"{_last_act(session, work_id)}): only validated works can be reopened; "
                "nothing was recorded"
            )
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
        settle(session, work_id, lead.id, utcnow())
        result = Verdict(status, None, f"reopened by {lead.name}: {reason or ''} ({detail})")
        _set_status(
            session,
            work_id,
            state,
            result,
            via=None,
            campaign_id=campaign.id if campaign is not None else None,
            user_id=lead.id,
            act=ACT_REOPEN,
            always_event=True,
        )
    return result
