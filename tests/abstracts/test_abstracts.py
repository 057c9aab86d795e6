"""Abstracts: de-inversion, the OpenAlex client (offline, MockTransport), cache and prefetch."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, event, select

from db.engine import make_engine, read_session, upgrade, write_session
from db.models import AbstractCache, Work
from labeling.abstracts import cache as abstracts
from labeling.abstracts.cache import (
    INVALID_ID,
    NOT_FOUND,
    AbstractState,
    FetchResult,
    OpenAlexClient,
    Prefetcher,
    deinvert,
    get_abstracts,
    normalize_work_id,
    prefetch,
    show_abstract,
)
from labeling.settings import Settings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "openalex"
BASE = "https://api.openalex.test"


def _fixture_works() -> dict[str, dict[str, Any]]:
    works: dict[str, dict[str, Any]] = {}
    for path in sorted(FIXTURES.glob("works_page_*.json")):
        for work in json.loads(path.read_text(encoding="utf-8"))["results"]:
            works[work["id"].removeprefix("https://openalex.org/")] = work
    return works


WORKS = _fixture_works()
IDS = list(WORKS)
NULL_IDS = {"W2755950973", "W2041234663"}
TEXT_IDS = [wid for wid in IDS if wid not in NULL_IDS]


def rebuild(index: dict[str, list[int]]) -> str:
    """Independent de-inversion: fill a position -> word array, then read it left to right."""
    size = 1 + max((p for positions in index.values() for p in positions), default=-1)
    slots: list[str | None] = [None] * size
    for word, positions in index.items():
        for p in positions:
            assert slots[p] is None, "the fixtures never put two words at one position"
            slots[p] = word
    return " ".join(word for word in slots if word is not None)


def settings(**changes: Any) -> Settings:
    """Test settings: a fake base URL, a key and a mailto, online."""
    values: dict[str, Any] = {
        "openalex_url": BASE,
        "openalex_api_key": "key-123",
        "openalex_mailto": "lead@example.org",
        "openalex_timeout": 2.0,
        "openalex_retries": 3,
        "openalex_offline": False,
    }
    return Settings(**{**values, **changes})


Step = httpx.Response | Callable[[httpx.Request], httpx.Response] | None


class FakeOpenAlex:
    """An httpx.MockTransport handler answering like OpenAlex from the fixture works.

    `script` holds one step per request, used before normal serving: a Response, a callable
    (which may raise), or None (serve normally).
    """

    def __init__(
        self,
        works: dict[str, dict[str, Any]] | None = None,
        script: list[Step] | None = None,
        merged: dict[str, str] | None = None,
    ) -> None:
        self.works = WORKS if works is None else works
        self.script = list(script or [])
        self.merged = merged or {}
        self.requests: list[httpx.Request] = []
        self.lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        with self.lock:
            self.requests.append(request)
            step = self.script.pop(0) if self.script else None
        if isinstance(step, httpx.Response):
            return step
        if step is not None:
            return step(request)
        return self.serve(request)

    def serve(self, request: httpx.Request) -> httpx.Response:
        params = request.url.params
        fields = params["select"].split(",") if "select" in params else None

        def trim(work: dict[str, Any]) -> dict[str, Any]:
            return {k: work.get(k) for k in fields} if fields else work

        if request.url.path == "/works":
            ids = params["filter"].removeprefix("openalex_id:").split("|")
            results = [trim(self.works[wid]) for wid in ids if wid in self.works]
            results.reverse()  # OpenAlex does not promise to answer in the order asked
            meta = {"count": len(results), "page": None, "per_page": int(params["per_page"])}
            return httpx.Response(200, json={"meta": meta, "results": results})
        wid = request.url.path.rsplit("/", 1)[-1]
        if wid in self.merged:
            target = request.url.copy_with(path=f"/works/{self.merged[wid]}")
            return httpx.Response(301, headers={"Location": str(target)})
        if wid in self.works:
            return httpx.Response(200, json=trim(self.works[wid]))
        return httpx.Response(404, json={"error": "404", "message": "Not found"})

    def batch_ids(self) -> list[list[str]]:
        """The ids asked in each /works filter request."""
        return [
            r.url.params["filter"].removeprefix("openalex_id:").split("|")
            for r in self.requests
            if r.url.path == "/works"
        ]


def client_for(
    fake: FakeOpenAlex, sleeps: list[float] | None = None, **kwargs: Any
) -> OpenAlexClient:
    """A client on the fake transport that records sleeps instead of sleeping."""
    sleeps = [] if sleeps is None else sleeps
    cfg = kwargs.pop("settings", None) or settings()
    return OpenAlexClient(cfg, transport=httpx.MockTransport(fake), sleep=sleeps.append, **kwargs)


def raise_timeout(request: httpx.Request) -> httpx.Response:
    raise httpx.ReadTimeout("timed out", request=request)


def raise_connect(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


class FakeClock:
    """A clock the tests move by hand."""

    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Engine]:
    """A migrated SQLite database in tmp_path."""
    engine = make_engine(f"sqlite:///{tmp_path}/t.db")
    upgrade(engine)
    yield engine
    engine.dispose()


# --- de-inversion -------------------------------------------------------------------------


def test_fixtures_are_all_there() -> None:
    assert len(WORKS) == 152
    assert {wid for wid, w in WORKS.items() if w["abstract_inverted_index"] is None} == NULL_IDS


@pytest.mark.parametrize("wid", TEXT_IDS)
def test_deinvert_matches_independent_reconstruction(wid: str) -> None:
    index = WORKS[wid]["abstract_inverted_index"]
    text = deinvert(index)
    assert text == rebuild(index)
    assert len(text.split(" ")) == sum(len(p) for p in index.values())


def test_deinvert_none_and_empty() -> None:
    assert deinvert(None) is None
    assert deinvert({}) == ""


def test_deinvert_gaps_repeats_and_order() -> None:
    assert deinvert({"b": [5], "a": [0]}) == "a b"
    assert deinvert({"the": [0, 2], "cat": [1], "sat": [9]}) == "the cat the sat"


def test_deinvert_empty_word_gives_double_space() -> None:
    assert deinvert({"a": [0], "": [1], "b": [2]}) == "a  b"
    text = deinvert(WORKS["W1926314100"]["abstract_inverted_index"])
    assert "  " in text


def test_deinvert_gaps_in_fixture() -> None:
    index = WORKS["W1968792476"]["abstract_inverted_index"]
    positions = sorted(p for ps in index.values() for p in ps)
    assert positions[-1] + 1 > len(positions)  # there are gaps
    assert "  " not in deinvert(index)  # and they add no spaces


def test_deinvert_keeps_paragraph_breaks() -> None:
    text = deinvert(WORKS["W2149799184"]["abstract_inverted_index"])
    assert "others.\n\nTo" in text
    assert text.split("\n")[2].startswith("To ")


def test_deinvert_u2028_is_not_a_line_break() -> None:
    text = deinvert({"one\u2028two": [0], "three.\n\nFour": [1], "five": [3]})
    assert text == "one\u2028two three.\n\nFour five"
    assert len(text.split("\n")) == 3  # str.splitlines would also split at U+2028
    assert "one\u2028two three." in text.split("\n")[0]


def test_deinvert_very_long() -> None:
    rng = random.Random(7)
    words = [f"w{i % 997}" for i in range(50_000)]
    index: dict[str, list[int]] = {}
    for position, word in enumerate(words):
        index.setdefault(word, []).append(position)
    items = list(index.items())
    rng.shuffle(items)
    assert deinvert(dict(items)) == " ".join(words)
    assert deinvert(WORKS["W1934649023"]["abstract_inverted_index"]).count(" ") == 3648


def test_normalize_work_id() -> None:
    assert normalize_work_id("W123") == "W123"
    assert normalize_work_id(" w123 ") == "W123"
    assert normalize_work_id("https://openalex.org/W123") == "W123"
    assert normalize_work_id("https://api.openalex.org/works/W123") == "W123"
    for bad in ("", "123", "A123", "W12|W13", "W1 W2", "api.W1", "https://example.org/W1"):
        assert normalize_work_id(bad) is None, bad


# --- client ---------------------------------------------------------------------------------


def test_fetch_all_fixture_works() -> None:
    fake = FakeOpenAlex()
    with client_for(fake) as client:
        results = client.fetch_abstracts(IDS)
    assert [len(b) for b in fake.batch_ids()] == [50, 50, 50, 2]
    for wid in TEXT_IDS:
        assert results[wid] == FetchResult("ok", rebuild(WORKS[wid]["abstract_inverted_index"]))
    for wid in NULL_IDS:
        assert results[wid] == FetchResult("absent")


def test_batch_of_120_is_three_requests() -> None:
    fake = FakeOpenAlex()
    ids = IDS[:120]
    with client_for(fake) as client:
        results = client.fetch_abstracts(ids)
    batches = fake.batch_ids()
    assert len(fake.requests) == 3
    assert all(len(b) <= 50 for b in batches)
    assert sorted(sum(batches, [])) == sorted(ids)
    assert set(results) == set(ids)
    for request in fake.requests:
        assert request.url.params["select"] == "id,abstract_inverted_index"
        assert request.url.params["per_page"] == "50"


def test_api_key_and_mailto_are_sent() -> None:
    fake = FakeOpenAlex()
    with client_for(fake) as client:
        client.fetch_abstracts(IDS[:60] + ["W1"])  # two batches and a single look-up
    assert len(fake.requests) == 3
    for request in fake.requests:
        assert request.url.params["api_key"] == "key-123"
        assert request.url.params["mailto"] == "lead@example.org"
    fake = FakeOpenAlex()
    cfg = settings(openalex_api_key=None, openalex_mailto=None)
    with client_for(fake, settings=cfg) as client:
        client.fetch_abstracts(IDS[:1])
    assert "api_key" not in fake.requests[0].url.params
    assert "mailto" not in fake.requests[0].url.params


def test_ids_are_normalised_and_keyed_as_given() -> None:
    fake = FakeOpenAlex()
    wid = TEXT_IDS[0]
    given = [wid, f"https://openalex.org/{wid}", wid.lower(), "not-an-id", "W1|W2"]
    with client_for(fake) as client:
        results = client.fetch_abstracts(given)
    assert fake.batch_ids() == [[wid]]
    assert results[wid] == results[f"https://openalex.org/{wid}"] == results[wid.lower()]
    assert results[wid].state == "ok"
    assert results["not-an-id"] == FetchResult("absent", error=INVALID_ID)
    assert results["W1|W2"] == FetchResult("absent", error=INVALID_ID)


def test_null_abstract_is_absent_not_error() -> None:
    with client_for(FakeOpenAlex()) as client:
        assert client.fetch_abstracts(["W2755950973"]) == {"W2755950973": FetchResult("absent")}


def test_unknown_id_is_absent_not_found() -> None:
    fake = FakeOpenAlex()
    with client_for(fake) as client:
        results = client.fetch_abstracts([TEXT_IDS[0], "W1"])
    assert results["W1"] == FetchResult("absent", error=NOT_FOUND)
    assert results[TEXT_IDS[0]].state == "ok"
    assert [r.url.path for r in fake.requests] == ["/works", "/works/W1"]


def test_merged_id_follows_redirect() -> None:
    survivor = "W2149799184"
    fake = FakeOpenAlex(merged={"W999": survivor})
    with client_for(fake) as client:
        results = client.fetch_abstracts(["W999"])
    assert results["W999"].state == "ok"
    assert results["W999"].text == deinvert(WORKS[survivor]["abstract_inverted_index"])
    assert [r.url.path for r in fake.requests] == ["/works", "/works/W999", f"/works/{survivor}"]


def test_429_then_200_honours_retry_after() -> None:
    fake = FakeOpenAlex(script=[httpx.Response(429, headers={"Retry-After": "7"})])
    sleeps: list[float] = []
    with client_for(fake, sleeps) as client:
        results = client.fetch_abstracts(TEXT_IDS[:3])
    assert sleeps == [7.0]
    assert len(fake.requests) == 2
    assert all(r.state == "ok" for r in results.values())


def test_retry_after_as_http_date() -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    fake = FakeOpenAlex(script=[httpx.Response(503, headers={"Retry-After": when})])
    sleeps: list[float] = []
    with client_for(fake, sleeps) as client:
        assert client.fetch_abstracts(TEXT_IDS[:1])[TEXT_IDS[0]].state == "ok"
    assert len(sleeps) == 1 and 20 <= sleeps[0] <= 30


def test_long_retry_after_stops_retrying() -> None:
    fake = FakeOpenAlex(script=[httpx.Response(429, headers={"Retry-After": "3600"})])
    sleeps: list[float] = []
    with client_for(fake, sleeps) as client:
        result = client.fetch_abstracts(TEXT_IDS[:1])[TEXT_IDS[0]]
    assert sleeps == [] and len(fake.requests) == 1
    assert result.state == "error" and result.retry_after == 3600
    assert "429" in result.error


def test_5xx_then_200_backs_off() -> None:
    fake = FakeOpenAlex(script=[httpx.Response(500), httpx.Response(502)])
    sleeps: list[float] = []
    with client_for(fake, sleeps) as client:
        results = client.fetch_abstracts(TEXT_IDS[:2])
    assert sleeps == [0.5, 1.0]
    assert len(fake.requests) == 3
    assert all(r.state == "ok" for r in results.values())


def test_5xx_until_retries_run_out() -> None:
    fake = FakeOpenAlex(script=[httpx.Response(503)] * 10)
    sleeps: list[float] = []
    with client_for(fake, sleeps, retries=2) as client:
        result = client.fetch_abstracts(TEXT_IDS[:1])[TEXT_IDS[0]]
    assert len(fake.requests) == 3 and sleeps == [0.5, 1.0]
    assert result.state == "error" and result.error.startswith("HTTP 503")


def test_timeout_retries_then_error() -> None:
    fake = FakeOpenAlex(script=[raise_timeout] * 10)
    sleeps: list[float] = []
    with client_for(fake, sleeps) as client:
        results = client.fetch_abstracts(TEXT_IDS[:4])
    assert len(fake.requests) == 4  # one try and three retries
    assert sleeps == [0.5, 1.0, 2.0]
    assert {r.state for r in results.values()} == {"error"}
    assert results[TEXT_IDS[0]].error == "timeout: ReadTimeout"


def test_timeout_then_success() -> None:
    fake = FakeOpenAlex(script=[raise_timeout, raise_connect])
    with client_for(fake) as client:
        assert client.fetch_abstracts(TEXT_IDS[:1])[TEXT_IDS[0]].state == "ok"
    assert len(fake.requests) == 3


def test_connection_error_is_error_state() -> None:
    fake = FakeOpenAlex(script=[raise_connect] * 10)
    with client_for(fake, retries=0) as client:
        result = client.fetch_abstracts(TEXT_IDS[:1])[TEXT_IDS[0]]
    assert result.state == "error" and result.error.startswith("network error: ConnectError")
    assert len(fake.requests) == 1


def test_html_error_page_is_error_not_crash() -> None:
    page = httpx.Response(
        200, text="<html><body>Rate limited</body></html>", headers={"content-type": "text/html"}
    )
    fake = FakeOpenAlex(script=[page])
    sleeps: list[float] = []
    with client_for(fake, sleeps) as client:
        result = client.fetch_abstracts(TEXT_IDS[:2])[TEXT_IDS[1]]
    assert result.state == "error" and "non-JSON" in result.error and "text/html" in result.error
    assert len(fake.requests) == 1 and sleeps == []


def test_html_429_page_is_retried() -> None:
    page = httpx.Response(429, text="<html>Too many</html>", headers={"content-type": "text/html"})
    fake = FakeOpenAlex(script=[page])
    sleeps: list[float] = []
    with client_for(fake, sleeps) as client:
        assert client.fetch_abstracts(TEXT_IDS[:1])[TEXT_IDS[0]].state == "ok"
    assert sleeps == [0.5]


@pytest.mark.parametrize("status", [403, 400, 401, 404])
def test_4xx_is_not_retried(status: int) -> None:
    body = {"error": "Forbidden", "message": "Rate limit exceeded"} if status == 403 else {}
    fake = FakeOpenAlex(script=[httpx.Response(status, json=body)] * 5)
    sleeps: list[float] = []
    with client_for(fake, sleeps) as client:
        result = client.fetch_abstracts(TEXT_IDS[:1])[TEXT_IDS[0]]
    assert len(fake.requests) == 1 and sleeps == []
    assert result.state == "error" and result.error.startswith(f"HTTP {status}")
    if status == 403:
        assert "rate limit exceeded" in result.error


def test_results_without_list_and_malformed_index() -> None:
    fake = FakeOpenAlex(script=[httpx.Response(200, json={"meta": {}})])
    with client_for(fake) as client:
        assert client.fetch_abstracts(["W5"])["W5"].state == "error"
    works = {"W5": {"id": "https://openalex.org/W5", "abstract_inverted_index": {"a": "x0"}}}
    with client_for(FakeOpenAlex(works)) as client:
        result = client.fetch_abstracts(["W5"])["W5"]
    assert result.state == "error" and "malformed" in result.error


# --- cache ----------------------------------------------------------------------------------


def cached_rows(engine: Engine) -> dict[str, Any]:
    """The abstract_cache table as plain rows, by work id."""
    columns = [getattr(AbstractCache, c.name) for c in AbstractCache.__table__.columns]
    with read_session(engine) as session:
        return {row.work_id: row for row in session.execute(select(*columns))}


def test_cache_second_call_makes_no_request(db: Engine) -> None:
    fake = FakeOpenAlex()
    ids = TEXT_IDS[:3] + ["W2755950973", "W1"]
    with client_for(fake) as client:
        first = get_abstracts(db, ids, client=client, settings=settings())
        n = len(fake.requests)
        second = get_abstracts(db, ids, client=client, settings=settings())
    assert n == 2 and len(fake.requests) == 2
    assert first == second
    assert second[TEXT_IDS[0]].text == rebuild(WORKS[TEXT_IDS[0]]["abstract_inverted_index"])
    assert second["W2755950973"].state == "absent" and second["W2755950973"].error is None
    assert second["W1"].state == "absent" and second["W1"].error == NOT_FOUND
    assert "does not know this work" in second["W1"].message
    rows = cached_rows(db)
    assert {wid: r.state for wid, r in rows.items()} == {
        **dict.fromkeys(TEXT_IDS[:3], "ok"),
        "W2755950973": "absent",
        "W1": "absent",
    }
    assert all(r.fetched_at.tzinfo is not None for r in rows.values())


def test_text_round_trips_exactly_through_the_cache(db: Engine) -> None:
    index = {"one\u2028two": [0], "": [1], "end.\n\nNext": [2], "x": [5], "\u00e9t\u00e9": [6]}
    works = {"W7": {"id": "https://openalex.org/W7", "abstract_inverted_index": index}}
    with client_for(FakeOpenAlex(works)) as client:
        fetched = get_abstracts(db, ["W7"], client=client, settings=settings())["W7"]
    cached = get_abstracts(db, ["W7"], settings=settings(openalex_offline=True))["W7"]
    expected = "one\u2028two  end.\n\nNext x \u00e9t\u00e9"
    assert fetched.text == cached.text == expected
    assert cached.text.split("\n") == ["one\u2028two  end.", "", "Next x \u00e9t\u00e9"]


def test_one_write_transaction_per_batch(db: Engine) -> None:
    commits: list[int] = []
    event.listen(db, "commit", lambda conn: commits.append(1))
    fake = FakeOpenAlex()
    with client_for(fake) as client:
        states = get_abstracts(db, IDS[:120], client=client, settings=settings())
    assert len(fake.requests) == 3 and len(commits) == 3
    assert len(cached_rows(db)) == 120 and len(states) == 120


def test_error_is_cached_until_retry_after(db: Engine) -> None:
    clock = FakeClock()
    fake = FakeOpenAlex(script=[raise_timeout])
    cfg = settings()
    wid = TEXT_IDS[0]
    with client_for(fake, retries=0) as client:
        first = get_abstracts(db, [wid], client=client, settings=cfg, clock=clock)[wid]
        assert first.state == "error" and first.retry_after == clock.now + timedelta(seconds=120)
        assert "could not be reached (timeout: ReadTimeout)" in first.message
        clock.advance(119)
        again = get_abstracts(db, [wid], client=client, settings=cfg, clock=clock)[wid]
        assert again.state == "error" and len(fake.requests) == 1  # not hammered
        clock.advance(2)
        later = get_abstracts(db, [wid], client=client, settings=cfg, clock=clock)[wid]
    assert later.state == "ok" and len(fake.requests) == 2
    assert cached_rows(db)[wid].state == "ok" and cached_rows(db)[wid].retry_after is None


def test_server_retry_after_extends_the_error_hold(db: Engine) -> None:
    clock = FakeClock()
    fake = FakeOpenAlex(script=[httpx.Response(429, headers={"Retry-After": "3600"})])
    wid = TEXT_IDS[0]
    with client_for(fake) as client:
        first = get_abstracts(db, [wid], client=client, settings=settings(), clock=clock)[wid]
        assert first.retry_after == clock.now + timedelta(seconds=3600)
        clock.advance(600)
        assert (
            get_abstracts(db, [wid], client=client, settings=settings(), clock=clock)[wid].state
            == "error"
        )
        assert len(fake.requests) == 1
        clock.advance(3001)
        assert (
            get_abstracts(db, [wid], client=client, settings=settings(), clock=clock)[wid].state
            == "ok"
        )


def test_error_never_overwrites_a_cached_abstract(db: Engine) -> None:
    now = datetime(2026, 3, 1, tzinfo=UTC)
    abstracts._store(db, {"W5": FetchResult("ok", "text")}, now, 120)
    kept = abstracts._store(db, {"W5": FetchResult("error", error="timeout")}, now, 120)
    assert kept["W5"].state == "ok" and cached_rows(db)["W5"].text == "text"


def test_record_hint_in_message(db: Engine) -> None:
    wid = TEXT_IDS[0]
    with write_session(db) as session:
        session.add(Work(id=wid, record={"id": wid}, record_hash="h", has_abstract=True))
    with client_for(FakeOpenAlex(script=[raise_timeout]), retries=0) as client:
        state = get_abstracts(db, [wid], client=client, settings=settings())[wid]
    assert state.message.startswith("OpenAlex could not be reached (timeout: ReadTimeout)")
    assert "the record says this work has an abstract" in state.message


def test_offline_mode_makes_no_request(db: Engine) -> None:
    fake = FakeOpenAlex()
    wid, other = TEXT_IDS[0], TEXT_IDS[1]
    with client_for(fake) as client:
        get_abstracts(db, [wid], client=client, settings=settings())
        n = len(fake.requests)
        offline = settings(openalex_offline=True)
        states = get_abstracts(db, [wid, other], client=client, settings=offline)
        report = prefetch(db, [wid, other, "W3"], client=client, settings=offline)
        prefetcher = Prefetcher(db, client=client, settings=offline)
        assert prefetcher.submit([other]) is None
        prefetcher.close()
    assert len(fake.requests) == n == 1
    assert states[wid].state == "ok"
    assert states[other].state == "offline" and "Offline mode" in states[other].message
    assert (report.cached, report.offline, report.fetched) == (1, 2, 0)


def test_offline_without_client_builds_none(db: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("no client in offline mode")

    monkeypatch.setattr(abstracts, "OpenAlexClient", forbidden)
    state = show_abstract(db, "W42", settings=settings(openalex_offline=True))
    assert state == AbstractState(
        "W42", "offline", message="Offline mode: this abstract is not in the local cache."
    )


def test_fetch_false_is_pending(db: Engine) -> None:
    fake = FakeOpenAlex()
    wid = TEXT_IDS[0]
    with client_for(fake) as client:
        state = get_abstracts(db, [wid], client=client, settings=settings(), fetch=False)[wid]
        assert state.state == "pending" and fake.requests == []
        shown = show_abstract(db, f"https://openalex.org/{wid}", client=client, settings=settings())
    assert shown.state == "ok" and shown.work_id == wid and shown.text


def test_invalid_id_in_get_abstracts(db: Engine) -> None:
    fake = FakeOpenAlex()
    with client_for(fake) as client:
        states = get_abstracts(db, ["nonsense"], client=client, settings=settings())
    assert states["nonsense"].state == "absent" and states["nonsense"].error == INVALID_ID
    assert fake.requests == [] and cached_rows(db) == {}


# --- prefetch -------------------------------------------------------------------------------


def test_prefetch_report(db: Engine) -> None:
    clock = FakeClock()
    with client_for(FakeOpenAlex()) as client:
        get_abstracts(db, TEXT_IDS[:3], client=client, settings=settings())
        ids = TEXT_IDS[:8] + ["W2041234663", "W1", "nonsense", TEXT_IDS[0]]
        seen: list[int] = []
        report = prefetch(db, ids, client=client, settings=settings(), progress=seen.append)
    assert (report.requested, report.cached, report.fetched) == (11, 3, 5)
    assert (report.absent, report.failed, report.invalid) == (2, 0, 1)
    assert seen == [10]
    failing = FakeOpenAlex(script=[httpx.Response(503)] * 5)
    with client_for(failing, retries=0) as client:
        more = TEXT_IDS[8:10]
        failed = prefetch(db, more, client=client, settings=settings(), clock=clock)
        deferred = prefetch(db, more, client=client, settings=settings(), clock=clock)
    assert failed.failed == 2 and failed.errors == {"HTTP 503, server error": 2}
    assert deferred.deferred == 2 and len(failing.requests) == 1


def test_prefetcher_warms_cache_and_deduplicates(db: Engine) -> None:
    entered, release = threading.Event(), threading.Event()

    def slow(request: httpx.Request) -> httpx.Response:
        entered.set()
        assert release.wait(10)
        return fake.serve(request)

    fake = FakeOpenAlex(script=[slow])
    client = client_for(fake)
    prefetcher = Prefetcher(db, client=client, settings=settings())
    try:
        first = prefetcher.submit(TEXT_IDS[:5])
        assert first is not None and entered.wait(10)
        assert prefetcher.in_flight(TEXT_IDS[0])
        assert prefetcher.submit(TEXT_IDS[:5]) is None  # all in flight: nothing queued
        second = prefetcher.submit(TEXT_IDS[3:8])
        assert second is not None
        release.set()
        assert first.result(10).fetched == 5
        assert second.result(10).fetched == 3
    finally:
        prefetcher.close()
        client.close()
    assert fake.batch_ids() == [TEXT_IDS[:5], TEXT_IDS[5:8]]
    assert not prefetcher.in_flight(TEXT_IDS[0])
    assert prefetcher.submit(TEXT_IDS[:1]) is None  # closed
    states = get_abstracts(db, TEXT_IDS[:8], settings=settings(openalex_offline=True))
    assert {s.state for s in states.values()} == {"ok"}


def test_prefetcher_submit_later_runs_the_query_in_its_thread(db: Engine) -> None:
    fake = FakeOpenAlex()
    client = client_for(fake)
    caller = threading.get_ident()
    asked: list[int] = []

    def find_ids() -> list[str]:
        asked.append(threading.get_ident())
        return TEXT_IDS[:3]

    prefetcher = Prefetcher(db, client=client, settings=settings())
    try:
        prefetcher.submit_later(find_ids)
        deadline = time.monotonic() + 10
        while fake.batch_ids() == [] and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        prefetcher.close()
        client.close()
    assert asked and asked[0] != caller
    assert fake.batch_ids() == [TEXT_IDS[:3]]
    offline = Prefetcher(db, client=client, settings=settings(openalex_offline=True))
    offline.submit_later(find_ids)
    offline.close()
    assert len(asked) == 1  # offline: the query is not even run


def test_prefetcher_submit_later_logs_a_failing_query(
    db: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> list[str]:
        raise RuntimeError("database is locked")

    prefetcher = Prefetcher(db, client=client_for(FakeOpenAlex()), settings=settings())
    prefetcher.submit_later(broken)
    deadline = time.monotonic() + 10
    while "prefetch failed" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.02)
    prefetcher.close()
    assert "finding the works to prefetch failed" in caplog.text
    assert "database is locked" in caplog.text


def test_prefetcher_does_not_pile_up(db: Engine) -> None:
    release = threading.Event()

    def slow(request: httpx.Request) -> httpx.Response:
        assert release.wait(10)
        return fake.serve(request)

    fake = FakeOpenAlex(script=[slow])
    client = client_for(fake)
    prefetcher = Prefetcher(db, client=client, settings=settings(), max_queued=2)
    try:
        assert prefetcher.submit([TEXT_IDS[0]]) is not None
        assert prefetcher.submit([TEXT_IDS[1]]) is not None
        assert prefetcher.submit([TEXT_IDS[2]]) is None
    finally:
        release.set()
        prefetcher.close()
        client.close()
    assert prefetcher.last_report is not None and prefetcher.last_report.fetched == 1


@pytest.mark.pg
def test_cache_on_postgresql(pg_url: str) -> None:
    """The same upserts and round trips on PostgreSQL (needs LABELING_TEST_PG_URL)."""
    engine = make_engine(pg_url)
    clock = FakeClock()
    index = {"one\u2028two": [0], "": [1], "end.\n\nNext": [2]}
    works = {**WORKS, "W7": {"id": "https://openalex.org/W7", "abstract_inverted_index": index}}
    fake = FakeOpenAlex(works, script=[raise_timeout])
    ids = ["W7", *IDS[:60]]
    try:
        with client_for(fake, retries=0) as client:
            failed = get_abstracts(engine, ids, client=client, settings=settings(), clock=clock)
            assert {failed[w].state for w in IDS[:49]} == {"error"}
            clock.advance(121)
            states = get_abstracts(engine, ids, client=client, settings=settings(), clock=clock)
        assert states["W7"].text == "one\u2028two  end.\n\nNext"
        assert {states[w].state for w in TEXT_IDS[:50]} == {"ok"}
        rows = cached_rows(engine)
        assert len(rows) == 61 and rows["W7"].fetched_at == clock.now
        assert all(r.retry_after is None for r in rows.values())
    finally:
        engine.dispose()


def concurrent_stores(engine: Engine, caplog: pytest.LogCaptureFixture) -> None:
    """Eight threads cache the same 50 works at once: no error, one row each, all ok."""
    now = datetime(2026, 3, 1, tzinfo=UTC)
    results = {wid: FetchResult("ok", f"text of {wid}") for wid in IDS[:50]}
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def store() -> None:
        try:
            barrier.wait(10)
            abstracts._store(engine, results, now, 120)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=store) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert not [r for r in caplog.records if "could not cache" in r.getMessage()]
    rows = cached_rows(engine)
    assert len(rows) == 50 and {r.state for r in rows.values()} == {"ok"}


def test_concurrent_stores_sqlite(db: Engine, caplog: pytest.LogCaptureFixture) -> None:
    concurrent_stores(db, caplog)


@pytest.mark.pg
def test_concurrent_stores_postgresql(pg_url: str, caplog: pytest.LogCaptureFixture) -> None:
    engine = make_engine(pg_url)
    try:
        concurrent_stores(engine, caplog)
    finally:
        engine.dispose()
