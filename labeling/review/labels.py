"""Labels: submit, skip, edit (append-only versions), read back; file imports: label_import."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import BindParameter, Engine, bindparam, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.engine import read_session, write_session
from db.models import Campaign, CampaignItem, Label, Lease, User, Work, utcnow
from labeling.errors import Conflict, InputError, storage_errors
from labeling.retrying import retry_now
from labeling.review.validation import (
    SKIP_REASONS,
    AnswerError,
    campaign_questions,
    check_answers,
    reevaluate_work,
)
from labeling.schema import Schema

if TYPE_CHECKING:
    import pandas as pd

_SUBMIT_ATTEMPTS = 3


class LabelError(InputError):
    """A label that cannot be recorded; the message says why."""


class LeaseError(Conflict, LabelError):
    """A first label submitted without holding the work's lease (expired and taken over)."""


@dataclass(frozen=True, kw_only=True)
class LabelSubmission:
    """One label (or skip) as the annotator sends it: the work, the answers, what was shown.

    campaign_id: the campaign the work was served from.
    work_id: the work.
    user_id: the annotator; must hold the lease unless editing their own earlier label.
    answers: {question: value} for every campaign question (may be partial when skipped).
    submission_id: client-made unique id; a retry with the same id creates nothing.
    schema_hash: hash of the schema the form was built from.
    scores_visible: whether machine scores were shown before submitting.
    model_version: the model version of the predictions shown.
    time_on_item_ms: time spent on the work.
    skipped: a skip ("seen" for this user, does not count towards overlap).
    skip_reason: one of SKIP_REASONS, required with skipped.
    flagged: the annotator flags the work for a lead.
    note: free text.
    confidence: the annotator's confidence (a whole number).
    """

    campaign_id: int
    work_id: str
    user_id: int
    answers: Mapping[str, Any]
    submission_id: str
    schema_hash: str | None
    scores_visible: bool | None
    model_version: str | None
    time_on_item_ms: int | None
    skipped: bool = False
    skip_reason: str | None = None
    flagged: bool = False
    note: str | None = None
    confidence: int | None = None


@dataclass(frozen=True)
class PreviousLabel:
    """The user's latest stored version of a label: the next one written is version + 1."""

    version: int
    skipped: bool
    answers: dict[str, Any] | None = None


@dataclass(frozen=True)
class LabelResult:
    """The outcome of a submit: the label version written (or found) and the work's status."""

    label_id: int
    campaign_id: int
    work_id: str
    user_id: int
    version: int
    skipped: bool
    created: bool
    status: str


@dataclass(frozen=True)
class LabelView:
    """One stored label version, as shown to its own annotator."""

    id: int
    campaign_id: int
    work_id: str
    user_id: int
    version: int
    answers: dict[str, Any]
    skipped: bool
    skip_reason: str | None
    flagged: bool
    note: str | None
    confidence: int | None
    source: str
    created_at: datetime


def _view(row: Label) -> LabelView:
    """The LabelView of a Label row."""
    return LabelView(
        id=row.id,
        campaign_id=row.campaign_id,
        work_id=row.work_id,
        user_id=row.user_id,
        version=row.version,
        answers=dict(row.answers),
        skipped=row.skipped,
        skip_reason=row.skip_reason,
        flagged=row.flagged,
        note=row.note,
        confidence=row.confidence,
        source=row.source,
        created_at=row.created_at,
    )


# Submitting runs after every work: its statements are built once with bind parameters.
_BY_SID = select(
    Label.id, Label.campaign_id, Label.work_id, Label.user_id, Label.version, Label.skipped
).where(Label.submission_id == bindparam("sid"))
_C: BindParameter[int] = bindparam("cid")
_W: BindParameter[str] = bindparam("wid")
_U: BindParameter[int] = bindparam("uid")
_LATEST = (
    select(Label.version, Label.skipped, Label.answers)
    .where(Label.campaign_id == _C, Label.work_id == _W, Label.user_id == _U)
    .order_by(Label.version.desc())
    .limit(1)
)
# Everything a submit checks, in one round trip: the campaign, a label already stored under
# this submission id, the queue item, the lease holder, the user's latest version.
_STATE = select(
    Campaign.id,
    Campaign.name,
    Campaign.overlap,
    Campaign.rule,
    Campaign.questions,
    select(Label.id)
    .where(Label.submission_id == bindparam("sid"))
    .scalar_subquery()
    .label("sid_label"),
    select(CampaignItem.id)
    .where(CampaignItem.campaign_id == _C, CampaignItem.work_id == _W)
    .scalar_subquery()
    .label("item_id"),
    select(Lease.user_id)
    .where(Lease.campaign_id == _C, Lease.work_id == _W)
    .scalar_subquery()
    .label("holder"),
    _LATEST.with_only_columns(Label.version).scalar_subquery().label("prev_version"),
    _LATEST.with_only_columns(Label.skipped).scalar_subquery().label("prev_skipped"),
).where(Campaign.id == _C)
_COUNT = (
    update(CampaignItem)
    .where(CampaignItem.campaign_id == _C, CampaignItem.work_id == _W)
    .values(
        n_labels=CampaignItem.n_labels + bindparam("delta"),
        done=CampaignItem.n_labels + bindparam("delta") >= bindparam("overlap"),
    )
)
_UNLEASE = delete(Lease).where(Lease.campaign_id == _C, Lease.work_id == _W, Lease.user_id == _U)
_STATUS = select(Work.status).where(Work.id == _W)
# A label names the revision of the record it was made on: its work's record_hash, read in
# the insert itself (no round trip more).
_INSERT = (
    insert(Label)
    .values(revision=select(Work.record_hash)
            .where(Work.id == bindparam("revision_of")).scalar_subquery())
    .returning(Label.id)
)  # fmt: skip


def _latest(session: Session, campaign_id: int, work_id: str, user_id: int) -> PreviousLabel | None:
    """The user's latest label version on a work, or None."""
    row = session.execute(
        _LATEST, {"cid": campaign_id, "wid": work_id, "uid": user_id}
    ).one_or_none()
    return None if row is None else PreviousLabel(row.version, bool(row.skipped), row.answers)


def _record(
    session: Session,
    camp: Any,
    work_id: str,
    user_id: int,
    prev: PreviousLabel | None,
    values: dict[str, Any],
    *,
    schema: Schema | None,
    evaluate: bool = True,
) -> tuple[int, int, str | None]:
    """Insert the next label version, keep n_labels/done in step, drop the lease, re-evaluate.

    Returns (label id, version, the work's status when re-evaluated).
    """
    conn = session.connection()
    version = prev.version + 1 if prev else 1
    row = {
        "created_at": utcnow(),
        **values,
        "campaign_id": camp.id,
        "work_id": work_id,
        "user_id": user_id,
        "version": version,
    }
    label_id = conn.execute(_INSERT, {**row, "revision_of": work_id}).scalar_one()
    params = {"cid": camp.id, "wid": work_id, "uid": user_id}
    delta = int(not values["skipped"]) - int(prev is not None and not prev.skipped)
    if delta:
        conn.execute(_COUNT, {**params, "delta": delta, "overlap": camp.overlap})
    conn.execute(_UNLEASE, params)
    status = None
    if evaluate and schema is not None:
        status = reevaluate_work(session, work_id, camp, schema, user_id).status
    return label_id, version, status


def _submit_tx(session: Session, edit: bool, sub: LabelSubmission, schema: Schema) -> LabelResult:
    """Check and record one submit or edit inside the caller's transaction."""
    conn = session.connection()
    cid, wid, uid = sub.campaign_id, sub.work_id, sub.user_id
    params = {"cid": cid, "wid": wid, "uid": uid, "sid": sub.submission_id}
    state = conn.execute(_STATE, params).one_or_none()
    sid_label = state.sid_label if state is not None else conn.execute(_BY_SID, params).scalar()
    if sid_label is not None:
        found = conn.execute(_BY_SID, params).one()
        if (found.campaign_id, found.work_id, found.user_id) != (cid, wid, uid):
            raise LabelError(f"submission id {params['sid']!r} was already used for another label")
        current = conn.execute(_STATUS, params).scalar_one()
        return LabelResult(found.id, cid, wid, uid, found.version, found.skipped, False, current)
    if state is None:
        raise LabelError(f"no campaign numbered {cid}")
    if state.item_id is None:
        raise LabelError(f"work {wid} is not in campaign '{state.name}'")
    skipped = bool(sub.skipped)
    if skipped and sub.skip_reason not in SKIP_REASONS:
        raise LabelError(f"a skip needs a reason, one of {', '.join(SKIP_REASONS)}")
    try:
        answers = check_answers(
            sub.answers or {}, campaign_questions(state, schema), require_all=not skipped
        )
    except AnswerError as exc:
        raise LabelError(str(exc)) from exc
    conf = sub.confidence
    if conf is not None and (isinstance(conf, bool) or not isinstance(conf, int)):
        raise LabelError(f"confidence must be a whole number, not {conf!r}")
    prev = None
    if state.prev_version is not None:
        prev = PreviousLabel(version=state.prev_version, skipped=bool(state.prev_skipped))
    if edit and prev is None:
        raise LabelError(f"there is no label of yours on work {wid} to edit")
    if prev is None and state.holder != uid:
        why = "was given to another annotator" if state.holder else "was released"
        raise LeaseError(
            f"your lease on work {wid} expired and the work {why}: this label was not saved"
        )
    values = {
        "answers": answers,
        "skipped": skipped,
        "skip_reason": sub.skip_reason if skipped else None,
        "flagged": bool(sub.flagged),
        "note": sub.note or None,
        "confidence": conf,
        "schema_hash": sub.schema_hash,
        "scores_visible": sub.scores_visible,
        "model_version": sub.model_version,
        "time_on_item_ms": sub.time_on_item_ms,
        "source": "app",
        "submission_id": params["sid"],
    }
    label_id, version, status = _record(session, state, wid, uid, prev, values, schema=schema)
    return LabelResult(label_id, cid, wid, uid, version, skipped, True, status or "")


def _lost_race(exc: BaseException) -> bool:
    """A concurrent submit won (same submission id, or same version): worth a retry."""
    return isinstance(exc, IntegrityError)


def _not_saved(exc: BaseException) -> LabelError:
    """The error once every submit attempt lost its race."""
    return LabelError(f"label could not be saved after retries: {getattr(exc, 'orig', exc)}")


@storage_errors("Not saved")  # a full disk or read-only database: StorageError, all rolled back
def _submit(engine: Engine, edit: bool, sub: LabelSubmission, schema: Schema) -> LabelResult:
    """Run a submit in its own transaction, retrying once a concurrent writer has won."""
    if not sub.submission_id or len(sub.submission_id) > 64:
        raise LabelError("submission_id must be a non-empty string of at most 64 characters")

    def attempt() -> LabelResult:
        # The retry after a lost race returns the stored label or writes the next version.
        with write_session(engine) as session:
            return _submit_tx(session, edit, sub, schema)

    return retry_now(attempt, attempts=_SUBMIT_ATTEMPTS, retry_on=_lost_race, exhausted=_not_saved)


def submit_label(engine: Engine, submission: LabelSubmission, *, schema: Schema) -> LabelResult:
    """Record an annotator's label (or skip) in one transaction; idempotent on submission_id.

    Args:
        engine: the database.
        submission: the label; its user must hold the work's lease.
        schema: the label schema, to check answers and re-evaluate the work's status.
    """
    return _submit(engine, False, submission, schema)


def edit_label(engine: Engine, submission: LabelSubmission, *, schema: Schema) -> LabelResult:
    """Write a new version of the user's own label (no lease needed).

    Args:
        engine: the database.
        submission: the new version; its user must already have a label (or skip) on the
            work. Editing a label into a skip stops it counting towards overlap.
        schema: as for submit_label.
    """
    return _submit(engine, True, submission, schema)


def latest_versions(campaign_id: int, user_id: int) -> Any:
    """Subquery (work_id, v): the user's latest label version on each work of a campaign.

    Args:
        campaign_id: the campaign.
        user_id: the annotator.
    """
    return (
        select(Label.work_id, func.max(Label.version).label("v"))
        .where(Label.campaign_id == campaign_id, Label.user_id == user_id)
        .group_by(Label.work_id)
        .subquery()
    )


def user_labels(engine: Engine, campaign_id: int, user_id: int) -> list[LabelView]:
    """The user's own current label (latest version) on each work, newest first.

    Args:
        engine: the database.
        campaign_id: the campaign.
        user_id: the annotator (never anyone else's labels).
    """
    latest = latest_versions(campaign_id, user_id)
    with read_session(engine) as session:
        rows = session.execute(
            select(Label)
            .join(latest, (Label.work_id == latest.c.work_id) & (Label.version == latest.c.v))
            .where(Label.campaign_id == campaign_id, Label.user_id == user_id)
            .order_by(Label.created_at.desc(), Label.id.desc())
        ).scalars()
        return [_view(r) for r in rows]


def label_history(engine: Engine, campaign_id: int, work_id: str, user_id: int) -> list[LabelView]:
    """Every version of one user's label on one work, oldest first.

    Args:
        engine: the database.
        campaign_id: the campaign.
        work_id: the work.
        user_id: the annotator.
    """
    with read_session(engine) as session:
        rows = session.execute(
            select(Label)
            .where(
                Label.campaign_id == campaign_id, Label.work_id == work_id, Label.user_id == user_id
            )
            .order_by(Label.version)
        ).scalars()
        return [_view(r) for r in rows]


def current_labels(engine: Engine, campaign_id: int | None = None) -> pd.DataFrame:
    """Each annotator's latest version per work, skips left out, one row per question.

    Args:
        engine: the database.
        campaign_id: one campaign, or None for all.

    Returns:
        Columns campaign_id, work_id, annotator, user_id, question, value, created_at,
        version. Multi-label values are the chosen labels joined by ";" in schema order
        ("" when none was chosen).
    """
    import pandas as pd

    latest = select(
        Label.campaign_id, Label.work_id, Label.user_id, func.max(Label.version).label("v")
    )
    if campaign_id is not None:
        latest = latest.where(Label.campaign_id == campaign_id)
    sub = latest.group_by(Label.campaign_id, Label.work_id, Label.user_id).subquery()
    query = (
        select(
            Label.campaign_id,
            Label.work_id,
            User.name,
            Label.user_id,
            Label.answers,
            Label.created_at,
            Label.version,
        )
        .join(
            sub,
            (Label.campaign_id == sub.c.campaign_id)
            & (Label.work_id == sub.c.work_id)
            & (Label.user_id == sub.c.user_id)
            & (Label.version == sub.c.v),
        )
        .join(User, User.id == Label.user_id)
        .where(Label.skipped.is_(False))
        .order_by(Label.campaign_id, Label.work_id, User.name)
    )
    records = []
    with read_session(engine) as session:
        for cid, wid, name, uid, answers, created, version in session.execute(query):
            for question, value in answers.items():
                if isinstance(value, list):
                    value = ";".join(value)
                records.append((cid, wid, name, uid, question, value, created, version))
    columns = [
        "campaign_id",
        "work_id",
        "annotator",
        "user_id",
        "question",
        "value",
        "created_at",
        "version",
    ]
    return pd.DataFrame.from_records(records, columns=columns)
