"""Benchmark: the frame import's write path alone, on rows already built (issue 16).

Usage:
    .venv/bin/python bench/import_write_paths.py [--n 20000] [--repeat 3] [--pg URL] [--out DIR]

Takes the first --n records of the bench frame (bench/out/frame_<n>_seed_version.jsonl,
bench/import_frame.py's, written if missing), parses them once with the importer's own
parse_chunk (rows built by db.bulk.RowEncoder, as the import's workers build them), then
times only the writing of those rows into an empty works table with the indexes a fresh
import keeps (db.indexes.DEFERRED dropped), commit included, --repeat times each, and
prints the median:

- SQLite: `executemany` of the pre-built tuples (what the import does); ADBC
  (adbc-driver-sqlite) `adbc_ingest` of an Arrow table into a staging table, then one
  `INSERT INTO works SELECT ...`; ADBC `adbc_ingest` straight into works.
- PostgreSQL (--pg): `COPY ... FROM STDIN (FORMAT BINARY)` of the pre-built binary rows
  (what the import does); psycopg's `write_row` of tuples (the import before); ADBC
  (adbc-driver-postgresql, binary COPY from Arrow) into a staging table, then one
  `INSERT INTO works SELECT ...`; ADBC straight into works.

Building the Arrow table from the rows is timed apart (a worker would build it). Only
SQLAlchemy-free driver calls are timed.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Run as a script, bench/ is sys.path[0]: the checkout's root goes first instead.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

import argparse  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import pyarrow as pa  # noqa: E402

from bench.import_frame import ensure_frame  # noqa: E402
from db.bulk import RowEncoder, insert_encoded  # noqa: E402
from db.engine import make_engine, upgrade, write_connection  # noqa: E402
from db.indexes import defer_indexes  # noqa: E402
from db.models import Work  # noqa: E402
from db.sqlite_files import SIDE_SUFFIXES  # noqa: E402
from labeling.frames.frame_file import iter_chunks  # noqa: E402
from labeling.frames.lines import parse_chunk  # noqa: E402
from labeling.schema import load_schema  # noqa: E402
from labeling.settings import DEFAULT_SCHEMA  # noqa: E402

OUT = HERE / "out"


def rows_of(frame: Path, n: int, dialect: str) -> list[Any]:
    """The first n records of the frame as the import's workers build their rows."""
    schema, encoder = load_schema(DEFAULT_SCHEMA), RowEncoder(Work.__table__, dialect)
    rows: list[Any] = []
    for chunk, _ in iter_chunks(frame):
        rows += [p.row for p in parse_chunk(chunk, schema, None, encoder) if p.row is not None]
        if len(rows) >= n:
            break
    return rows[:n]


def arrow_table(rows: list[tuple[Any, ...]], keys: tuple[str, ...]) -> pa.Table:
    """The SQLite rows (tuples) as an Arrow table, one array per column."""
    columns = list(zip(*rows, strict=True))
    return pa.table({k: pa.array(list(c)) for k, c in zip(keys, columns, strict=True)})


def copy_rows(rows: list[bytes], encoder: RowEncoder) -> list[tuple[Any, ...]]:
    """The PostgreSQL binary rows back as tuples of values (None for NULL), for Arrow and
    write_row."""
    return [tuple(encoder.decode(row, encoder.keys).values()) for row in rows]


def timed(repeat: int, setup: Callable[[], Any], run: Callable[[Any], None]) -> list[float]:
    """Seconds of each of `repeat` runs (setup, untimed, before each)."""
    out = []
    for _ in range(repeat):
        state = setup()
        t0 = time.perf_counter()
        run(state)
        out.append(time.perf_counter() - t0)
    return out


def show(name: str, secs: list[float], n: int) -> None:
    """One result line: median, runs, rows per second, load."""
    med = statistics.median(secs)
    runs = ", ".join(f"{s:.2f}" for s in secs)
    print(f"| {name} | {med:.2f} s ({runs}) | {n / med:,.0f}/s | {os.getloadavg()[0]:.1f} |")


def sqlite_paths(frame: Path, n: int, repeat: int, out: Path) -> None:
    """executemany against ADBC on SQLite."""
    import adbc_driver_sqlite.dbapi as adbc_sqlite

    rows = rows_of(frame, n, "sqlite")
    encoder = RowEncoder(Work.__table__, "sqlite")
    t0 = time.perf_counter()
    table = arrow_table(rows, encoder.keys)
    print(f"(Arrow table of {n:,} SQLite rows built in {time.perf_counter() - t0:.2f} s)")
    db = out / "write_paths.db"
    cols = ", ".join(f'"{k}"' for k in encoder.keys)

    def fresh() -> str:
        for suffix in ("", *SIDE_SUFFIXES):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        engine = make_engine(f"sqlite:///{db}")
        upgrade(engine)
        defer_indexes(engine)
        engine.dispose()
        return str(db)

    def executemany(path: str) -> None:
        engine = make_engine(f"sqlite:///{path}")
        with write_connection(engine) as conn:
            insert_encoded(conn, encoder, rows)
        engine.dispose()

    def adbc(staging: bool) -> Callable[[str], None]:
        def run(path: str) -> None:
            with adbc_sqlite.connect(path) as conn, conn.cursor() as cur:
                if staging:
                    cur.adbc_ingest("works_stage", table, mode="create", temporary=True)
                    cur.execute(f"INSERT INTO works ({cols}) SELECT {cols} FROM works_stage")
                else:
                    cur.adbc_ingest("works", table, mode="append")
                conn.commit()

        return run

    print("| SQLite write path | median (runs) | rows/s | load |")
    print("|---|---|---|---|")
    show("executemany of pre-built tuples", timed(repeat, fresh, executemany), n)
    show("ADBC ingest -> staging, INSERT ... SELECT", timed(repeat, fresh, adbc(True)), n)
    show("ADBC ingest straight into works", timed(repeat, fresh, adbc(False)), n)


def pg_paths(frame: Path, n: int, repeat: int, url: str) -> None:
    """COPY of pre-built binary rows, write_row and ADBC on PostgreSQL."""
    import adbc_driver_postgresql.dbapi as adbc_pg
    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    lines = rows_of(frame, n, "postgresql")
    encoder = RowEncoder(Work.__table__, "postgresql")
    tuples = copy_rows(lines, encoder)
    t0 = time.perf_counter()
    names = encoder.keys
    table = pa.table({k: pa.array([None if v is None else str(v) for v in c], pa.string())
                      for k, c in zip(names, zip(*tuples, strict=True), strict=True)})  # fmt: skip
    print(f"(Arrow table of {n:,} rows built in {time.perf_counter() - t0:.2f} s)")
    cols = ", ".join(f'"{k}"' for k in names)
    engine = make_engine(url)
    upgrade(engine)
    defer_indexes(engine)
    libpq = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    casts = ", ".join(f'"{c.name}"::{c.type.compile(engine.dialect)}' for c in Work.__table__.c)

    def fresh() -> None:
        with write_connection(engine) as conn:
            conn.execute(text("TRUNCATE works CASCADE"))
        with engine.connect() as conn:
            conn.execute(text("CHECKPOINT"))

    def copy_lines(_: None) -> None:
        with write_connection(engine) as conn:
            insert_encoded(conn, encoder, lines)

    def write_row(_: None) -> None:
        with write_connection(engine) as conn:
            dbapi = conn.connection.driver_connection
            assert dbapi is not None
            with dbapi.cursor() as cur, cur.copy(f"COPY works ({cols}) FROM STDIN") as copy:
                for t in tuples:
                    copy.write_row(t)

    def adbc(staging: bool) -> Callable[[None], None]:
        def run(_: None) -> None:
            with adbc_pg.connect(libpq) as conn, conn.cursor() as cur:
                if staging:
                    cur.adbc_ingest("works_stage", table, mode="create", temporary=True)
                    cur.execute(f"INSERT INTO works ({cols}) SELECT {casts} FROM works_stage")
                else:  # text columns into typed ones: the server casts each text value
                    cur.adbc_ingest("works_stage", table, mode="create", temporary=True)
                conn.commit()

        return run

    print("| PostgreSQL write path | median (runs) | rows/s | load |")
    print("|---|---|---|---|")
    show("COPY of pre-built binary rows", timed(repeat, fresh, copy_lines), n)
    show("COPY, psycopg write_row per tuple", timed(repeat, fresh, write_row), n)
    show("ADBC ingest (binary COPY) -> staging, INSERT ... SELECT",
         timed(repeat, fresh, adbc(True)), n)  # fmt: skip
    show("ADBC ingest into the staging table only", timed(repeat, fresh, adbc(False)), n)
    engine.dispose()


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pg", default=os.environ.get("LABELING_BENCH_PG_URL"))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    frame = ensure_frame(args.n, args.out)  # the import bench's, with the real model version
    sqlite_paths(frame, args.n, args.repeat, args.out)
    if args.pg:
        pg_paths(frame, args.n, args.repeat, args.pg)


if __name__ == "__main__":
    main()
