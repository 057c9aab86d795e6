"""The review queue: claiming the next work under a lease, renewing and releasing leases."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    Engine,
    Select,
    and_,
    bindparam,
    delete,
    exists,
    false,
    func,
    select,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session

from db.engine import affected_rows, read_session, write_session
from db.models import Campaign, CampaignItem, Label, Lease, UTCDateTime, Work, utcnow
from labeling.errors import Conflict
from labeling.retrying import retry_now
from labeling.review.campaigns import add_items
from labeling.vocabulary import STATUS_VALIDATED

CLAIM_ATTEMPTS = 8
GOLD_CANDIDATES = 50
_RETRY_SQLSTATES = {"40001", "40P01"}  # serialization failure, deadlock (PostgreSQL)


class QueueError(Conflict):
    """A claim that cannot be served (unknown campaign, persistent contention)."""


@dataclass(frozen=True)
class Claim:
    """A work leased to one annotator until expires_at."""

    campaign_id: int
    work_id: str
    user_id: int
    expires_at: datetime
    position: int
    is_gold: bool
    resumed: bool = False


def _retryable(exc: BaseException) -> bool:
    """Whether a failed claim transaction lost a race and may be retried.

    PostgreSQL only (SQLite writers are serialised): another claimer leased the work first.
    The unique (campaign_id, work_id) on leases is the last guard.
    """
    if isinstance(exc, _LostRace | IntegrityError):
        return True
    if not isinstance(exc, OperationalError):
        return False
    return getattr(getattr(exc, "orig", None), "sqlstate", None) in _RETRY_SQLSTATES


# The claim path runs on every "next": its statements are built once with bind parameters,
# so SQLAlchemy neither rebuilds them nor recomputes their cache keys (about 5x faster).
_NOW = bindparam("now", type_=UTCDateTime())
_EXP = bindparam("exp", type_=UTCDateTime())
# Campaign settings and the lease this user already holds (with its item), in one query.
_CAMPAIGN_AND_HELD = (
    select(
        Campaign.overlap,
        Campaign.lease_seconds,
        Campaign.gold_rate,
        Campaign.active,
        Lease.id.label("lease_id"),
        Lease.work_id,
        CampaignItem.position,
        CampaignItem.is_gold,
    )
    .select_from(Campaign)
    .outerjoin(
        Lease,
        and_(
            Lease.campaign_id == Campaign.id,
            Lease.user_id == bindparam("uid"),
            Lease.expires_at > _NOW,
        ),
    )
    .outerjoin(
        CampaignItem,
        and_(CampaignItem.campaign_id == Campaign.id, CampaignItem.work_id == Lease.work_id),
    )
    .where(Campaign.id == bindparam("cid"))
    .order_by(Lease.id)
    .limit(1)
)
_RENEW_ID = update(Lease).where(Lease.id == bindparam("lid")).values(expires_at=_EXP)
_ITEM = select(CampaignItem.position, CampaignItem.is_gold).where(
    CampaignItem.campaign_id == bindparam("cid"), CampaignItem.work_id == bindparam("wid")
)


def _lease_upsert(dialect_insert: Any) -> Any:
    """INSERT a lease, or take over the row when the lease there has expired (else no row)."""
    stmt = dialect_insert(Lease).values(
        campaign_id=bindparam("cid"),
        work_id=bindparam("wid"),
        user_id=bindparam("uid"),
        leased_at=_NOW,
        expires_at=_EXP,
    )
    return stmt.on_conflict_do_update(
        index_elements=["campaign_id", "work_id"],
        set_={
            "user_id": stmt.excluded.user_id,
            "leased_at": stmt.excluded.leased_at,
            "expires_at": stmt.excluded.expires_at,
        },
        where=Lease.expires_at <= _NOW,
    ).returning(Lease.id)


_TAKE_LEASE = {"sqlite": _lease_upsert(sqlite_insert), "postgresql": _lease_upsert(pg_insert)}


class _LostRace(Exception):
    """Another claimer leased the chosen work between our read and our write."""


def _take_lease(session: Session, params: dict[str, Any]) -> bool:
    """Lease a work (taking over an expired lease); False if someone holds it unexpired."""
    conn = session.connection()
    return conn.execute(_TAKE_LEASE[conn.dialect.name], params).first() is not None


def _candidates_query() -> Select:
    """Items this user may get, in queue order (bind parameters cid, uid, overlap, now)."""
    leased = exists().where(
        Lease.campaign_id == bindparam("cid"),
        Lease.work_id == CampaignItem.work_id,
        Lease.expires_at > _NOW,
    )
    seen = exists().where(
        Label.campaign_id == bindparam("cid"),
        Label.work_id == CampaignItem.work_id,
        Label.user_id == bindparam("uid"),
    )
    # A gold check whose work was reopened has no gold answer to score against.
    gold_open = exists().where(Work.id == CampaignItem.work_id, Work.status != STATUS_VALIDATED)
    return (
        select(CampaignItem.work_id, CampaignItem.position, CampaignItem.is_gold)
        .where(
            CampaignItem.campaign_id == bindparam("cid"),
            CampaignItem.done == false(),
            CampaignItem.n_labels < bindparam("overlap"),
            ~leased,
            ~seen,
            ~(CampaignItem.is_gold & gold_open),
        )
        .order_by(CampaignItem.position)
    )


# PostgreSQL: rows another claimer is locking are skipped instead of waited for.
# SQLite ignores FOR UPDATE: BEGIN IMMEDIATE already serialises writers.
_NEXT = _candidates_query().limit(1).with_for_update(skip_locked=True)


def _gold_choice(
    session: Session, campaign_id: int, user_id: int, gold_rate: float, now: datetime
) -> str | None:
    """A gold work to offer instead of the next one (seeded per user and count), or None."""
    seen_count = session.execute(
        select(func.count())
        .select_from(Label)
        .where(Label.user_id == user_id, Label.campaign_id == campaign_id)
    ).scalar_one()
    rng = random.Random(f"gold:{campaign_id}:{user_id}:{seen_count}")
    if rng.random() >= gold_rate:
        return None
    leased = exists().where(
        Lease.campaign_id == campaign_id, Lease.work_id == Work.id, Lease.expires_at > now
    )
    seen = exists().where(
        Label.campaign_id == campaign_id, Label.work_id == Work.id, Label.user_id == user_id
    )
    ids = (
        session.execute(
            select(Work.id)
            # A reopened gold work is no gold check until it is validated again.
            .where(Work.is_gold == true(), Work.status == STATUS_VALIDATED, ~leased, ~seen)
            .order_by(Work.id)
            .limit(GOLD_CANDIDATES)
        )
        .scalars()
        .all()
    )
    return rng.choice(ids) if ids else None


def _claim(session: Session, campaign_id: int, user_id: int, now: datetime) -> Claim | None:
    """One claim attempt inside the caller's transaction."""
    conn = session.connection()
    params: dict[str, Any] = {"cid": campaign_id, "uid": user_id, "now": now}
    camp = conn.execute(_CAMPAIGN_AND_HELD, params).one_or_none()
    if camp is None:
        raise QueueError(f"no campaign numbered {campaign_id}")
    if not camp.active:
        return None
    params["exp"] = expires = now + timedelta(seconds=camp.lease_seconds)
    if camp.lease_id is not None:  # a reload: the same work, lease renewed
        conn.execute(_RENEW_ID, {"lid": camp.lease_id, "exp": expires})
        return Claim(
            campaign_id, camp.work_id, user_id, expires, camp.position, camp.is_gold, resumed=True
        )
    if camp.gold_rate > 0:
        gold = _gold_choice(session, campaign_id, user_id, camp.gold_rate, now)
        if gold is not None:
            add_items(session, campaign_id, [gold], is_gold=True)
            item = conn.execute(_ITEM, {**params, "wid": gold}).one()
            if not _take_lease(session, {**params, "wid": gold}):
                raise _LostRace(gold)
            return Claim(campaign_id, gold, user_id, expires, item.position, True)
    for _ in range(CLAIM_ATTEMPTS):
        row = conn.execute(_NEXT, {**params, "overlap": camp.overlap}).one_or_none()
        if row is None:
            return None
        if _take_lease(session, {**params, "wid": row.work_id}):
            return Claim(campaign_id, row.work_id, user_id, expires, row.position, row.is_gold)
        # PostgreSQL: a concurrent claimer leased this work after our snapshot was taken.
        # The next statement sees its lease, so look again in the same transaction.
    raise _LostRace(campaign_id)


def claim_next(
    engine: Engine, campaign_id: int, user_id: int, *, now: datetime | None = None
) -> Claim | None:
    """Lease the next work of a campaign to a user (or return the lease they already hold).

    Args:
        engine: the database.
        campaign_id: the campaign to serve from.
        user_id: the annotator.
        now: the clock (tests); default now.

    Returns:
        The Claim, or None when nothing is left for this user (or the campaign is closed).
    """

    def attempt() -> Claim | None:
        with write_session(engine) as session:
            return _claim(session, campaign_id, user_id, now or utcnow())

    return retry_now(attempt, attempts=CLAIM_ATTEMPTS, retry_on=_retryable, exhausted=_busy)


def _busy(last: BaseException) -> QueueError:
    """The error once every claim attempt lost its race (persistent contention)."""
    return QueueError(f"could not claim a work after {CLAIM_ATTEMPTS} attempts: {last}")


def upcoming(
    engine: Engine, campaign_id: int, user_id: int, n: int = 5, *, now: datetime | None = None
) -> list[str]:
    """Ids of the next works this user would probably get (for prefetching; leases nothing).

    Args:
        engine: the database.
        campaign_id: the campaign.
        user_id: the annotator.
        n: how many.
        now: the clock; default now.
    """
    with read_session(engine) as session:
        overlap = session.execute(
            select(Campaign.overlap).where(Campaign.id == campaign_id)
        ).scalar_one_or_none()
        if overlap is None:
            return []
        params = {"cid": campaign_id, "uid": user_id, "overlap": overlap, "now": now or utcnow()}
        rows = session.execute(_candidates_query().limit(n), params).scalars()
        return list(rows)


def upcoming_work_ids(
    engine: Engine, campaign_id: int, n: int = 50, *, now: datetime | None = None
) -> list[str]:
    """Ids of the next works of a campaign, for anyone (not done, not leased); leases nothing.

    Args:
        engine: the database.
        campaign_id: the campaign.
        n: how many.
        now: the clock; default now.
    """
    leased = exists().where(
        Lease.campaign_id == campaign_id,
        Lease.work_id == CampaignItem.work_id,
        Lease.expires_at > (now or utcnow()),
    )
    overlap = select(Campaign.overlap).where(Campaign.id == campaign_id).scalar_subquery()
    with read_session(engine) as session:
        return list(
            session.execute(
                select(CampaignItem.work_id)
                .where(
                    CampaignItem.campaign_id == campaign_id,
                    CampaignItem.done == false(),
                    CampaignItem.n_labels < overlap,
                    ~leased,
                )
                .order_by(CampaignItem.position)
                .limit(n)
            ).scalars()
        )


def held_campaign(
    engine: Engine, user_id: int, campaign_ids: list[int], *, now: datetime | None = None
) -> int | None:
    """The campaign (among campaign_ids) of the user's newest unexpired lease, or None.

    A reload or a second tab opens the label page afresh: it goes back to the work the user
    holds rather than to the first campaign, where it would lease a second work.

    Args:
        engine: the database.
        user_id: the annotator.
        campaign_ids: the campaigns to look in (the open ones).
        now: the clock; default now.
    """
    if not campaign_ids:
        return None
    with read_session(engine) as session:
        return session.execute(
            select(Lease.campaign_id)
            .where(
                Lease.user_id == user_id,
                Lease.campaign_id.in_(campaign_ids),
                Lease.expires_at > (now or utcnow()),
            )
            .order_by(Lease.leased_at.desc(), Lease.id.desc())
            .limit(1)
        ).scalar_one_or_none()


def renew_lease(
    engine: Engine, campaign_id: int, user_id: int, work_id: str, *, now: datetime | None = None
) -> datetime | None:
    """Extend a user's lease by the campaign's lease_seconds.

    Args:
        engine: the database.
        campaign_id: the campaign.
        user_id: the lease holder.
        work_id: the leased work.
        now: the clock; default now.

    Returns:
        The new expiry, or None when the user no longer holds the lease (it was taken over).
    """
    now = now or utcnow()
    with write_session(engine) as session:
        seconds = session.execute(
            select(Campaign.lease_seconds).where(Campaign.id == campaign_id)
        ).scalar_one_or_none()
        if seconds is None:
            raise QueueError(f"no campaign numbered {campaign_id}")
        expires = now + timedelta(seconds=seconds)
        done = affected_rows(
            session.execute(
                update(Lease)
                .where(
                    Lease.campaign_id == campaign_id,
                    Lease.work_id == work_id,
                    Lease.user_id == user_id,
                )
                .values(expires_at=expires)
            )
        )
    return expires if done else None


def release_lease(engine: Engine, campaign_id: int, user_id: int, work_id: str) -> bool:
    """Give a leased work back to the queue; True if the user held it.

    Args:
        engine: the database.
        campaign_id: the campaign.
        user_id: the lease holder.
        work_id: the leased work.
    """
    with write_session(engine) as session:
        gone = affected_rows(
            session.execute(
                delete(Lease).where(
                    Lease.campaign_id == campaign_id,
                    Lease.work_id == work_id,
                    Lease.user_id == user_id,
                )
            )
        )
    return bool(gone)


def expire_leases(engine: Engine, now: datetime | None = None) -> int:
    """Delete expired leases (housekeeping: expired leases are claimable anyway).

    Args:
        engine: the database.
        now: the clock; default now.

    Returns:
        How many leases were deleted.
    """
    with write_session(engine) as session:
        return affected_rows(
            session.execute(delete(Lease).where(Lease.expires_at <= (now or utcnow())))
        )
