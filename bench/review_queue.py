"""Benchmark of the review queue at 1,000,000 works: claim and submit latency, 1 and 8 annotators.

Usage:
    .venv/bin/python bench/review_queue.py [--works 1000000] [--ops 400] [--think-ms 0]
        [--annotators 8] [--rebuild] [--only sqlite|pg] [--out DIR]

(Named review_queue, not queue: run as a script, bench/ is first on sys.path, and a
bench/queue.py would shadow the standard library's queue module that multiprocessing needs.)

Builds (once, reused) a SQLite file under --out (default bench/out/) and, when
LABELING_BENCH_PG_URL is set (e.g. postgresql+psycopg://postgres@127.0.0.1:5432/lab_bench), a
PostgreSQL database, with works inserted in bulk through SQLAlchemy Core and a skewed,
realistic score distribution. Then, per engine: creates a score_max campaign with overlap 1
(timed: the set-based INSERT ... SELECT), measures claim and submit latency with 1 and with 8
(--annotators) concurrent annotator processes, marks 90% of the top 100,000 items done, and
measures again.
Targets: claim p95 under 5 ms (1 annotator) and under 20 ms (8 annotators), no errors.
"""

from __future__ import annotations

import os
import sys

# Run as a script, this file's directory is sys.path[0]: the checkout's root takes its place,
# so that `labeling`, `db` and `tests` import from it and no file in bench/ shadows a module.
_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or ".") == _HERE:
    sys.path[0] = os.path.dirname(_HERE)

import argparse  # noqa: E402
import hashlib  # noqa: E402
import multiprocessing as mp  # noqa: E402
import random  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from sqlalchemy import Engine, func, insert, select, text, update  # noqa: E402

from db.engine import is_sqlite, make_engine, read_session, upgrade, write_session  # noqa: E402
from db.models import Campaign, CampaignItem, User, Work, utcnow  # noqa: E402
from db.sqlite_files import SIDE_SUFFIXES  # noqa: E402

OUT = Path(_HERE) / "out"
CAMPAIGN = "bench-score-max"


def build(url: str, n: int, rebuild: bool) -> Engine:
    """The database at url with n works (built once; --rebuild starts again)."""
    engine = make_engine(url)
    if rebuild:
        if is_sqlite(engine):
            engine.dispose()
            for suffix in ("", *SIDE_SUFFIXES):
                Path(engine.url.database + suffix).unlink(missing_ok=True)
            engine = make_engine(url)
        else:
            with engine.begin() as conn:
                conn.execute(text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
    upgrade(engine)
    with read_session(engine) as session:
        have = session.execute(select(func.count()).select_from(Work)).scalar_one()
    if have >= n:
        return engine
    print(f"  building {n:,} works ...", flush=True)
    t0 = time.perf_counter()
    rng = np.random.default_rng(0)
    opus = rng.beta(0.6, 5.0, n)  # most works score low; a long tail of likely positives
    gpt = np.clip(opus + rng.normal(0, 0.08, n), 0, 1)
    disagreement = rng.beta(1.0, 6.0, n)
    uncertainty = 1 - 2 * np.abs(np.maximum(opus, gpt) - 0.5)
    years = rng.integers(1990, 2026, n)
    now = utcnow()
    chunk = 20_000
    for start in range(have, n, chunk):
        rows = []
        for i in range(start, min(n, start + chunk)):
            wid = f"W{4_000_000_000 + i}"
            o, g = round(float(opus[i]), 4), round(float(gpt[i]), 4)
            rows.append(
                {
                    "id": wid,
                    "title": f"Synthetic work {i}",
                    "year": int(years[i]),
                    "field": ("Medicine", "Social Sciences", "Physics", "Biology")[i % 4],
                    "record": {"id": wid},
                    "record_hash": hashlib.md5(wid.encode()).hexdigest(),
                    "score_opus": o,
                    "score_gpt": g,
                    "score_max": max(o, g),
                    "score_spread": abs(o - g),
                    "teacher_disagreement": float(disagreement[i]),
                    "threshold_uncertainty": float(uncertainty[i]),
                    "model_version": "bench-v0",
                    "status": "machine_predicted_unvalidated",
                    "is_gold": False,
                    "imported_at": now,
                    "updated_at": now,
                }
            )
        with write_session(engine) as session:
            session.execute(insert(Work), rows)
    if not is_sqlite(engine):
        with engine.begin() as conn:
            conn.execute(text("ANALYZE"))
    print(f"  built in {time.perf_counter() - t0:.1f} s", flush=True)
    return engine


def setup_campaign(engine: Engine, annotators: int) -> tuple[int, list[int]]:
    """A fresh score_max campaign over every work, and `annotators` annotators."""
    from labeling.review.campaigns import create_campaign

    with write_session(engine) as session:
        old = session.execute(select(Campaign.id).where(Campaign.name == CAMPAIGN)).scalar()
        if old is not None:
            for table in ("status_events", "labels", "leases", "campaign_items"):
                session.execute(text(f"DELETE FROM {table} WHERE campaign_id = :c"), {"c": old})
            session.execute(text("DELETE FROM campaigns WHERE id = :c"), {"c": old})
            session.execute(
                text(
                    "UPDATE works SET status = 'machine_predicted_unvalidated', "
                    "final_answers = NULL, validated_via = NULL "
                    "WHERE status <> 'machine_predicted_unvalidated'"
                )
            )
        names = [f"bench{i}" for i in range(annotators)]
        have = set(session.execute(select(User.name).where(User.name.in_(names))).scalars())
        for name in names:
            if name not in have:
                session.add(User(name=name, role="annotator", active=True, failed_logins=0))
    t0 = time.perf_counter()
    camp = create_campaign(engine, name=CAMPAIGN, strategy="score_max", overlap=1)
    print(
        f"  create_campaign (INSERT ... SELECT of {camp.n_items:,} items): "
        f"{time.perf_counter() - t0:.1f} s",
        flush=True,
    )
    if not is_sqlite(engine):
        with engine.begin() as conn:
            conn.execute(text("ANALYZE campaign_items"))
    with read_session(engine) as session:
        users = list(
            session.execute(
                select(User.id).where(User.name.like("bench%")).order_by(User.id)
            ).scalars()
        )
    return camp.id, users


def worker(
    url: str, campaign_id: int, user_id: int, ops: int, think_ms: float, start: float
) -> dict:
    """Claim and submit `ops` times; return the latencies in ms and any errors."""
    from labeling.review.labels import LabelSubmission, submit_label
    from labeling.review.queue import claim_next
    from labeling.schema import load_schema
    from labeling.settings import DEFAULT_SCHEMA

    engine = make_engine(url)
    schema = load_schema(DEFAULT_SCHEMA)
    answers = {q.name: [] if q.kind == "multi" else q.labels[0] for q in schema.questions}
    rng = random.Random(user_id)
    claims, submits, errors = [], [], []
    claim_next(engine, campaign_id, user_id)  # warm the pool and the page cache
    time.sleep(max(0.0, start - time.time()))
    began = time.perf_counter()
    for i in range(ops):
        try:
            t0 = time.perf_counter()
            claim = claim_next(engine, campaign_id, user_id)
            t1 = time.perf_counter()
            if claim is None:
                break
            if think_ms:
                time.sleep(rng.uniform(0, 2 * think_ms) / 1000)
            t2 = time.perf_counter()
            submit_label(
                engine,
                LabelSubmission(
                    campaign_id=campaign_id,
                    work_id=claim.work_id,
                    user_id=user_id,
                    answers=answers,
                    schema_hash=schema.hash,
                    scores_visible=True,
                    model_version="bench-v0",
                    time_on_item_ms=1,
                    submission_id=f"b{campaign_id}:{user_id}:{claim.work_id}",
                ),
                schema=schema,
            )
            t3 = time.perf_counter()
            claims.append((t1 - t0) * 1000)
            submits.append((t3 - t2) * 1000)
        except Exception as exc:  # noqa: BLE001 - reported, not hidden
            errors.append(f"{i}: {type(exc).__name__}: {exc}")
    wall = time.perf_counter() - began
    engine.dispose()
    return {"claims": claims, "submits": submits, "errors": errors, "wall": wall}


def phase(
    url: str, campaign_id: int, users: list[int], procs: int, ops: int, think_ms: float
) -> dict:
    """Run `procs` annotator processes at once and pool their latencies."""
    ctx = mp.get_context("spawn")
    start = time.time() + 2.0 + 0.3 * procs
    with ctx.Pool(procs) as pool:
        results = pool.starmap(
            worker, [(url, campaign_id, users[p], ops, think_ms, start) for p in range(procs)]
        )
    wall = max(r["wall"] for r in results)
    claims = np.array([x for r in results for x in r["claims"]])
    submits = np.array([x for r in results for x in r["submits"]])
    errors = [e for r in results for e in r["errors"]]

    def stats(a: np.ndarray) -> str:
        """Median, p95, p99 and max of latencies in ms."""
        if not len(a):
            return "n=0"
        return (
            f"median {np.median(a):6.2f} ms  p95 {np.percentile(a, 95):6.2f} ms  "
            f"p99 {np.percentile(a, 99):7.2f} ms  max {a.max():7.2f} ms"
        )

    return {
        "n": len(claims),
        "per_s": len(claims) / wall,
        "claim": stats(claims),
        "submit": stats(submits),
        "claim_p95": float(np.percentile(claims, 95)) if len(claims) else float("nan"),
        "errors": errors,
    }


def mark_top_done(engine: Engine, campaign_id: int, top: int = 100_000) -> None:
    """Mark 90% of the top `top` items done (every position not divisible by 10)."""
    with write_session(engine) as session:
        session.execute(
            update(CampaignItem)
            .where(
                CampaignItem.campaign_id == campaign_id,
                CampaignItem.position <= top,
                CampaignItem.position % 10 != 0,
            )
            .values(done=True, n_labels=1)
        )
    if not is_sqlite(engine):
        with engine.begin() as conn:
            conn.execute(text("ANALYZE campaign_items"))


def explain(engine: Engine, campaign_id: int, user_id: int) -> str:
    """The plan of the claim's candidate query."""
    from labeling.review.queue import _NEXT

    now = utcnow()
    values = {
        "cid": campaign_id,
        "uid": user_id,
        "overlap": 1,
        "now": now.strftime("%Y-%m-%d %H:%M:%S.%f") if is_sqlite(engine) else now,
    }
    compiled = _NEXT.compile(engine)
    params: Any = compiled.construct_params(values)
    if compiled.positiontup:
        params = tuple(params[k] for k in compiled.positiontup)
    prefix = "EXPLAIN QUERY PLAN " if is_sqlite(engine) else "EXPLAIN "
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(prefix + str(compiled), params).all()
    return "\n".join("    " + str(r[-1]) for r in rows)


def run(label: str, url: str, args: argparse.Namespace) -> bool:
    """All phases on one engine; True when every target is met."""
    print(f"\n== {label}: {url.split('@')[-1]}", flush=True)
    engine = build(url, args.works, args.rebuild)
    campaign_id, users = setup_campaign(engine, args.annotators)
    ok = True
    top = min(100_000, args.works)
    for stage in ("fresh queue", f"90% of the top {top:,} done"):
        if stage != "fresh queue":
            mark_top_done(engine, campaign_id)
        print(f"  -- {stage}; candidate query plan:\n{explain(engine, campaign_id, users[0])}")
        for procs, target in ((1, 5.0), (args.annotators, 20.0)):
            ops = args.ops if procs == 1 else max(50, args.ops // 2)
            if not is_sqlite(engine):  # what autovacuum does (it is off on some test servers)
                with engine.begin() as conn:
                    conn.execute(text("ANALYZE labels, leases, campaign_items, status_events"))
            load = os.getloadavg()[0]
            res = phase(url, campaign_id, users, procs, ops, args.think_ms)
            met = res["claim_p95"] < target and not res["errors"]
            ok &= met
            think = f", think {args.think_ms:g} ms" if args.think_ms else ""
            print(
                f"  {procs} annotator(s), {res['n']} claim+submit "
                f"({res['per_s']:.0f}/s{think}; load average {load:.1f} on "
                f"{os.cpu_count()} CPUs):"
            )
            print(
                f"    claim  {res['claim']}   target p95 < {target:g} ms: "
                f"{'met' if met else 'MISSED'}"
            )
            print(f"    submit {res['submit']}")
            print(f"    errors: {len(res['errors'])} {res['errors'][:3]}", flush=True)
    engine.dispose()
    return ok


def main() -> None:
    """Parse arguments and run the benchmark on SQLite (and PostgreSQL when configured)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--works", type=int, default=1_000_000)
    parser.add_argument("--ops", type=int, default=400, help="claim+submit per annotator")
    parser.add_argument(
        "--think-ms",
        type=float,
        default=0.0,
        help="mean pause between claim and submit (0 = back to back)",
    )
    parser.add_argument(
        "--annotators", type=int, default=8, help="annotator processes of the concurrent phase"
    )
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--only", choices=("sqlite", "pg"), help="run on one engine only")
    parser.add_argument(
        "--out", type=Path, default=OUT, help="directory of the SQLite file (default bench/out/)"
    )
    args = parser.parse_args()
    if args.works < 1 or args.ops < 1 or args.annotators < 1:
        parser.error("--works >= 1, --ops >= 1 and --annotators >= 1")
    args.out.mkdir(parents=True, exist_ok=True)
    ok = True
    if args.only != "pg":
        ok &= run("SQLite", f"sqlite:///{args.out / f'queue_{args.works}.db'}", args)
    pg = os.environ.get("LABELING_BENCH_PG_URL")
    if pg and args.only != "sqlite":
        ok &= run("PostgreSQL", pg, args)
    elif not pg:
        print("\n(PostgreSQL skipped: set LABELING_BENCH_PG_URL)")
    print("\nall targets met" if ok else "\nsome targets MISSED")


if __name__ == "__main__":
    main()
