"""The queue: claims, leases, expiry and takeover, overlap, skips, gold mixing (both DBs)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError

from db.engine import read_session
from db.models import CampaignItem, Lease, utcnow
from labeling.review import queue
from labeling.review.campaigns import create_campaign, set_active
from labeling.review.labels import LabelSubmission, LeaseError, submit_label
from labeling.review.queue import (
    QueueError,
    claim_next,
    expire_leases,
    release_lease,
    renew_lease,
    upcoming,
    upcoming_work_ids,
)
from labeling.schema import Schema
from labeling.vocabulary import STATUS_VALIDATED
from tests.factories import add_user, add_works, answers_for, insert_works, work_row


def submit(engine: Engine, schema: Schema, cid: int, wid: str, uid: int, **kw: Any) -> Any:
    """Submit a valid label (or a skip with skipped=True)."""
    args: dict[str, Any] = {
        "answers": answers_for(schema, kw.pop("variant", 0)),
        "schema_hash": schema.hash,
        "scores_visible": True,
        "model_version": "m",
        "time_on_item_ms": 1000,
        "submission_id": f"{cid}:{wid}:{uid}:{kw.get('skipped', False)}",
    }
    if kw.get("skipped"):
        args["skip_reason"] = "no_abstract"
    args.update(kw)
    return submit_label(
        engine,
        LabelSubmission(
            campaign_id=cid,
            work_id=wid,
            user_id=uid,
            **args,
        ),
        schema=schema,
    )


def _leases(engine: Engine) -> list[tuple[str, int]]:
    """All leases as (work, user)."""
    with read_session(engine) as session:
        return [
            tuple(r)
            for r in session.execute(select(Lease.work_id, Lease.user_id).order_by(Lease.work_id))
        ]


def test_claim_order_reload_and_distinct_users(engine: Engine) -> None:
    """Claims follow the queue; a reload returns the held lease, renewed."""
    add_works(engine, 5)
    a, b = add_user(engine, "a"), add_user(engine, "b")
    camp = create_campaign(engine, name="c", lease_seconds=600)
    t0 = utcnow()
    first = claim_next(engine, camp.id, a, now=t0)
    assert (first.work_id, first.position, first.is_gold, first.resumed) == (
        "W0001",
        1,
        False,
        False,
    )
    assert first.expires_at == t0 + timedelta(seconds=600)
    again = claim_next(engine, camp.id, a, now=t0 + timedelta(seconds=30))
    assert (again.work_id, again.resumed) == ("W0001", True)
    assert again.expires_at == t0 + timedelta(seconds=630)  # renewed
    other = claim_next(engine, camp.id, b, now=t0)
    assert other.work_id == "W0002"
    assert _leases(engine) == [("W0001", a), ("W0002", b)]
    assert upcoming(engine, camp.id, a, 2, now=t0) == ["W0003", "W0004"]
    assert upcoming_work_ids(engine, camp.id, 3, now=t0) == ["W0003", "W0004", "W0005"]
    assert upcoming_work_ids(engine, 999) == []


def test_overlap_skips_and_exhaustion(engine: Engine, schema: Schema) -> None:
    """Overlap, skips as seen, done items and an exhausted queue."""
    add_works(engine, 3)
    a, b, c = (add_user(engine, n) for n in "abc")
    camp = create_campaign(engine, name="c", overlap=2)
    w1 = claim_next(engine, camp.id, a).work_id
    submit(engine, schema, camp.id, w1, a)
    assert claim_next(engine, camp.id, b).work_id == w1  # needs a second label
    assert claim_next(engine, camp.id, a).work_id == "W0002"  # never a work a has labelled
    submit(engine, schema, camp.id, w1, b)
    submit(engine, schema, camp.id, "W0002", a, skipped=True)
    with read_session(engine) as session:
        rows = dict(session.execute(select(CampaignItem.work_id, CampaignItem.n_labels)).all())
        done = dict(session.execute(select(CampaignItem.work_id, CampaignItem.done)).all())
    assert rows == {"W0001": 2, "W0002": 0, "W0003": 0}  # a skip does not count
    assert done == {"W0001": True, "W0002": False, "W0003": False}
    assert claim_next(engine, camp.id, a).work_id == "W0003"  # skipped W0002 is seen
    assert claim_next(engine, camp.id, c).work_id == "W0002"  # w1 is done
    submit(engine, schema, camp.id, "W0003", a)
    assert claim_next(engine, camp.id, a) is None


def test_expired_lease_is_taken_over_and_late_submit_rejected(
    engine: Engine, schema: Schema
) -> None:
    """An expired lease goes to the next claimer; the late submit is refused."""
    add_works(engine, 2)
    a, b = add_user(engine, "a"), add_user(engine, "b")
    camp = create_campaign(engine, name="c", lease_seconds=60)
    t0 = utcnow()
    assert claim_next(engine, camp.id, a, now=t0).work_id == "W0001"
    assert claim_next(engine, camp.id, b, now=t0 + timedelta(seconds=59)).work_id == "W0002"
    release_lease(engine, camp.id, b, "W0002")
    taken = claim_next(engine, camp.id, b, now=t0 + timedelta(seconds=61))
    assert taken.work_id == "W0001"
    assert _leases(engine) == [("W0001", b)]
    with pytest.raises(LeaseError, match="given to another annotator"):
        submit(engine, schema, camp.id, "W0001", a)
    assert submit(engine, schema, camp.id, "W0001", b).created


def test_own_expired_lease_can_still_be_submitted_or_reclaimed(
    engine: Engine, schema: Schema
) -> None:
    """An expired lease nobody took is still the holder's."""
    add_works(engine, 2)
    a = add_user(engine, "a")
    camp = create_campaign(engine, name="c", lease_seconds=60)
    t0 = utcnow()
    claim_next(engine, camp.id, a, now=t0)
    later = claim_next(engine, camp.id, a, now=t0 + timedelta(seconds=120))
    assert (later.work_id, later.resumed) == ("W0001", False)
    assert submit(engine, schema, camp.id, "W0001", a).version == 1


def test_renew_release_expire(engine: Engine, schema: Schema) -> None:
    """Renewing, releasing and expiring leases."""
    add_works(engine, 3)
    a, b = add_user(engine, "a"), add_user(engine, "b")
    camp = create_campaign(engine, name="c", lease_seconds=100)
    t0 = utcnow()
    claim_next(engine, camp.id, a, now=t0)
    claim_next(engine, camp.id, b, now=t0)
    assert renew_lease(engine, camp.id, a, "W0001", now=t0 + timedelta(seconds=50)) == (
        t0 + timedelta(seconds=150)
    )
    assert renew_lease(engine, camp.id, b, "W0001") is None  # not b's lease
    assert release_lease(engine, camp.id, b, "W0002")
    assert not release_lease(engine, camp.id, b, "W0002")
    with pytest.raises(LeaseError, match="was released"):
        submit(engine, schema, camp.id, "W0002", b)
    assert expire_leases(engine, now=t0 + timedelta(seconds=120)) == 0
    assert expire_leases(engine, now=t0 + timedelta(seconds=151)) == 1
    assert _leases(engine) == []
    with pytest.raises(QueueError):
        renew_lease(engine, 999, a, "W0001")


def test_closed_and_unknown_campaigns(engine: Engine) -> None:
    """A closed campaign serves nothing; an unknown one is an error."""
    add_works(engine, 1)
    a = add_user(engine, "a")
    camp = create_campaign(engine, name="c")
    set_active(engine, camp.id, False)
    assert claim_next(engine, camp.id, a) is None
    with pytest.raises(QueueError, match="no campaign"):
        claim_next(engine, 999, a)
    assert upcoming(engine, 999, a) == []


def test_gold_mixing(engine: Engine, schema: Schema) -> None:
    """With gold_rate 1 gold works come first, added as gold items, for every annotator."""
    add_works(engine, 4)
    insert_works(
        engine,
        [
            work_row(f"G{i}", score_opus=0.01, score_gpt=0.0, is_gold=True, status=STATUS_VALIDATED)
            for i in range(2)
        ],
    )
    a, b = add_user(engine, "a"), add_user(engine, "b")
    camp = create_campaign(engine, name="c", gold_rate=1.0, filter={"score_max": [0.1, 1]})
    assert camp.n_items == 4  # gold works are not in the queue until offered
    seen = []
    for _ in range(2):
        claim = claim_next(engine, camp.id, a)
        assert claim.is_gold and claim.work_id.startswith("G")
        seen.append(claim.work_id)
        submit(engine, schema, camp.id, claim.work_id, a)
    assert sorted(seen) == ["G0", "G1"]
    # once every gold work is labelled by a, a gets regular work
    assert not claim_next(engine, camp.id, a).is_gold
    # b gets the gold works too: they are checks, labelled by everyone
    assert claim_next(engine, camp.id, b).is_gold
    with read_session(engine) as session:
        gold = session.execute(
            select(CampaignItem.work_id, CampaignItem.is_gold, CampaignItem.position)
            .where(CampaignItem.is_gold)
            .order_by(CampaignItem.work_id)
        ).all()
    assert [(g.work_id, g.is_gold) for g in gold] == [("G0", True), ("G1", True)]
    assert {g.position for g in gold} == {5, 6}


def test_gold_rate_is_a_fraction(engine: Engine, schema: Schema) -> None:
    """A gold rate of 0.25 mixes in roughly a quarter of gold works."""
    add_works(engine, 60)
    insert_works(
        engine,
        [
            work_row(
                f"G{i:02d}", score_opus=0.0, score_gpt=0.0, is_gold=True, status=STATUS_VALIDATED
            )
            for i in range(40)
        ],
    )
    a = add_user(engine, "a")
    camp = create_campaign(engine, name="c", gold_rate=0.25, filter={"score_max": [0.01, 1]})
    golds = 0
    for _ in range(60):
        claim = claim_next(engine, camp.id, a)
        golds += claim.is_gold
        submit(engine, schema, camp.id, claim.work_id, a)
    assert 5 <= golds <= 25


def test_claim_retries_when_the_lease_insert_loses_a_race(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lost lease race is retried, and gives up after CLAIM_ATTEMPTS."""
    add_works(engine, 2)
    a = add_user(engine, "a")
    camp = create_campaign(engine, name="c")
    real = queue._take_lease
    calls = {"n": 0}

    def flaky(*args: Any) -> bool:
        """Fail the first lease insert as a concurrent claimer would."""
        calls["n"] += 1
        if calls["n"] == 1:
            raise IntegrityError("INSERT INTO leases", {}, Exception("duplicate key"))
        if calls["n"] == 2:
            return False  # the work was leased by someone else meanwhile
        return real(*args)

    monkeypatch.setattr(queue, "_take_lease", flaky)
    assert claim_next(engine, camp.id, a).work_id == "W0001"
    assert calls["n"] == 3
    monkeypatch.setattr(
        queue,
        "_take_lease",
        lambda *a: (_ for _ in ()).throw(IntegrityError("INSERT", {}, Exception("always"))),
    )
    with pytest.raises(QueueError, match="could not claim"):
        claim_next(engine, camp.id, add_user(engine, "b"))


def test_candidate_query_uses_the_queue_index(sqlite_engine: Engine) -> None:
    """SQLite walks ix_campaign_items_queue in order, with no sort."""
    add_works(sqlite_engine, 3)
    camp = create_campaign(sqlite_engine, name="c")
    compiled = queue._NEXT.compile(sqlite_engine)
    params = {"cid": camp.id, "uid": 1, "overlap": 1, "now": "2030-01-01 00:00:00.000000"}
    values = compiled.construct_params(params)
    with sqlite_engine.connect() as conn:
        plan = conn.exec_driver_sql(
            f"EXPLAIN QUERY PLAN {compiled}", tuple(values[k] for k in compiled.positiontup)
        ).all()
    text = " ".join(str(r[-1]) for r in plan)
    assert "ix_campaign_items_queue" in text
    assert "TEMP B-TREE" not in text  # no sort: the index gives the order
