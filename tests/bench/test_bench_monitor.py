"""bench/monitor.py runs end to end on a tiny database (--works), and reuses what it built."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(out: Path) -> str:
    done = subprocess.run(
        [sys.executable, "bench/monitor.py", "--works", "300", "--labels", "80", "--warm", "1",
         "--cold", "1", "--only", "large", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_bench_monitor_tiny(tmp_path: Path) -> None:
    first = run(tmp_path)
    assert "80 labels" in first  # built: 40 works x 2 annotators
    assert "large: warm median" in first and "cold median" in first
    for step in ("live top", "label rows", "agreement", "humans vs machines", "estimates"):
        assert step in first
    assert (tmp_path / "monitor-300-80.done").exists()
    second = run(tmp_path)
    assert "labels; statuses" not in second  # the database was reused, not built again


def test_bench_monitor_refuses_bad_sizes(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "bench/monitor.py", "--works", "0", "--out",
                           str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--works >= 1" in done.stderr
