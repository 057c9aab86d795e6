"""Helpers for tests that run real `streamlit run` servers."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def wait_healthy(base: str, proc: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    """Poll /_stcore/health until it answers "ok"; fail with the log if the server died."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(base + "/_stcore/health", timeout=2) as r:
                if r.read() == b"ok":
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"streamlit did not start: {log.read_text()[-2000:]}")
        time.sleep(0.1)


ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def app_server(db_url: str, log: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """`streamlit run app.py` on a free port against db_url (offline); yields URL and process.

    It does not wait for the server: call wait_healthy (several servers can start at once).
    """
    port = free_port()
    env = dict(os.environ, LABELING_DB_URL=db_url, LABELING_OPENALEX_OFFLINE="true")
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        "app.py",
        "--server.headless",
        "true",
        "--server.address",
        "127.0.0.1",
        "--server.port",
        str(port),
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield f"http://127.0.0.1:{port}", proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
