"""Benchmark: the frame import of two revisions, alternating, on the same file and machine.

Usage:
    .venv/bin/python bench/import_ab.py BEFORE AFTER [--n 1000000] [--pairs 2] [--pg URL]
        [--out DIR]

BEFORE and AFTER are git revisions, checked out in a temporary directory (`git worktree`),
or `.` for this checkout as it is, uncommitted changes included. The same synthetic frame
(bench/import_frame.py's, in --out) is imported into a fresh database (SQLite in --out, or
the PostgreSQL database of --pg, dropped and created again) once with each revision, BEFORE
first, --pairs times. This machine's speed drifts by 15-30% within a day, so only runs side
by side compare (bench/RESULTS.md, issue 16).

Each import runs in a child process with its revision's code first on sys.path (this
checkout's virtualenv: same packages). A row gives its wall time split into the load and
the index builds at the end (the deferred indexes, rebuilt one at a time), the CPU time of
the importing process / its parsing workers / the rest of the machine (the PostgreSQL server
among it) / idle, the peak PSS of the importing processes and the database's size.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(ROOT))

from bench.import_frame import (  # noqa: E402
    add_out_argument,
    ensure_frame,
    fresh_pg,
    fresh_sqlite,
    run_import,
)

CHILD = r"""
import json, resource, sys, time
url, path, tree = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, tree)
from db.engine import make_engine, upgrade
import labeling.frames.importer as importer
from labeling.schema import load_schema
from labeling.settings import DEFAULT_SCHEMA
engine = make_engine(url)
upgrade(engine)
schema = load_schema(DEFAULT_SCHEMA)
ensure, builds = importer.ensure_work_indexes, []
def timed(engine):
    t = time.perf_counter()
    ensure(engine)
    builds.append(time.perf_counter() - t)
importer.ensure_work_indexes = timed  # called at the start, and at the end after a bulk load
t0 = time.perf_counter()
s = importer.import_frame(engine, path, schema, progress=False)
wall = time.perf_counter() - t0
me, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
size = None
if engine.dialect.name == "postgresql":
    with engine.connect() as conn:
        size = conn.exec_driver_sql("SELECT pg_database_size(current_database())").scalar()
engine.dispose()
print(json.dumps({
    "wall_s": wall, "summary": s.as_dict(), "index_s": builds[-1] if len(builds) > 1 else 0.0,
    "code": importer.__file__, "db_bytes": size,
    "maxrss_mb": me.ru_maxrss / 1024, "worker_maxrss_mb": workers.ru_maxrss / 1024,
    "cpu_self_s": me.ru_utime + me.ru_stime, "cpu_workers_s": workers.ru_utime + workers.ru_stime,
}))
"""


def checkout(rev: str, into: Path) -> Path:
    """A directory holding revision `rev` of this repository (`.`: the checkout itself)."""
    if rev == ".":
        return ROOT
    tree = into / rev.replace("/", "_")
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), rev],
                   check=True)  # fmt: skip
    return tree


def remove(tree: Path) -> None:
    """Remove a checkout made by checkout()."""
    if tree != ROOT:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                       check=True)  # fmt: skip


def one_run(rev: str, tree: Path, url: str, path: Path, db_file: Path | None) -> str:
    """Import once with the code in `tree` into the fresh database at `url`; one table row."""
    r = run_import(url, path, CHILD, str(tree))
    assert Path(r["code"]).resolve().is_relative_to(tree.resolve()), r["code"]
    size = db_file.stat().st_size if db_file is not None else r["db_bytes"]
    s = r["summary"]
    return (
        f"| {rev} | {r['wall_s']:.1f} s | {r['wall_s'] - r['index_s']:.1f} s | "
        f"{r['index_s']:.1f} s | {r['cpu_self_s']:.1f} / {r['cpu_workers_s']:.1f} / "
        f"{r['cpu_rest_s']:.1f} / {r['idle_s']:.1f} s | {r['tree_pss_mb']:.0f} MB | "
        f"{size / 1e6:,.0f} MB | {s['inserted']}/{s['updated']}/{s['unchanged']}/{s['rejected']} |"
    )


def main() -> None:
    """Run the A/B benchmark and print its rows."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument(
        "--pg",
        default=os.environ.get("LABELING_BENCH_PG_URL"),
        help="a PostgreSQL URL (its database is dropped and created): else SQLite",
    )
    add_out_argument(parser)
    args = parser.parse_args()
    if args.n < 1 or args.pairs < 1:
        parser.error("--n >= 1 and --pairs >= 1")
    path = ensure_frame(args.n, args.out)
    engine = "PostgreSQL" if args.pg else "SQLite"
    print(f"{engine}, {args.n:,} records, {args.pairs} pairs, {args.before} then {args.after}")
    print("| code | wall | load | index builds | CPU import / workers / rest / idle | "
          "peak PSS all | database | ins/upd/unch/rej |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="import_ab_") as tmp:
        trees = {rev: checkout(rev, Path(tmp)) for rev in dict.fromkeys((args.before, args.after))}
        try:
            for _ in range(args.pairs):
                for rev in (args.before, args.after):
                    db_file = None if args.pg else args.out / "import_ab.db"
                    url = fresh_pg(args.pg) if args.pg else fresh_sqlite(args.out / "import_ab.db")
                    print(one_run(rev, trees[rev], url, path, db_file), flush=True)
        finally:
            for tree in trees.values():
                remove(tree)


if __name__ == "__main__":
    main()
