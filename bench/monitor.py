"""Benchmark of the Monitor page's data functions, warm and cold, on the demo and a large database.

Usage:
    .venv/bin/python bench/monitor.py [--works 1000000] [--labels 100000] [--warm 5]
        [--cold 3] [--only demo|large] [--rebuild]

Builds (once, cached under bench/out/, which git ignores) the demo database with two
annotators and 40 labels, and a large database of --works works with --labels labels from 10
annotators (bench/monitor_db.py). Each run times a scratch copy of it (bench/out/*.scratch.db),
because the warm views add labels. It times the data behind one view of the Monitor page, in
three situations:

- cold: the first view in a fresh Python process (imports excluded, timed apart), repeated
  --cold times;
- warm: what a lead waits for when the page is refreshed right after a new label came in,
  in a process that already showed the page: before each of the --warm views, one bench
  annotator submits one label (submit_label, the real path) that validates no work (a first
  label, or a second one that disagrees: the work becomes disputed); the status parts
  (humans vs machines, estimates, plan; labeling.reports.monitor.status_parts) are then
  reused, everything else is recomputed;
- recompute: the same after a label whose work changes the validated set (simulated by
  emptying the status parts' cache before the view): everything is recomputed, the labels
  read before are still kept (labeling.reports.monitor.label_cache: only new ones are read);
- uncached: every cache emptied (status parts, kept labels, the model accuracy's kept
  Dawid-Skene fits, the engine and so SQLite's page cache), in the warm process (what "warm"
  meant before).

Like the app (labeling.database), a process keeps one engine per database across views; the
labels are written through another engine, as by another annotator's process.

Prints medians, and the median of each part. Targets: under 1 s warm on the demo, under 2 s
on the large database. The page also caches the whole view on the label version
(labeling.reports.monitor.data.data_version): a view while no label, status or queue change
comes in costs the version check alone, printed apart.
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or ".") == _HERE:
    sys.path[0] = os.path.dirname(_HERE)

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

OUT = Path(_HERE) / "out"
TARGETS = {"demo": 1.0, "large": 2.0}


_ENGINES: dict[str, Any] = {}  # url -> the process's engine


def timed_view(
    url: str, campaign_id: int, recompute: bool = False, uncached: bool = False
) -> dict[str, float]:
    """Seconds of one view of the Monitor's data, in total and per part (recompute: with the
    status parts' cache emptied first; uncached: the kept labels and fits too, and a new
    engine)."""
    from db.engine import make_engine
    from labeling.reports.monitor import label_cache, model_accuracy
    from labeling.reports.monitor.data import data_version
    from labeling.reports.monitor.status_parts import CACHE
    from labeling.reports.monitor.view import live_view, statistics
    from labeling.schema import load_schema
    from labeling.settings import DEFAULT_SCHEMA

    if uncached and url in _ENGINES:
        _ENGINES.pop(url).dispose()
    # The app keeps one engine per database for the process (labeling.database), and with
    # it SQLite's page cache of its pooled connections: so does the bench, but uncached.
    engine = _ENGINES.get(url) or _ENGINES.setdefault(url, make_engine(url))
    schema = load_schema(DEFAULT_SCHEMA)
    if recompute or uncached:
        CACHE.clear()
    if uncached:
        label_cache.clear()
        model_accuracy.clear()
    out: dict[str, float] = {}
    t = time.perf_counter()
    data_version(engine, campaign_id)  # all a repeat view costs while no label comes in
    version = time.perf_counter() - t
    t0 = time.perf_counter()
    live = live_view(engine, campaign_id)
    out["live top"] = time.perf_counter() - t0
    statistics(engine, schema, live.campaign, timings=out)
    out["total"] = time.perf_counter() - t0
    out["(version check, not in total)"] = version
    return out


def add_label(url: str, campaign_id: int, i: int) -> str:
    """One bench annotator's label that validates no work: the truth on a work nobody labelled
    yet, or the others' answers with one binary answer turned on a labelled one. Returns the
    work's new status."""
    from sqlalchemy import select

    from bench.monitor_db import _truth
    from db.engine import make_engine, read_session, write_session
    from db.models import Label, User, Work
    from labeling.review.labels import LabelSubmission, submit_label
    from labeling.review.queue import claim_next
    from labeling.schema import load_schema
    from labeling.settings import DEFAULT_SCHEMA
    from labeling.vocabulary import STATUS_VALIDATED

    engine = make_engine(url)
    schema = load_schema(DEFAULT_SCHEMA)
    name = f"bench-{i % 50:02d}"  # a new annotator per label (each may claim any work)
    with write_session(engine) as session:
        user = session.execute(select(User).where(User.name == name)).scalar_one_or_none()
        if user is None:
            user = User(name=name, role="annotator", active=True, failed_logins=0)
            session.add(user)
            session.flush()
        uid = user.id
    claim = claim_next(engine, campaign_id, uid)
    if claim is None:
        raise SystemExit(f"bench: no work left to label in campaign {campaign_id}")
    with read_session(engine) as session:
        record = session.execute(select(Work.record).where(Work.id == claim.work_id)).scalar_one()
        other = session.execute(
            select(Label.answers)
            .where(
                Label.campaign_id == campaign_id,
                Label.work_id == claim.work_id,
                Label.skipped.is_(False),
            )
            .limit(1)
        ).scalar()
    answers = dict(other) if other else _truth(schema, record)
    if other:
        binary = next(q for q in schema.questions if q.kind == "binary")
        answers[binary.name] = "no" if answers.get(binary.name) == "yes" else "yes"
    result = submit_label(
        engine,
        LabelSubmission(
            campaign_id=campaign_id,
            work_id=claim.work_id,
            user_id=uid,
            answers=answers,
            schema_hash=schema.hash,
            scores_visible=True,
            model_version="bench",
            time_on_item_ms=30_000,
            submission_id=f"bench-monitor:{os.getpid()}:{i}:{time.time_ns()}",
        ),
        schema=schema,
    )
    engine.dispose()
    if result.status == STATUS_VALIDATED:
        raise SystemExit(f"bench: the label on {claim.work_id} validated it (not the scenario)")
    return result.status


def child(url: str, campaign_id: int, repeats: int) -> None:
    """In a fresh process: import time, a cold view, then `repeats` warm views each right
    after a new label and `repeats` views recomputing everything (alternating)."""
    t = time.perf_counter()
    import labeling.reports.monitor.view  # noqa: F401 - the page's imports, timed apart

    imports = time.perf_counter() - t
    views = [timed_view(url, campaign_id)]
    recomputes, uncached = [], []
    for i in range(repeats - 1):
        add_label(url, campaign_id, 2 * i)
        views.append(timed_view(url, campaign_id))
        add_label(url, campaign_id, 2 * i + 1)
        recomputes.append(timed_view(url, campaign_id, recompute=True))
        uncached.append(timed_view(url, campaign_id, uncached=True))
    print(
        json.dumps(
            {"imports": imports, "views": views, "recomputes": recomputes, "uncached": uncached}
        )
    )


def run_child(url: str, campaign_id: int, repeats: int) -> dict:
    """Run child() in a new interpreter and read its JSON."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", url, str(campaign_id), str(repeats)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def scratch(path: Path) -> Path:
    """A copy of a bench database to add labels to (the built one stays as built)."""
    import sqlite3

    from db.sqlite_files import SIDE_SUFFIXES

    copy = path.with_suffix(".scratch.db")
    for suffix in ("", *SIDE_SUFFIXES):
        Path(str(copy) + suffix).unlink(missing_ok=True)
    src, dst = sqlite3.connect(path), sqlite3.connect(copy)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    return copy


def report(name: str, url: str, campaign_id: int, cold: int, warm: int) -> dict:
    """Cold, warm and recompute medians of one database; prints a line per part."""
    colds, warms, recomputes, uncached, imports = [], [], [], [], []
    for i in range(cold):
        got = run_child(url, campaign_id, 1 + (warm if i == 0 else 0))
        imports.append(got["imports"])
        colds.append(got["views"][0])
        warms += got["views"][1:]
        recomputes += got["recomputes"]
        uncached += got["uncached"]
    load = os.getloadavg()[0]
    med = {k: statistics.median(v[k] for v in colds) for k in colds[0]}
    parts = sorted({k for v in warms + recomputes for k in v}, key=list(colds[0]).index)
    umed = {k: statistics.median(v.get(k, 0.0) for v in uncached) for k in parts}
    wmed = {k: statistics.median(v.get(k, 0.0) for v in warms) for k in parts}
    rmed = {k: statistics.median(v.get(k, 0.0) for v in recomputes) for k in parts}
    verdict = "meets" if wmed["total"] < TARGETS[name] else "MISSES"
    print(
        f"{name}: warm (after a label) median {wmed['total']:.3f} s over {len(warms)} "
        f"({verdict} the {TARGETS[name]:.0f} s target); recompute median {rmed['total']:.3f} s "
        f"over {len(recomputes)}; uncached median {umed['total']:.3f} s; "
        f"cold median {med['total']:.3f} s over {len(colds)} "
        f"(+ imports {statistics.median(imports):.2f} s); load {load:.2f}"
    )
    for part in parts:
        if part != "total":
            print(
                f"    {part:22} warm {wmed[part]:6.3f} s  recompute {rmed[part]:6.3f} s  "
                f"uncached {umed[part]:6.3f} s  cold {med.get(part, 0.0):6.3f} s"
            )
    print(
        "    (annotator tables, agreement report and model accuracy run side by side: they overlap)"
    )
    return {
        "warm": wmed,
        "recompute": rmed,
        "uncached": umed,
        "cold": med,
        "imports": statistics.median(imports),
        "load": load,
    }


def main() -> None:
    """Build (or reuse) the databases and time the Monitor's data on each."""
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--works", type=int, default=1_000_000)
    parser.add_argument("--labels", type=int, default=100_000)
    parser.add_argument("--warm", type=int, default=5)
    parser.add_argument("--cold", type=int, default=3)
    parser.add_argument("--only", choices=["demo", "large"])
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if args.works < 1 or args.labels < 2 or args.warm < 1 or args.cold < 1:
        parser.error("--works >= 1, --labels >= 2, --warm >= 1 and --cold >= 1")
    from bench.monitor_db import build_demo, build_large
    from labeling.schema import load_schema
    from labeling.settings import DEFAULT_SCHEMA

    schema = load_schema(DEFAULT_SCHEMA)
    args.out.mkdir(parents=True, exist_ok=True)
    dbs = {
        "demo": args.out / "monitor-demo.db",
        "large": args.out / f"monitor-{args.works}-{args.labels}.db",
    }
    if args.rebuild:
        for path in dbs.values():
            path.with_suffix(".done").unlink(missing_ok=True)
    results = {}
    for name in ("demo", "large"):
        if args.only and args.only != name:
            continue
        t = time.perf_counter()
        if name == "demo":
            engine, cid = build_demo(dbs[name], schema)
        else:
            engine, cid = build_large(dbs[name], schema, args.works, args.labels)
        engine.dispose()
        print(
            f"{name}: database ready in {time.perf_counter() - t:.1f} s ({dbs[name].name})",
            flush=True,
        )
        copy = scratch(dbs[name])
        results[name] = report(name, f"sqlite:///{copy}", cid, args.cold, args.warm)
    print(
        json.dumps(
            {
                k: {
                    "warm": v["warm"]["total"],
                    "recompute": v["recompute"]["total"],
                    "uncached": v["uncached"]["total"],
                    "cold": v["cold"]["total"],
                    "load": v["load"],
                }
                for k, v in results.items()
            }
        )
    )


if __name__ == "__main__":
    main()
