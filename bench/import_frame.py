"""Benchmark: import a 1,000,000-record synthetic frame into SQLite (and PostgreSQL).

Usage:
    .venv/bin/python bench/import_frame.py [--n 1000000] [--pg URL] [--out DIR]

Writes the frame once to --out (default bench/out/, reused), then for each engine imports it
into a fresh database in a child process and prints wall time, records per second and peak
memory (the importing process and, separately, its largest parsing worker), then re-imports the
same file (every record unchanged). Targets: under 60 s and under 500 MB for 1,000,000 records.
The memory of all processes is the peak of their summed PSS (proportional set size: pages
shared between them counted once), sampled every 0.1 s in this process; the per-process
peaks (ru_maxrss) are printed too, and their sum is an upper bound, as the importing
process peaks while it rebuilds the indexes, after its workers have ended.

The CPU time of each run is printed as the importing process / its parsing workers / the
rest of the machine (mostly the PostgreSQL server; SQLite runs inside the importing process)
/ idle, in seconds over the child's life: on a machine whose wall clock drifts, CPU time is
the steadier figure, and idle time says whether the run was bound by CPU at all.

The floor is measured in the same run, right before each engine's imports: the same file
read and decoded in one child process with no database, each record decoded into the typed
model (msgspec Structs) and dropped, the fastest of two runs; each import is then given as a
multiple of its engine's floor (issue 16: under 3.5, aim 1.5).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out"
# Run as a script, bench/ is sys.path[0]: the checkout's root goes first instead, so that
# `labeling`, `db` and `tests` import from it and no file in bench/ can shadow a module.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(ROOT))

from bench.tree_memory import TreeMemory  # noqa: E402
from db.sqlite_files import SIDE_SUFFIXES  # noqa: E402
from labeling.frames.synth_scores import SEED_RECORD  # noqa: E402

CHILD = r"""
import json, resource, sys, time
from db.engine import make_engine, upgrade
from labeling.frames.importer import import_frame
from labeling.schema import load_schema
from labeling.settings import DEFAULT_SCHEMA
url, path = sys.argv[1], sys.argv[2]
engine = make_engine(url)
upgrade(engine)
schema = load_schema(DEFAULT_SCHEMA)
t0 = time.perf_counter()
s = import_frame(engine, path, schema, progress=False)
wall = time.perf_counter() - t0
me, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({
    "wall_s": wall, "summary": s.as_dict(),
    "maxrss_mb": me.ru_maxrss / 1024, "worker_maxrss_mb": workers.ru_maxrss / 1024,
    "cpu_self_s": me.ru_utime + me.ru_stime, "cpu_workers_s": workers.ru_utime + workers.ru_stime,
}))
"""


FLOOR_RUNS = 2  # floor runs before each engine's imports; the fastest is the floor
FLOOR = r"""
import json, sys, time
from pathlib import Path
import msgspec
from labeling.frames.frame_file import iter_chunks
from labeling.frames.record_model import record_model
from labeling.schema import load_schema
from labeling.settings import DEFAULT_SCHEMA
model = record_model(load_schema(DEFAULT_SCHEMA), floor=True)
assert model is not None
decode, n, failed = model.decoder.decode, 0, 0
t0 = time.perf_counter()
for chunk, _ in iter_chunks(Path(sys.argv[1])):
    for _, line in chunk:
        n += 1
        try:
            decode(line)
        except msgspec.MsgspecError:
            failed += 1
print(json.dumps({"wall_s": time.perf_counter() - t0, "records": n, "failed": failed}))
"""


def ensure_frame(n: int, out: Path) -> Path:
    """The synthetic frame of n records in `out` (written once, deterministic, seed 0).

    Its records carry the real frame's model version (the seed record's), as a real frame's
    all do: a hex digest in it once sent every line the slow way (issue 16, thirteenth pass),
    which the synthetic default ("synth-v1") hid. The name says so, so that a frame written
    before with the default is not reused.
    """
    from labeling.frames.synth import write_synthetic_frame

    out.mkdir(parents=True, exist_ok=True)
    version = json.loads(SEED_RECORD.read_text(encoding="utf-8"))["prediction"]["model_version"]
    path = out / f"frame_{n}_seed_version.jsonl"
    if not path.exists():
        t0 = time.perf_counter()
        write_synthetic_frame(path, n, seed=0, model_version=version)
        print(f"wrote {path} ({path.stat().st_size / 1e6:.0f} MB) in "
              f"{time.perf_counter() - t0:.1f} s")  # fmt: skip
    return path


def _child(code: str, *args: str) -> dict:
    """Run `code` in a fresh child process and return the JSON of its last line, with the
    peak of the summed PSS of it and its workers (tree_pss_mb, sampled every 0.1 s)."""
    cmd = [sys.executable, "-c", code, *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)  # fmt: skip
    sampler = TreeMemory(proc.pid, interval=0.1)
    sampler.start()
    out, err = proc.communicate()
    sampler.stop()
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, cmd, out, err)
    figures = json.loads(out.strip().splitlines()[-1])
    figures["tree_pss_mb"] = sampler.peak_mb
    return figures


def run_import(url: str, path: Path, code: str = CHILD, *extra: str) -> dict:
    """Import in a fresh child process and return its JSON figures, the load around it and
    the machine's CPU time over the child's life (cpu_rest_s: what neither the child, its
    workers nor this process's memory sampler used, the PostgreSQL server's share among it;
    idle_s: no process ran). `code` is the child's (argv: url, path, *extra)."""
    before, cpu, mine = os.getloadavg()[0], psutil.cpu_times(), _own_cpu()
    figures = _child(code, url, str(path), *extra)
    after, mine = psutil.cpu_times(), _own_cpu() - mine
    figures["load"] = (before, os.getloadavg()[0])
    idle = (after.idle + after.iowait) - (cpu.idle + cpu.iowait)
    busy = _busy(after) - _busy(cpu) - mine
    figures["cpu_rest_s"] = max(0.0, busy - figures["cpu_self_s"] - figures["cpu_workers_s"])
    figures["idle_s"] = idle
    return figures


def _own_cpu() -> float:
    """CPU seconds of this process so far (its memory sampler's among them)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


def _busy(t: Any) -> float:
    """Seconds the machine's CPUs ran anything (Linux counts guest time inside user time)."""
    return float(t.user + t.nice + t.system + t.irq + t.softirq)


def measure_floor(path: Path, runs: int = FLOOR_RUNS) -> float:
    """Seconds to read and decode the file in one process, no database: the fastest of
    `runs` runs in a row (each printed)."""
    best = float("inf")
    for _ in range(runs):
        before = os.getloadavg()[0]
        r = _child(FLOOR, str(path))
        print(f"floor: {r['records']:,} records read and decoded into typed msgspec Structs, "
              f"one process, no database: {r['wall_s']:.1f} s ({r['failed']} not decoded; "
              f"load {before:.1f}-{os.getloadavg()[0]:.1f})")  # fmt: skip
        best = min(best, float(r["wall_s"]))
    return best


def fresh_sqlite(path: Path) -> str:
    """URL of a new, empty SQLite file at `path`."""
    db = path
    for suffix in ("", *SIDE_SUFFIXES):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    return f"sqlite:///{db}"


def fresh_pg(url: str) -> str:
    """Drop and recreate the PostgreSQL database named in `url`."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    admin = create_engine(parsed.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{parsed.database}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{parsed.database}"'))
    admin.dispose()
    return url


def report(engine: str, n: int, first: dict, again: dict, floor: float) -> str:
    """Print and return a markdown row pair for RESULTS.md."""
    rows = []
    for label, r in (("import", first), ("re-import (unchanged)", again)):
        s = r["summary"]
        rows.append(
            f"| {engine} | {label} | {n:,} | {r['wall_s']:.1f} s | {n / r['wall_s']:,.0f}/s | "
            f"{r['maxrss_mb']:.0f} MB | {r['worker_maxrss_mb']:.0f} MB | "
            f"{r['tree_pss_mb']:.0f} MB | "
            f"{s['inserted']}/{s['updated']}/{s['unchanged']}/{s['rejected']} | "
            f"{r['cpu_self_s']:.0f} / {r['cpu_workers_s']:.0f} / {r['cpu_rest_s']:.0f} / "
            f"{r['idle_s']:.0f} s | "
            f"{floor:.1f} s | {r['wall_s'] / floor:.2f} | {r['load'][0]:.1f}-{r['load'][1]:.1f} |"
        )
    text = "\n".join(rows)
    print(text)
    return text


def add_out_argument(parser: argparse.ArgumentParser) -> None:
    """The --out option: where the frame and the SQLite file go."""
    parser.add_argument(
        "--out",
        type=Path,
        default=OUT,
        help="directory of the frame and the SQLite file (default bench/out/)",
    )


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--pg", default=os.environ.get("LABELING_BENCH_PG_URL"))
    parser.add_argument("--skip-sqlite", action="store_true", help="Only PostgreSQL.")
    add_out_argument(parser)
    args = parser.parse_args()
    if args.n < 1:
        parser.error("--n >= 1")
    path = ensure_frame(args.n, args.out)
    # Each engine's floor is measured right before its imports: this machine's speed drifts
    # (the same floor took 11.4 s and 16.0 s an hour apart), so one floor for the whole run
    # made the later engine's ratio a measure of the drift too.
    runs: list[tuple[str, dict, dict, float]] = []
    if not args.skip_sqlite:
        floor = measure_floor(path)
        url = fresh_sqlite(args.out / "import_bench.db")
        runs.append(("SQLite", run_import(url, path), run_import(url, path), floor))
    if args.pg:
        floor = measure_floor(path)
        url = fresh_pg(args.pg)
        runs.append(("PostgreSQL", run_import(url, path), run_import(url, path), floor))
    print("| engine | run | records | wall | rate | peak RSS main | peak RSS worker | "
          "peak PSS all | ins/upd/unch/rej | CPU import / workers / rest / idle | floor | "
          "import / floor | load |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for engine, first, again, floor in runs:
        report(engine, args.n, first, again, floor)
    print(f"(own process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}"
          " MB)")  # fmt: skip


if __name__ == "__main__":
    main()
