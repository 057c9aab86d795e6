"""Every bench runs as bench/RESULTS.md documents it (`python bench/NAME.py`), at a tiny size.

Each bench runs as a subprocess from the repository root, exactly as documented, so a bench
that no longer starts (a module shadowing the standard library, an import that moved) fails
here. PostgreSQL is left out (LABELING_BENCH_PG_URL unset): the benches run on SQLite; only
the soak, which makes and drops its own database, has a PostgreSQL variant (marked pg).
Outputs go to tmp_path wherever a bench takes --out.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The checkout's root, wherever under tests/ this file sits.
ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
BENCH = ROOT / "bench"
CHROMIUM = Path("/usr/bin/chromium")
# Every script in bench/ and the test that runs it (or checks that it refuses to run here).
COVERED = {
    "agreement",
    "browser",
    "coverage_sim",
    "export",
    "import_ab",
    "import_frame",
    "import_write_paths",
    "monitor",
    "monitor_db",
    "monitor_first_view",
    "old_label_keys",
    "plan_sim",
    "review_queue",
    "soak",
    "tree_memory",
}


def bench(
    name: str, *args: str, timeout: float = 120, pg_url: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `python bench/NAME.py ARGS` from the repository root, on PostgreSQL only if given."""
    env = {k: v for k, v in os.environ.items() if k != "LABELING_BENCH_PG_URL"}
    if pg_url:
        env["LABELING_BENCH_PG_URL"] = pg_url
    return subprocess.run(
        [sys.executable, f"bench/{name}.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ok(done: subprocess.CompletedProcess[str]) -> str:
    """The bench's output, after checking that it exited 0."""
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


def test_no_bench_shadows_a_standard_module() -> None:
    """Run as a script, bench/ comes first on sys.path: no file there may hide a stdlib module."""
    names = {p.stem for p in BENCH.glob("*.py")}
    assert not names & sys.stdlib_module_names, sorted(names & sys.stdlib_module_names)
    assert names == COVERED, "a bench without a test here (or a test of a removed bench)"


def test_documented_commands_name_existing_benches() -> None:
    """Every `bench/NAME.py` the docs mention exists."""
    docs = [ROOT / "README.md", BENCH / "RESULTS.md", *sorted((ROOT / "docs").glob("*.md"))]
    named = {
        m for doc in docs for m in re.findall(r"(?<![\w/])bench/(\w+)\.py", doc.read_text("utf-8"))
    }
    assert named and named <= COVERED, named - COVERED


@pytest.mark.slow
def test_agreement() -> None:
    """bench/agreement.py: the report on 3,000 label rows, timed once."""
    out = ok(
        bench(
            "agreement", "--submissions", "500", "--works", "100", "--n-boot", "20", "--runs", "1"
        )
    )
    assert "generated 3,000 label rows" in out
    assert "median of 1:" in out and "(n_boot=20)" in out
    assert "| agreement_report, default schema | 3,000 (500 submissions x 6 questions)" in out


@pytest.mark.slow
def test_coverage_sim() -> None:
    """bench/coverage_sim.py --sweep --grid: every table, 50 replicates per cell."""
    out = ok(bench("coverage_sim", "--sweep", "--grid", "--reps", "50"))
    for heading in (
        "## Prevalence: 95% interval coverage, 50 replicates per cell",
        "## Precision and recall: coverage, 50 replicates per cell",
        "## Sweep: equal allocation",
        "## Grid: 240 cells x 500 replicates",
    ):
        assert heading in out
    assert re.search(r"\| 600 \| equal \| every p_h 0\.3 \| 0\.300 \| \d\.\d{3} \|", out)


@pytest.mark.slow
def test_plan_sim() -> None:
    """bench/plan_sim.py: every scenario and target, 3 replicates per cell."""
    out = ok(bench("plan_sim", "--reps", "3"))
    assert "## Planned sample sizes: 3 replicates per cell, pilot 30 per stratum" in out
    rows = re.findall(
        r"^\| [^|]+ \| 0\.0[235] \| [\d,]+ \| 0\.\d{4} \| [\d.]+ \| [\d.]+ \|$", out, re.M
    )
    assert len(rows) == 9, out


@pytest.mark.slow
def test_import_frame(tmp_path: Path) -> None:
    """bench/import_frame.py: a 300-record frame imported, then re-imported unchanged."""
    out = ok(bench("import_frame", "--n", "300", "--out", str(tmp_path)))
    assert re.search(r"^floor: 300 records read and decoded into typed msgspec Structs, one "
                     r"process, no database: [\d.]+ s \(0 not decoded; load [\d.]+-[\d.]+\)$",
                     out, re.M)  # fmt: skip
    ratio = r"\| \d+ / \d+ / \d+ / \d+ s \| [\d.]+ s \| [\d.]+ \| [\d.]+-[\d.]+ \|$"
    assert re.search(
        r"\| SQLite \| import \| 300 \| [\d.]+ s \| [\d,]+/s \| \d+ MB \| \d+ MB \| \d+ MB \| "
        r"300/0/0/0 " + ratio,
        out,
        re.M,
    )
    assert re.search(r"\| SQLite \| re-import \(unchanged\) \| 300 \| .* \| 0/0/300/0 " + ratio,
                     out, re.M)  # fmt: skip
    frame = tmp_path / "frame_300_seed_version.jsonl"
    assert frame.exists() and (tmp_path / "import_bench.db").exists()
    # The real frame's model version on every line, as on a real frame (issue 16).
    versions = {json.loads(line)["prediction"]["model_version"] for line in frame.open()}
    assert versions == {"metacan-v3-hybrid-931329e0061c"}


def test_tree_memory_sums_a_process_and_its_descendants() -> None:
    """bench/tree_memory.py: a child holding 200 MB under a parent holding 100 MB."""
    sys.path.insert(0, str(ROOT))
    try:
        from bench.tree_memory import TreeMemory
    finally:
        sys.path.remove(str(ROOT))
    hold = "import sys, time; b = bytearray({mb} << 20); b[::4096] = b'x' * len(b[::4096]); {then}"
    child = hold.format(mb=200, then="time.sleep(3)")
    parent = hold.format(
        mb=100, then=f"import subprocess; subprocess.run([sys.executable, '-c', {child!r}])"
    )
    proc = subprocess.Popen([sys.executable, "-c", parent])
    sampler = TreeMemory(proc.pid, interval=0.05)
    sampler.start()
    proc.wait(timeout=60)
    sampler.stop()
    assert 300 <= sampler.peak_mb < 400, sampler.peak_mb


@pytest.mark.slow
def test_import_ab(tmp_path: Path) -> None:
    """bench/import_ab.py: HEAD (a worktree of its own) and this checkout, one pair."""
    out = ok(bench("import_ab", "HEAD", ".", "--n", "300", "--pairs", "1", "--out", str(tmp_path)))
    assert "SQLite, 300 records, 1 pairs, HEAD then ." in out
    for code in ("HEAD", "."):
        cpu = r"[\d.]+ / [\d.]+ / [\d.]+ / [\d.]+ s"
        row = rf"^\| {re.escape(code)} \| [\d.]+ s \| [\d.]+ s \| [\d.]+ s \| {cpu} \| \d+ MB \| "
        row += r"[\d,]+ MB \| 300/0/0/0 \|$"
        assert re.search(row, out, re.M), out


def test_import_write_paths(tmp_path: Path) -> None:
    """bench/import_write_paths.py: each SQLite write path on 200 pre-built rows, once."""
    out = ok(bench("import_write_paths", "--n", "200", "--repeat", "1", "--out", str(tmp_path)))
    for path in ("executemany of pre-built tuples", "ADBC ingest -> staging, INSERT ... SELECT",
                 "ADBC ingest straight into works"):  # fmt: skip
        row = rf"^\| {re.escape(path)} \| [\d.]+ s \([\d., ]+\) \| [\d,]+/s \| [\d.]+ \|$"
        assert re.search(row, out, re.M), out


def test_review_queue(tmp_path: Path) -> None:
    """bench/review_queue.py: both stages, 1 and 2 annotator processes, no error."""
    out = ok(
        bench(
            "review_queue",
            "--works",
            "2000",
            "--ops",
            "10",
            "--annotators",
            "2",
            "--out",
            str(tmp_path),
        )
    )
    assert "building 2,000 works" in out and "INSERT ... SELECT of 2,000 items" in out
    assert "-- fresh queue" in out and "-- 90% of the top 2,000 done" in out
    assert out.count("1 annotator(s), 10 claim+submit") == 2
    assert out.count("2 annotator(s), ") == 2
    assert len(re.findall(r"claim  median +[\d.]+ ms  p95 +[\d.]+ ms", out)) == 4
    assert out.count("errors: 0 []") == 4
    assert "(PostgreSQL skipped: set LABELING_BENCH_PG_URL)" in out
    assert (tmp_path / "queue_2000.db").exists()


@pytest.mark.slow
def test_soak() -> None:
    """bench/soak.py --engine both: SQLite soaked with no violation, PostgreSQL skipped."""
    out = ok(bench("soak", "--works", "20", "--processes", "4", "--engine", "both"))
    assert re.search(
        r"sqlite: 4 processes, 20 works, overlap 2: 40 labels in [\d.]+ s = \d+ "
        r"labels/s; claim median [\d.]+ ms, .*; violations 0",
        out,
    )
    assert "pg: skipped (set LABELING_BENCH_PG_URL)" in out


@pytest.mark.slow
@pytest.mark.pg
def test_soak_pg() -> None:
    """The PostgreSQL variant: the bench makes its own database next to the URL and drops it."""
    url = os.environ.get("LABELING_TEST_PG_URL")
    if not url:
        pytest.skip("PostgreSQL tests need LABELING_TEST_PG_URL (e.g. postgresql+psycopg://...)")
    out = ok(bench("soak", "--works", "20", "--processes", "4", "--engine", "pg", pg_url=url))
    assert re.search(r"pg: 4 processes, 20 works, overlap 2: 40 labels .*; violations 0", out)


@pytest.fixture
def bench_out() -> Iterator[Path]:
    """bench/out/, with whatever a test adds to it removed afterwards.

    bench/export.py writes there and takes no other directory.
    """
    out = BENCH / "out"
    existed = out.exists()
    before = set(out.iterdir()) if existed else set()
    yield out
    if out.exists():
        for path in set(out.iterdir()) - before:
            path.unlink()
        if not existed and not any(out.iterdir()):
            out.rmdir()


@pytest.mark.slow
def test_export(bench_out: Path) -> None:
    """bench/export.py: 173 validated works exported to Parquet and CSV in child processes."""
    out = ok(bench("export", "--works", "173", "--repeat", "1"))
    assert "173 works, 346 labels" in out or "reusing" in out
    for fmt in ("parquet", "csv"):
        assert re.search(
            rf"{fmt} +173 rows  median +[\d.]+ s \(runs [\d.]+\)  peak RSS +[\d.]+ MB"
            rf", with workers \(PSS\) +[\d.]+ MB",
            out,
        ), out


@pytest.mark.slow
def test_monitor_demo(tmp_path: Path) -> None:
    """bench/monitor.py --only demo: every part of the Monitor view timed."""
    out = ok(
        bench("monitor", "--only", "demo", "--warm", "1", "--cold", "1", "--out", str(tmp_path))
    )
    assert "demo: database ready" in out and "demo: warm (after a label) median" in out
    assert "recompute median" in out and "uncached median" in out
    for step in ("live top", "label rows", "agreement", "humans vs machines", "estimates"):
        assert step in out
    assert json.loads(out.strip().splitlines()[-1]).keys() == {"demo"}


def _monitor_large(out: Path) -> str:
    """bench/monitor.py on a tiny large database (300 works, 80 labels)."""
    return ok(
        bench(
            "monitor",
            "--works",
            "300",
            "--labels",
            "80",
            "--warm",
            "1",
            "--cold",
            "1",
            "--only",
            "large",
            "--out",
            str(out),
        )
    )


@pytest.mark.slow
def test_monitor_large_builds_then_reuses(tmp_path: Path) -> None:
    """bench/monitor.py --only large: built once, reused by the next run."""
    first = _monitor_large(tmp_path)
    assert "80 labels" in first  # built: 40 works x 2 annotators
    assert "large: warm (after a label) median" in first and "cold median" in first
    for step in ("live top", "label rows", "agreement", "humans vs machines", "estimates"):
        assert step in first
    assert (tmp_path / "monitor-300-80.done").exists()
    second = _monitor_large(tmp_path)
    assert "labels; statuses" not in second  # the database was reused, not built again
    assert "large: warm (after a label) median" in second


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing (apt install chromium)")
def test_browser(tmp_path: Path) -> None:
    """bench/browser.py: two works typed by keyboard in headless Chromium."""
    figures = tmp_path / "browser.json"
    out = ok(bench("browser", "--works", "2", "--warmup", "1", "--json", str(figures)))
    assert "submit -> next title and abstract visible, 2 works, warm cache:" in out
    assert "key -> repaint, 14 keys:" in out and "waiting per work" in out
    got = json.loads(figures.read_text("utf-8"))
    assert got["works"] == 2 and got["keys"] == 14 and got["key_messages"] == 0


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing (apt install chromium)")
def test_monitor_first_view(tmp_path: Path) -> None:
    """bench/monitor_first_view.py: one fresh start of the demo, the four cards filled."""
    figures = tmp_path / "first_view.json"
    args = ("--starts", "1", "--rounds", "2", "--json", str(figures))
    out = ok(bench("monitor_first_view", *args, timeout=300))
    assert "cards" in out and "median of 1" in out
    got = json.loads(figures.read_text("utf-8"))
    (app,) = got["apps"].values()
    assert 0 < app["median"]["cards"] <= app["median"]["page"]


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("monitor", ["--works", "0"], "--works >= 1"),
        ("review_queue", ["--works", "0"], "--works >= 1"),
        ("import_frame", ["--n", "0"], "--n >= 1"),
    ],
)
def test_benches_refuse_bad_sizes(tmp_path: Path, name: str, args: list[str], message: str) -> None:
    """A size that cannot run is refused with exit 2 before anything is written."""
    done = bench(name, *args, "--out", str(tmp_path), timeout=60)
    assert done.returncode == 2 and message in done.stderr
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("old_label_keys", "runs only from a checkout of commit 8d19438"),
        ("monitor_db", "run .venv/bin/python bench/monitor.py"),
    ],
)
def test_scripts_that_are_no_bench_here_say_so(name: str, message: str) -> None:
    """old_label_keys and monitor_db stop with a message saying what to run."""
    done = bench(name, timeout=60)
    assert done.returncode == 1 and message in done.stderr
