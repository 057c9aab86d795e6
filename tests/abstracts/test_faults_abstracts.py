"""OpenAlex down, slow, rate-limited or answering garbage: the label page goes on.

The app runs in AppTest against a real local HTTP server (or a closed port) standing in for
OpenAlex. Each case checks that the work card shows with a plain note on the abstract within
a bounded time, that a label can be submitted and the next work shows, that reruns do not
ask the dead API again, and that the background prefetcher neither crashes nor blocks.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import streamlit as st
from sqlalchemy import delete
from streamlit.testing.v1 import AppTest

from db.engine import write_session
from db.models import AbstractCache
from labeling.abstracts import cache as abstracts
from labeling.database import dispose_all, init_db
from labeling.review import flow as session
from tests.label_page import Browser, form
from tests.pages.test_label_page import APP, PASSWORD, labels, seed_records
from tests.servers import free_port

TIMEOUT = 0.5  # LABELING_OPENALEX_TIMEOUT for these tests
BOUND = TIMEOUT + 1.5  # a page run may take the fetch timeout plus this margin, no more
SLOW = 5.0  # the slow server answers after this long (far beyond TIMEOUT)


class FakeOpenAlex(ThreadingHTTPServer):
    """A local HTTP server answering every request in one failure mode, counting requests."""

    daemon_threads = True  # a sleeping handler must not hold up the test's end

    def __init__(self, mode: str) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.mode = mode
        self.requests: list[tuple[str, dict[str, list[str]]]] = []
        self.lock = threading.Lock()
        self.release = threading.Event()

    @property
    def url(self) -> str:
        """Base URL of the server."""
        return f"http://127.0.0.1:{self.server_address[1]}"

    def asked(self, work_id: str) -> int:
        """How many requests named `work_id` (in a batch filter or a single-work path)."""
        with self.lock:
            return sum(work_id in path or work_id in str(query) for path, query in self.requests)


class Handler(BaseHTTPRequestHandler):
    """Answers as FakeOpenAlex.mode says."""

    server: FakeOpenAlex

    def log_message(self, *args: Any) -> None:
        """Keep the test output quiet."""

    def _send(self, status: int, body: bytes, ctype: str, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
        """One answer per mode; "slow" sleeps far longer than the client's timeout."""
        parts = urlsplit(self.path)
        with self.server.lock:
            self.server.requests.append((parts.path, parse_qs(parts.query)))
        mode = self.server.mode
        html = "text/html; charset=utf-8"
        try:
            if mode == "slow":
                self.server.release.wait(SLOW)
                self._send(200, b'{"results": []}', "application/json")
            elif mode == "429":
                self._send(429, b"<html><body>Too Many Requests</body></html>", html,
                           Retry_After="30")  # fmt: skip
            elif mode == "500":
                self._send(500, b'{"error": "Internal Server Error"}', "application/json")
            elif mode == "html":
                self._send(200, b"<!doctype html><html><body>Maintenance</body></html>", html)
            elif mode == "truncated":
                body = b'{"meta": {"count": 1}, "results": [{"id": "https://openalex.org/W9'
                self._send(200, body, "application/json")
            elif mode == "wrong shape":
                self._send(200, json.dumps({"results": {"W1": "x"}}).encode(), "application/json")
        except (BrokenPipeError, ConnectionResetError):  # the client gave up first
            pass


class RecordingPrefetcher(abstracts.Prefetcher):
    """The real prefetcher, remembered so the test can inspect and close it."""

    made: list[RecordingPrefetcher] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.futures: list[Any] = []
        RecordingPrefetcher.made.append(self)

    def submit(self, ids: Any) -> Any:
        """Submit and keep the future."""
        future = super().submit(ids)
        if future is not None:
            self.futures.append(future)
        return future


@pytest.fixture
def api(request: pytest.FixtureRequest) -> Iterator[FakeOpenAlex | None]:
    """The fake OpenAlex of the test's mode; None for "refused" (nothing listens)."""
    if request.param == "refused":
        yield None
        return
    server = FakeOpenAlex(request.param)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.release.set()
    server.shutdown()
    server.server_close()


@pytest.fixture
def online_db(
    api: FakeOpenAlex | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """Six works, no abstract cached, one one-question campaign, OpenAlex at the fake server."""
    from labeling.auth.users import add_user
    from labeling.frames.importer import import_frame
    from labeling.review.campaigns import create_campaign
    from labeling.schema import load_schema
    from labeling.settings import DEFAULT_SCHEMA, get_settings

    url = f"sqlite:///{tmp_path / 'online.db'}"
    base = api.url if api is not None else f"http://127.0.0.1:{free_port()}"
    for name, value in {"DB_URL": url, "OPENALEX_URL": base, "OPENALEX_OFFLINE": "false",
                        "OPENALEX_TIMEOUT": str(TIMEOUT), "OPENALEX_RETRIES": "2",
                        "OPENALEX_API_KEY": "test-key"}.items():  # fmt: skip
        monkeypatch.setenv(f"LABELING_{name}", value)
    monkeypatch.setattr(session, "MIN_DWELL", 0.0)
    monkeypatch.setattr(abstracts, "Prefetcher", RecordingPrefetcher)
    RecordingPrefetcher.made = []
    get_settings.cache_clear()
    st.cache_resource.clear()
    session.forget_progress()
    engine = init_db(url)
    frame = tmp_path / "frame.jsonl"
    frame.write_text("".join(json.dumps(r) + "\n" for r in seed_records(6)), encoding="utf-8")
    import_frame(engine, frame, load_schema(DEFAULT_SCHEMA), progress=False)
    with write_session(engine) as s:
        s.execute(delete(AbstractCache))
    add_user(engine, "annotator", "annotator", PASSWORD)
    create_campaign(engine, name="topic", strategy="score_opus", questions=["about_ca_topic"])
    yield url
    started = time.monotonic()
    for prefetcher in RecordingPrefetcher.made:
        prefetcher.close()
    closing = time.monotonic() - started
    st.cache_resource.clear()
    get_settings.cache_clear()
    dispose_all()
    assert closing < BOUND, f"closing the prefetcher took {closing:.1f}s"


def open_label_page() -> tuple[AppTest, float]:
    """Sign in and open the label page; returns it and how long the page's run took."""
    at = AppTest.from_file(str(APP), default_timeout=30).run()
    at.text_input(key="login_name").input("annotator")
    at.text_input(key="login_password").input(PASSWORD)
    at.button[0].click().run()
    started = time.monotonic()
    at.switch_page("pages/label.py").run()
    return at, time.monotonic() - started


def abstract_note(at: AppTest) -> str:
    """The sentence the label form shows in place of the abstract."""
    return form(at)["card"]["abstract"]["message"]


MODES = ["refused", "slow", "429", "html", "truncated", "wrong shape", "500"]
REASONS = {
    "refused": "could not be reached (network error: ConnectError",
    "slow": "could not be reached (timeout: ReadTimeout)",
    "429": "did not deliver it (HTTP 429, daily limit exceeded)",
    "html": "did not deliver it (HTTP 200 with a non-JSON body (text/html; charset=utf-8))",
    "truncated": "did not deliver it (HTTP 200 with a non-JSON body (application/json))",
    "wrong shape": "did not deliver it (OpenAlex answer has no results)",
    "500": "did not deliver it (HTTP 500, server error: Internal Server Error)",
}


@pytest.mark.parametrize("api", MODES, indirect=True)
def test_labelling_goes_on_when_openalex_fails(
    api: FakeOpenAlex | None, online_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Card and a plain note in bounded time; no re-asking on reruns; label saved; next work."""
    mode = "refused" if api is None else api.mode
    browser = Browser(monkeypatch)
    at, took = open_label_page()
    assert not at.exception, at.exception
    assert took < BOUND, f"the first work took {took:.2f}s to show"
    first = form(at)["work_id"]
    assert form(at)["card"]["title"].startswith("Test work 1:")  # whatever OpenAlex does
    note = abstract_note(at)
    assert f"OpenAlex {REASONS[mode]}" in note and "next try after" in note, note
    asked = api.asked(first) if api is not None else 0
    assert api is None or asked == 1  # one request, no retry loop on the page's thread

    # Reruns (any other run, pressing "Try the abstract again") ask nothing new.
    at.run()
    browser.send(at, "retry_abstract")
    assert f"OpenAlex {REASONS[mode]}" in abstract_note(at)
    assert api is None or api.asked(first) == asked
    reload, took = open_label_page()  # a reload resumes the lease: the cached failure shows
    assert form(reload)["work_id"] == first and took < BOUND
    assert f"OpenAlex {REASONS[mode]}" in abstract_note(reload)
    assert api is None or api.asked(first) == asked

    started = time.monotonic()
    browser.submit(at)
    took = time.monotonic() - started
    (label,) = labels(online_db)
    assert label.work_id == first and label.answers == {"about_ca_topic": "yes"}
    assert form(at)["card"]["title"].startswith("Test work 2:")
    assert "OpenAlex" in abstract_note(at)
    assert took < BOUND, f"the next work took {took:.2f}s to show"

    # The prefetcher ran (the next works), failed quietly and never raised.
    (prefetcher,) = RecordingPrefetcher.made
    deadline = time.monotonic() + BOUND  # the queue query itself runs in the prefetch thread
    while not prefetcher.futures and time.monotonic() < deadline:
        time.sleep(0.02)
    assert prefetcher.futures
    for future in prefetcher.futures:
        if future.done():  # still waiting out a failure is fine: it must not block anyone
            report = future.result()  # raises if the prefetch crashed
            assert report.fetched == 0 and report.failed + report.deferred > 0


@pytest.mark.parametrize("api", ["429"], indirect=True)
def test_prefetcher_waiting_out_retry_after_blocks_nobody(
    api: FakeOpenAlex, tmp_path: Path
) -> None:
    """While the prefetcher sleeps a Retry-After its works are not "in flight"; close is quick."""
    from labeling.settings import Settings

    engine = init_db(f"sqlite:///{tmp_path / 'p.db'}")
    cfg = Settings(openalex_url=api.url, openalex_timeout=TIMEOUT, openalex_retries=3,
                   openalex_offline=False)  # fmt: skip
    prefetcher = abstracts.Prefetcher(engine, settings=cfg)
    try:
        future = prefetcher.submit(["W1", "W2"])
        assert future is not None
        deadline = time.monotonic() + 10
        while api.asked("W1") == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # the 429 is in: the prefetcher now waits 30 s before its retry
        assert api.asked("W1") == 1 and not future.done()
        assert not prefetcher.in_flight("W1")  # the page fetches or shows it, never waits
        started = time.monotonic()
        prefetcher.close()
        assert time.monotonic() - started < 1.0  # the wait is cut short
        assert future.result(timeout=1).fetched == 0
        assert api.asked("W1") == 1  # and no retry was made on the way out
    finally:
        prefetcher.close()
        engine.dispose()
