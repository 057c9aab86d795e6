"""Soak: 20 annotator processes claim and label one overlap-2 campaign; check and time it.

Usage:
    .venv/bin/python bench/soak.py [--works 600] [--processes 20] [--engine sqlite|pg|both]

PostgreSQL runs need LABELING_BENCH_PG_URL (e.g. postgresql+psycopg://postgres@127.0.0.1/soak);
a fresh database named after it is created for the run and dropped afterwards.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

import argparse  # noqa: E402
import multiprocessing as mp  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from collections import defaultdict  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

from sqlalchemy import create_engine, func, select, text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from db.engine import make_engine, read_session, upgrade  # noqa: E402
from db.models import CampaignItem, Label, Lease  # noqa: E402
from labeling.review.campaigns import create_campaign  # noqa: E402
from tests.factories import add_user, add_works  # noqa: E402

OVERLAP = 2
STALL_SECONDS = 60  # an annotator waiting this long with items still open: a failure

# One submission as a worker logged it:
# (work_id, user_id, t_claim_start, t_claimed, t_submit_start, t_submitted, label_id,
#  submission_id); the lease is surely held from t_claimed to t_submit_start.
Event = tuple[str, int, float, float, float, float, int, str]


@dataclass
class SoakResult:
    """What one soak run did, how fast, and every violated invariant."""

    engine: str
    works: int
    processes: int
    labels: int
    seconds: float
    claim_latencies: list[float] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    @property
    def labels_per_second(self) -> float:
        """Submitted labels per wall-clock second (all workers together)."""
        return self.labels / self.seconds if self.seconds else 0.0

    def claim_ms(self, q: float) -> float:
        """Claim latency quantile q (0..1) in milliseconds."""
        if not self.claim_latencies:
            return 0.0
        ordered = sorted(self.claim_latencies)
        return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def line(self) -> str:
        """A one-line summary of the figures."""
        return (
            f"{self.engine}: {self.processes} processes, {self.works} works, overlap {OVERLAP}: "
            f"{self.labels} labels in {self.seconds:.1f} s = {self.labels_per_second:.0f} "
            f"labels/s; claim median {self.claim_ms(0.5):.1f} ms, p95 {self.claim_ms(0.95):.1f} "
            f"ms, max {self.claim_ms(1.0):.1f} ms; violations {len(self.violations)}"
        )


def warm_up(seconds: float) -> int:
    """Import what an annotator needs, then hold this worker so the others start too."""
    import labeling.review.labels  # noqa: F401
    import labeling.review.queue  # noqa: F401
    import labeling.schema  # noqa: F401

    time.sleep(seconds)
    return os.getpid()


def annotator(url: str, campaign_id: int, user_id: int, seed: int, start: float) -> dict:
    """One simulated annotator: claim, read briefly, submit, until the queue is empty."""
    from labeling.review.campaigns import campaign_progress
    from labeling.review.labels import LabelSubmission, submit_label
    from labeling.review.queue import claim_next
    from labeling.schema import load_schema
    from labeling.settings import DEFAULT_SCHEMA
    from tests.factories import answers_for

    engine = make_engine(url)
    schema = load_schema(DEFAULT_SCHEMA)
    rng = random.Random(seed)
    events: list[Event] = []
    errors: list[str] = []
    time.sleep(max(0.0, start - time.time()))  # start together: maximum contention
    waiting_since: float | None = None
    while True:
        try:
            t0 = time.time()
            claim = claim_next(engine, campaign_id, user_id)
            t1 = time.time()
            if claim is None:
                # Nothing for this user now; a work leased to someone else may still need a
                # second label after their submit, so stop only once every item has its
                # labels. Stopping once no lease was out raced with that submit: it could
                # reopen a work between this claim and the check, and every annotator who
                # could take it had stopped (CI, one PostgreSQL run: 39 labels of 40).
                if campaign_progress(engine, campaign_id)["remaining"]:
                    waiting_since = waiting_since or t0
                    if time.time() - waiting_since > STALL_SECONDS:
                        errors.append(f"user {user_id}: nothing to claim for {STALL_SECONDS} s "
                                      "while items still need labels")  # fmt: skip
                        break
                    time.sleep(0.01)
                    continue
                break
            waiting_since = None
            time.sleep(rng.uniform(0, 0.005))  # "reading" the work
            sid = f"soak-{user_id}-{claim.work_id}"
            t2 = time.time()
            res = submit_label(engine, LabelSubmission(
                campaign_id=campaign_id, work_id=claim.work_id, user_id=user_id,
                answers=answers_for(schema, rng.randrange(3)), schema_hash=schema.hash,
                scores_visible=True, model_version="soak", time_on_item_ms=1, submission_id=sid,
            ), schema=schema)  # fmt: skip
            events.append((claim.work_id, user_id, t0, t1, t2, time.time(), res.label_id, sid))
        except Exception as exc:  # noqa: BLE001 - every error, "database is locked" included
            errors.append(f"user {user_id}: {type(exc).__name__}: {exc}")
            break
    engine.dispose()
    return {"events": events, "errors": errors}


def check(url: str, works: int, events: list[Event], errors: list[str]) -> list[str]:
    """Every invariant of the soak that does not hold, as readable lines."""
    bad = list(errors)
    by_work: dict[str, list[Event]] = defaultdict(list)
    for ev in events:
        by_work[ev[0]].append(ev)
    for work_id, evs in by_work.items():
        if len(evs) > OVERLAP:
            bad.append(f"{work_id}: {len(evs)} labels submitted (> {OVERLAP})")
        users = [e[1] for e in evs]
        if len(users) != len(set(users)):
            bad.append(f"{work_id}: one annotator labelled it twice")
        evs = sorted(evs, key=lambda e: e[3])
        for before, after in zip(evs, evs[1:], strict=False):
            # a lease is surely held from the claim's return to the submit's start; two
            # such intervals of different annotators must not overlap
            if before[1] != after[1] and after[3] < before[4]:
                bad.append(f"{work_id}: leased to {before[1]} and {after[1]} at once")
    engine = make_engine(url)
    try:
        with read_session(engine) as session:
            labels = session.execute(
                select(Label.id, Label.work_id, Label.user_id, Label.submission_id)
            ).all()
            items = session.execute(select(CampaignItem.work_id, CampaignItem.n_labels)).all()
            leases = session.execute(select(func.count()).select_from(Lease)).scalar_one()
    finally:
        engine.dispose()
    in_db: dict[str, int] = defaultdict(int)
    for lab in labels:
        in_db[lab.submission_id] += 1
    for ev in events:
        if in_db.get(ev[7], 0) != 1:
            bad.append(f"submission {ev[7]} is in the database {in_db.get(ev[7], 0)} times")
    submitted = {ev[7] for ev in events}
    extra = [lab.submission_id for lab in labels if lab.submission_id not in submitted]
    if extra:
        bad.append(f"{len(extra)} labels in the database nobody submitted: {extra[:5]}")
    pairs = [(lab.work_id, lab.user_id) for lab in labels]
    if len(pairs) != len(set(pairs)):
        bad.append("the database holds two labels by one annotator for one work")
    per_work: dict[str, int] = defaultdict(int)
    for lab in labels:
        per_work[lab.work_id] += 1
    over = [w for w, n in per_work.items() if n > OVERLAP]
    if over:
        bad.append(f"works with more than {OVERLAP} labels in the database: {over[:5]}")
    if len(items) != works or any(it.n_labels != OVERLAP for it in items):
        short = [it.work_id for it in items if it.n_labels != OVERLAP]
        bad.append(f"{len(short)} of {len(items)} items without exactly {OVERLAP} labels")
    if len(labels) != works * OVERLAP:
        bad.append(f"{len(labels)} labels in the database, expected {works * OVERLAP}")
    if leases:
        bad.append(f"{leases} leases left behind")
    return bad


def run_soak(url: str, *, works: int, processes: int = 20, name: str = "") -> SoakResult:
    """Seed `works` works and an overlap-2 campaign on a migrated `url`, run the soak, check."""
    engine = make_engine(url)
    add_works(engine, works, prefix="S")
    camp = create_campaign(engine, name="soak", overlap=OVERLAP)
    users = [add_user(engine, f"soak{i:02d}") for i in range(processes)]
    engine.dispose()
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(processes, mp_context=ctx) as pool:
        # spawn and import in every process first, so start-up is not part of the timing
        pids = set(pool.map(warm_up, [1.0] * processes))
        if len(pids) < processes:  # a slow spawn: give every process its warm-up
            pids |= set(pool.map(warm_up, [2.0] * processes))
        start = time.time() + 1.0
        futures = [
            pool.submit(annotator, url, camp.id, uid, i, start) for i, uid in enumerate(users)
        ]
        results = [f.result(timeout=600) for f in futures]
    events = [e for r in results for e in r["events"]]
    errors = [e for r in results for e in r["errors"]]
    seconds = (max(e[5] for e in events) - start) if events else 0.0
    return SoakResult(
        engine=name or make_url(url).get_backend_name(),
        works=works,
        processes=processes,
        labels=len(events),
        seconds=seconds,
        claim_latencies=[e[3] - e[2] for e in events],
        violations=check(url, works, events, errors),
    )


@contextmanager
def sqlite_database() -> Iterator[str]:
    """A fresh migrated SQLite file in a temporary directory."""
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        url = f"sqlite:///{tmp}/soak.db"
        engine = make_engine(url)
        upgrade(engine)
        engine.dispose()
        yield url


@contextmanager
def pg_database(base_url: str) -> Iterator[str]:
    """A fresh migrated PostgreSQL database next to `base_url`, dropped afterwards."""
    base = make_url(base_url)
    name = f"{base.database}_soak_{uuid.uuid4().hex[:8]}"
    admin = create_engine(base.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = base.set(database=name).render_as_string(hide_password=False)
    try:
        engine = make_engine(url)
        upgrade(engine)
        engine.dispose()
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def main(argv: list[str] | None = None) -> int:
    """Run the soak on the chosen engines and print the figures; 1 if anything failed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--works", type=int, default=600)
    ap.add_argument("--processes", type=int, default=20)
    ap.add_argument("--engine", choices=["sqlite", "pg", "both"], default="both")
    args = ap.parse_args(argv)
    pg_url = os.environ.get("LABELING_BENCH_PG_URL")
    engines = ["sqlite", "pg"] if args.engine == "both" else [args.engine]
    failed = False
    for eng in engines:
        if eng == "pg" and not pg_url:
            print("pg: skipped (set LABELING_BENCH_PG_URL)")
            failed = failed or args.engine == "pg"
            continue
        db = sqlite_database() if eng == "sqlite" else pg_database(pg_url or "")
        with db as url:
            res = run_soak(url, works=args.works, processes=args.processes, name=eng)
        print(res.line(), flush=True)
        if res.violations:
            failed = True
            for v in res.violations[:20]:
                print("  VIOLATION:", v)
        lat = sorted(res.claim_latencies)
        if lat:
            print(f"  claim mean {1000 * statistics.fmean(lat):.1f} ms over {len(lat)} claims")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
