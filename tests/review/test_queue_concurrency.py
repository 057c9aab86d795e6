"""Several real processes claim and submit from one database: no double lease, no overfill."""

from __future__ import annotations

import multiprocessing as mp
import random
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest
from sqlalchemy import func, select

from db.engine import make_engine, read_session
from db.models import CampaignItem, Label, Lease
from labeling.review.campaigns import create_campaign
from tests.factories import add_user, add_works

PROCESSES = 6
USERS_PER_PROCESS = 2
WORKS = 90
OVERLAP = 2


def _worker(url: str, campaign_id: int, user_ids: list[int], seed: int, start: float) -> dict:
    """Claim and submit until the queue is empty for every user of this process."""
    from labeling.review.labels import LabelSubmission, submit_label
    from labeling.review.queue import claim_next
    from labeling.schema import load_schema
    from labeling.settings import DEFAULT_SCHEMA
    from tests.factories import answers_for

    engine = make_engine(url)
    schema = load_schema(DEFAULT_SCHEMA)
    rng = random.Random(seed)
    events: list[tuple[str, int, float, float, bool, int]] = []
    errors: list[str] = []
    active = list(user_ids)
    time.sleep(max(0.0, start - time.time()))  # start together: maximum contention
    while active and not errors:
        for uid in list(active):
            try:
                claim = claim_next(engine, campaign_id, uid)
                if claim is None:
                    active.remove(uid)
                    continue
                t_claim = time.time()
                time.sleep(rng.uniform(0, 0.004))  # "reading" the work
                skip = rng.random() < 0.1
                t_submit = time.time()
                res = submit_label(
                    engine,
                    LabelSubmission(
                        campaign_id=campaign_id,
                        work_id=claim.work_id,
                        user_id=uid,
                        answers=answers_for(schema, rng.randrange(2)),
                        skipped=skip,
                        skip_reason="no_abstract" if skip else None,
                        schema_hash=schema.hash,
                        scores_visible=True,
                        model_version="m",
                        time_on_item_ms=1,
                        submission_id=f"{uid}:{claim.work_id}",
                    ),
                    schema=schema,
                )
                events.append((claim.work_id, uid, t_claim, t_submit, skip, res.label_id))
            except Exception as exc:  # noqa: BLE001 - every error is a test failure
                errors.append(f"user {uid}: {type(exc).__name__}: {exc}")
                break
    engine.dispose()
    return {"events": events, "errors": errors}


@pytest.mark.slow
def test_many_processes_share_one_queue(db_url: str) -> None:
    """6 processes x 2 annotators: no double lease, no duplicate, no overfill, no error."""
    engine = make_engine(db_url)
    add_works(engine, WORKS)
    camp = create_campaign(engine, name="race", overlap=OVERLAP)
    users = [add_user(engine, f"ann{i}") for i in range(PROCESSES * USERS_PER_PROCESS)]
    start = time.time() + 3.0
    ctx = mp.get_context("spawn")
    t0 = time.monotonic()
    with ProcessPoolExecutor(PROCESSES, mp_context=ctx) as pool:
        futures = [
            pool.submit(
                _worker,
                db_url,
                camp.id,
                users[p * USERS_PER_PROCESS : (p + 1) * USERS_PER_PROCESS],
                p,
                start,
            )
            for p in range(PROCESSES)
        ]
        results = [f.result(timeout=120) for f in futures]
    elapsed = time.monotonic() - t0
    errors = [e for r in results for e in r["errors"]]
    assert errors == []
    events = [e for r in results for e in r["events"]]

    # no work leased to two annotators at once: per work, claim..submit intervals are disjoint
    by_work: dict[str, list[Any]] = defaultdict(list)
    for event in events:
        by_work[event[0]].append(event)
    for work_id, evs in by_work.items():
        evs.sort(key=lambda e: e[2])
        for before, after in zip(evs, evs[1:], strict=False):
            assert before[3] < after[2], f"{work_id} held by {before[1]} and {after[1]} at once"
    # none labelled twice by one annotator, none with more than k labels
    pairs = [(e[0], e[1]) for e in events]
    assert len(pairs) == len(set(pairs))
    for work_id, evs in by_work.items():
        assert sum(not e[4] for e in evs) <= OVERLAP, work_id

    with read_session(engine) as session:
        labels = session.execute(
            select(Label.id, Label.work_id, Label.user_id, Label.skipped, Label.version)
        ).all()
        items = session.execute(
            select(CampaignItem.work_id, CampaignItem.n_labels, CampaignItem.done)
        ).all()
        leases = session.execute(select(func.count()).select_from(Lease)).scalar_one()
    # every submitted label present exactly once, and nothing else
    assert sorted(lab.id for lab in labels) == sorted(e[5] for e in events)
    assert all(lab.version == 1 for lab in labels)
    counted: dict[str, int] = defaultdict(int)
    for lab in labels:
        counted[lab.work_id] += not lab.skipped
    for item in items:
        assert item.n_labels == counted[item.work_id] <= OVERLAP
        assert item.done == (item.n_labels >= OVERLAP)
    assert sum(item.done for item in items) >= WORKS - 2  # skips may leave a rare work short
    assert leases == 0
    engine.dispose()
    assert elapsed < 60, f"took {elapsed:.1f}s"
