"""Benchmark of the Monitor page's data functions, warm and cold, on the demo and a large database.

Usage:
    .venv/bin/python bench/monitor.py [--works 1000000] [--labels 100000] [--warm 5]
        [--cold 3] [--only demo|large] [--rebuild]

Builds (once, cached under bench/out/, which git ignores) the demo database with two
annotators and 40 labels, and a large database of --works works with --labels labels from 10
annotators (bench/monitor_db.py). Then times the data behind one view of the Monitor page:
cold = the first call in a fresh Python process (imports excluded, timed apart), repeated
--cold times; warm = further calls in one process, --warm times. Prints medians, and the
median of each part. Targets: under 1 s warm on the demo, under 2 s on the large database.
The page caches these numbers on the label version (labeling.reports.monitor.data.data_version): a
view while no label, status or queue change comes in costs the version check alone, printed
apart.
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

OUT = Path(_HERE) / "out"
TARGETS = {"demo": 1.0, "large": 2.0}


def timed_view(url: str, campaign_id: int) -> dict[str, float]:
    """Seconds of one view of the Monitor's data, in total and per part."""
    from db.engine import make_engine
    from labeling.reports.monitor.data import data_version
    from labeling.reports.monitor.view import live_view, statistics
    from labeling.schema import load_schema
    from labeling.settings import DEFAULT_SCHEMA

    engine = make_engine(url)
    schema = load_schema(DEFAULT_SCHEMA)
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
    engine.dispose()
    return out


def child(url: str, campaign_id: int, repeats: int) -> None:
    """In a fresh process: import time, then `repeats` timed views (the first one is cold)."""
    t = time.perf_counter()
    import labeling.reports.monitor.view  # noqa: F401 - the page's imports, timed apart

    imports = time.perf_counter() - t
    views = [timed_view(url, campaign_id) for _ in range(repeats)]
    print(json.dumps({"imports": imports, "views": views}))


def run_child(url: str, campaign_id: int, repeats: int) -> dict:
    """Run child() in a new interpreter and read its JSON."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", url, str(campaign_id), str(repeats)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(name: str, url: str, campaign_id: int, cold: int, warm: int) -> dict:
    """Cold and warm medians of one database; prints a line per part."""
    colds, warms, imports = [], [], []
    for i in range(cold):
        got = run_child(url, campaign_id, 1 + (warm if i == 0 else 0))
        imports.append(got["imports"])
        colds.append(got["views"][0])
        warms += got["views"][1:]
    load = os.getloadavg()[0]
    med = {k: statistics.median(v[k] for v in colds) for k in colds[0]}
    wmed = {k: statistics.median(v[k] for v in warms) for k in warms[0]}
    verdict = "meets" if wmed["total"] < TARGETS[name] else "MISSES"
    print(
        f"{name}: warm median {wmed['total']:.3f} s over {len(warms)} "
        f"({verdict} the {TARGETS[name]:.0f} s target), cold median {med['total']:.3f} s "
        f"over {len(colds)} (+ imports {statistics.median(imports):.2f} s); load {load:.2f}"
    )
    for part in colds[0]:
        if part != "total":
            print(f"    {part:22} warm {wmed[part]:7.3f} s   cold {med[part]:7.3f} s")
    return {"warm": wmed, "cold": med, "imports": statistics.median(imports), "load": load}


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
        results[name] = report(name, f"sqlite:///{dbs[name]}", cid, args.cold, args.warm)
    print(
        json.dumps(
            {
                k: {"warm": v["warm"]["total"], "cold": v["cold"]["total"]}
                for k, v in results.items()
            }
        )
    )


if __name__ == "__main__":
    main()
