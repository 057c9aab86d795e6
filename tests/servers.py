"""Helpers for tests that run real `streamlit run` servers."""

from __future__ import annotations

import subprocess
import time
import urllib.request
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
