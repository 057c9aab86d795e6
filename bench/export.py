"""Benchmark of the gold-set export: 1,000,000 validated works to Parquet and to CSV.

Usage:
    .venv/bin/python bench/export.py [--works 1000000] [--rebuild] [--formats parquet,csv]
                                     [--repeat 3] [--pg postgresql+psycopg://...]
                                     [--processes N] [--drop-summaries]

Builds (once, reused) bench/out/export_<n>.db: n works carrying the seed record (full size,
about 3 KB of JSON each), all validated by a 2-label unanimous rule, and 2 labels per work,
bulk-inserted through db/bulk.py, then exported once so that the export stores its label
summaries (labeling/export/summaries.py), as any earlier export would have (--drop-summaries
times that first export). Each export then runs in a fresh child process so that its wall
time and memory are its own: the exporting process's peak RSS (ru_maxrss) and the peak of
the summed PSS of it and its worker processes, sampled every 20 ms. Targets: Parquet < 10 s,
CSV < 30 s, memory (the summed PSS) < 500 MB.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Run as a script, bench/ is sys.path[0]: the checkout's root goes first instead.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

import orjson  # noqa: E402
from sqlalchemy import Engine, delete, func, insert, select  # noqa: E402

from bench.tree_memory import TreeMemory  # noqa: E402
from db.bulk import bulk_insert  # noqa: E402
from db.engine import RawJSON, make_engine, upgrade, write_connection  # noqa: E402
from db.models import (  # noqa: E402
    Campaign,
    CampaignItem,
    Label,
    LabelSummary,
    User,
    Work,
    utcnow,
)
from db.sqlite_files import SIDE_SUFFIXES  # noqa: E402

OUT = HERE / "out"
SEED = HERE.parent / "tests" / "fixtures" / "seed_record.json"
BATCH = 20_000


def build(url: str, n: int, rebuild: bool) -> None:
    """The bench database with n validated works and 2 labels each (built once)."""
    path = url.removeprefix("sqlite:///")
    if rebuild and url.startswith("sqlite"):
        for suffix in ("", *SIDE_SUFFIXES):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    engine = make_engine(url)
    if rebuild and not url.startswith("sqlite"):
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP SCHEMA public CASCADE")
            conn.exec_driver_sql("CREATE SCHEMA public")
    upgrade(engine)
    with engine.connect() as conn:
        have = conn.execute(select(func.count()).select_from(Work)).scalar_one()
    if have >= n:
        with engine.connect() as conn:
            stamped = conn.execute(select(Work.machine_hash).limit(1)).scalar()
        if stamped is None:
            raise SystemExit(f"{path} predates stored machine columns: run with --rebuild")
        print(f"reusing {path} ({have} works)")
        summarise(engine)
        return
    if have:
        raise SystemExit(f"{path} holds {have} works: run with --rebuild")
    from labeling.frames.machine_columns import machine_digest, machine_hash, machine_plan
    from labeling.schema import load_schema
    from labeling.settings import DEFAULT_SCHEMA
    from tests.factories import answers_for

    schema = load_schema(DEFAULT_SCHEMA)
    seed = json.loads(SEED.read_text("utf-8"))
    template = orjson.dumps(seed).decode().replace(seed["id"], "@@ID@@")
    answers = RawJSON(orjson.dumps(answers_for(schema, 0)).decode())
    # What the frame importer stores beside each record (the id is not part of it).
    digest = machine_digest(machine_plan(schema), seed)
    started = time.perf_counter()
    now = utcnow()
    with write_connection(engine) as conn:
        a = conn.execute(
            insert(User).values(
                name="alice", role="annotator", created_at=now, failed_logins=0, active=True
            )
        ).inserted_primary_key[0]
        b = conn.execute(
            insert(User).values(
                name="bob", role="annotator", created_at=now, failed_logins=0, active=True
            )
        ).inserted_primary_key[0]
        cid = conn.execute(
            insert(Campaign).values(name="bench", strategy="manual", overlap=2, created_at=now)
        ).inserted_primary_key[0]
    via = f"rule:unanimous:k=2:c{cid}"
    mv = seed["prediction"]["model_version"]
    for start in range(0, n, BATCH):
        ids = [f"W{i:010d}" for i in range(start, min(n, start + BATCH))]
        works, items, labels = [], [], []
        for pos, wid in enumerate(ids, start=start + 1):
            text = template.replace("@@ID@@", wid)
            works.append({
                "id": wid, "doi": seed["doi"], "title": f"{seed['title']} #{pos}",
                "year": seed["year"], "record": RawJSON(text),
                "record_hash": hashlib.sha256(text.encode()).hexdigest(), "model_version": mv,
                "prediction_status": "machine_predicted_unvalidated", "status": "human_validated",
                "final_answers": answers, "validated_via": via, "is_gold": False,
                "machine": digest, "machine_hash": machine_hash(schema),
                "imported_at": now, "updated_at": now,
            })  # fmt: skip
            items.append({"campaign_id": cid, "work_id": wid, "position": pos, "n_labels": 2,
                          "done": True, "is_gold": False})  # fmt: skip
            for uid in (a, b):
                labels.append({
                    "campaign_id": cid, "work_id": wid, "user_id": uid, "version": 1,
                    "answers": answers, "skipped": False, "flagged": False, "model_version": mv,
                    "time_on_item_ms": 4200, "source": "app", "created_at": now,
                    "schema_hash": schema.hash, "scores_visible": True,
                })  # fmt: skip
        with write_connection(engine) as conn:
            bulk_insert(conn, Work.__table__, works)
            bulk_insert(conn, CampaignItem.__table__, items)
            bulk_insert(conn, Label.__table__, labels)
    if url.startswith("sqlite"):
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    else:  # autovacuum may be off: give the planner statistics
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE")
    print(f"built {path}: {n} works, {2 * n} labels in {time.perf_counter() - started:.1f} s")
    summarise(engine)
    engine.dispose()


def summarise(engine: Engine) -> None:
    """A first export, which stores the label summaries (when none are stored yet)."""
    from labeling.export.gold_set import export_gold
    from labeling.schema import load_schema
    from labeling.settings import DEFAULT_SCHEMA

    with engine.connect() as conn:
        if conn.execute(select(func.count()).select_from(LabelSummary)).scalar_one():
            return
    started = time.perf_counter()
    out = OUT / "warm-up.parquet"
    export_gold(engine, load_schema(DEFAULT_SCHEMA), out, fmt="parquet")
    out.unlink()
    Path(f"{out}.manifest.json").unlink()
    print(f"first export, storing the label summaries: {time.perf_counter() - started:.1f} s")


def run_one(url: str, fmt: str, out: Path, processes: int | None) -> None:
    """Child process: one export, then a JSON line with wall time, peak RSS and rows."""
    from labeling.export.gold_set import export_gold
    from labeling.schema import load_schema
    from labeling.settings import DEFAULT_SCHEMA

    engine = make_engine(url)
    schema = load_schema(DEFAULT_SCHEMA)
    sampler = TreeMemory()
    sampler.start()
    started = time.perf_counter()
    result = export_gold(engine, schema, out, fmt=fmt, processes=processes)
    wall = time.perf_counter() - started
    sampler.stop()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"format": fmt, "rows": result.row_count, "wall_s": round(wall, 2),
                      "peak_rss_mb": round(rss_mb, 1), "peak_total_pss_mb": sampler.peak_mb,
                      "bytes": out.stat().st_size, "sha256": result.sha256}))  # fmt: skip


def main() -> None:
    """Build the database, then time each format in its own process."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--works", type=int, default=1_000_000)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--formats", default="parquet,csv", help="comma-separated; '' = build only")
    ap.add_argument("--repeat", type=int, default=3, help="runs per format (median reported)")
    ap.add_argument(
        "--pg",
        help="a PostgreSQL URL to use instead of SQLite (its tables are dropped by --rebuild)",
    )
    ap.add_argument("--processes", type=int, help="worker processes (default: the export's own)")
    ap.add_argument("--drop-summaries", action="store_true",
                    help="delete the stored label summaries first, as in a database upgraded "
                    "from before them: the first run recomputes and stores them")  # fmt: skip
    ap.add_argument("--child", nargs=3, metavar=("URL", "FORMAT", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        run_one(args.child[0], args.child[1], Path(args.child[2]), args.processes)
        return
    OUT.mkdir(parents=True, exist_ok=True)
    db = args.pg or f"sqlite:///{OUT / f'export_{args.works}.db'}"
    build(db, args.works, args.rebuild)
    if args.drop_summaries:
        engine = make_engine(db)
        with write_connection(engine) as conn:
            conn.execute(delete(LabelSummary))
        engine.dispose()
        print("deleted the stored label summaries")
    targets = {"parquet": 10.0, "csv": 30.0, "jsonl": 30.0}
    for fmt in filter(None, args.formats.split(",")):
        out = OUT / f"gold_{args.works}.{fmt}"
        runs = []
        for _ in range(args.repeat):
            extra = [] if args.processes is None else ["--processes", str(args.processes)]
            proc = subprocess.run(
                [sys.executable, __file__, "--child", str(db), fmt, str(out), *extra],
                capture_output=True, text=True, check=False)  # fmt: skip
            if proc.returncode:
                print(proc.stderr, file=sys.stderr)
                raise SystemExit(f"{fmt} export failed")
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        wall = statistics.median(r["wall_s"] for r in runs)
        rss = max(r["peak_rss_mb"] for r in runs)
        pss = max(r["peak_total_pss_mb"] for r in runs)
        ok = wall < targets[fmt] and pss < 500
        walls = ", ".join(f"{r['wall_s']:.2f}" for r in runs)
        print(f"{fmt:8} {runs[0]['rows']} rows  median {wall:7.2f} s "
              f"(runs {walls})  peak RSS {rss:6.1f} MB, with workers (PSS) {pss:6.1f} MB"
              f"  {runs[0]['bytes'] / 1e6:8.1f} MB  target {targets[fmt]:.0f} s / 500 MB: "
              f"{'met' if ok else 'MISSED'}")  # fmt: skip


if __name__ == "__main__":
    main()
