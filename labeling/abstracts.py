"""Abstracts from OpenAlex: de-inversion, a batched retrying client, a database cache, prefetch.

Every failure ends in a value, never an exception for the caller:
- null (or empty) ``abstract_inverted_index``: "absent", error None;
- id missing from a batch answer and 404 on the single-work look-up: "absent", error NOT_FOUND
  (a merged id follows its 301 to the surviving work and answers "ok");
- 429, 5xx, timeouts, connection errors: retried with exponential backoff, honouring
  ``Retry-After`` up to MAX_RETRY_AFTER s (a longer one stops retrying), then "error";
- 403 (rate limit) and other 4xx, non-JSON bodies (HTML pages, even with 200), malformed
  indexes: "error" at once.
Errors are cached ERROR_RETRY_SECONDS (or the server's longer ``Retry-After``) so a dead API is
not hammered; "ok" and "absent" are cached forever.
"""

from __future__ import annotations

import email.utils
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from db.engine import read_session, write_session
from db.models import AbstractCache, Work, utcnow
from labeling.settings import Settings, get_settings

log = logging.getLogger(__name__)

OK, ABSENT, ERROR, OFFLINE, PENDING = "ok", "absent", "error", "offline", "pending"
BATCH_SIZE = 50  # OpenAlex accepts at most 50 values in one OR filter
ERROR_RETRY_SECONDS = 120.0
MAX_RETRY_AFTER = 60.0
MAX_ERROR_HOLD = 86_400.0
NOT_FOUND = "not found in OpenAlex"
INVALID_ID = "not an OpenAlex work id"
SELECT = "id,abstract_inverted_index"
_ID_RE = re.compile(r"(?:(?:https?://)?(?:api\.)?openalex\.org/)?(?:works/)?W(\d{1,30})", re.I)
Clock = Callable[[], datetime]


def normalize_work_id(work_id: str) -> str | None:
    """The short id "W123" of an OpenAlex work id or URL, or None if it is not one.

    Args:
        work_id: "W123", "w123", "https://openalex.org/W123" or an API URL of the work.
    """
    match = _ID_RE.fullmatch(str(work_id).strip())
    return f"W{match.group(1)}" if match else None


def deinvert(index: dict[str, list[int]] | None) -> str | None:
    """Rebuild an abstract from an OpenAlex inverted index (None stays None).

    Args:
        index: word -> positions. All (word, position) pairs are ordered by position and the
            words joined with single spaces: gaps add nothing, an empty-string word yields a
            double space, words are kept verbatim ("\\n\\n" and U+2028 included).
    """
    if index is None:
        return None
    pairs = [(position, word) for word, positions in index.items() for position in positions]
    pairs.sort(key=lambda pair: pair[0])
    return " ".join(word for _, word in pairs)


@dataclass(frozen=True, slots=True)
class FetchResult:
    """What OpenAlex said about one work: state "ok" | "absent" | "error", text, error."""

    state: str
    text: str | None = None
    error: str | None = None
    retry_after: float | None = None  # seconds the server asked us to wait (errors only)


def _chunks(items: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds from a Retry-After header (seconds or HTTP date), None if absent or invalid."""
    value = response.headers.get("retry-after", "").strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        when = when if when.tzinfo else when.replace(tzinfo=UTC)
        seconds = (when - utcnow()).total_seconds()
    return min(max(0.0, seconds), MAX_ERROR_HOLD) if math.isfinite(seconds) else None


def _detail(response: httpx.Response) -> str:
    """A short reason from a JSON error body, or ""."""
    try:
        body = response.json()
    except ValueError:
        return ""
    reason = (body.get("message") or body.get("error")) if isinstance(body, dict) else None
    return f": {str(reason)[:200]}" if reason else ""


def _from_work(work: dict[str, Any]) -> FetchResult:
    """The result for one work object of an OpenAlex answer."""
    index = work.get("abstract_inverted_index")
    if index is None:
        return FetchResult(ABSENT)
    if not isinstance(index, dict) or not all(
        isinstance(ps, list) and all(type(p) is int for p in ps) for ps in index.values()
    ):
        return FetchResult(ERROR, error="malformed abstract_inverted_index")
    text = deinvert(index)
    return FetchResult(OK, text=text) if text and text.strip() else FetchResult(ABSENT)


class OpenAlexClient:
    """A small OpenAlex client for abstracts: batched, with a timeout and retries."""

    backoff = 0.5  # first backoff delay in seconds, doubled on each retry
    max_backoff = 8.0
    max_retry_after = MAX_RETRY_AFTER  # a longer Retry-After ends the retries at once
    resolve_missing = True  # look up ids missing from a batch answer one by one

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        retries: int | None = None,
        timeout: float | None = None,
    ) -> None:
        """Build the client.

        Args:
            settings: URL, api_key, mailto, timeout and retries (default: get_settings()).
            transport: httpx transport (tests pass httpx.MockTransport).
            sleep: called with the seconds to wait between attempts.
            retries: retries after the first attempt (default: settings.openalex_retries).
            timeout: seconds per request (default: settings.openalex_timeout).
        """
        s = settings or get_settings()
        self.retries = max(0, s.openalex_retries if retries is None else retries)
        self._sleep = sleep
        self._auth = {"api_key": s.openalex_api_key, "mailto": s.openalex_mailto}
        self._auth = {k: v for k, v in self._auth.items() if v}
        self._http = httpx.Client(
            base_url=s.openalex_url.rstrip("/"),
            timeout=s.openalex_timeout if timeout is None else timeout,
            transport=transport,
            follow_redirects=True,
            headers={"Accept": "application/json", "User-Agent": "labeling-tool"},
        )

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._http.close()

    def __enter__(self) -> OpenAlexClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def fetch_abstracts(self, ids: Iterable[str]) -> dict[str, FetchResult]:
        """Fetch abstracts in requests of at most 50 ids.

        Args:
            ids: work ids or URLs; the result is keyed by the ids exactly as given. Ids that
                are not OpenAlex work ids answer "absent" with error INVALID_ID, unrequested.
        """
        out: dict[str, FetchResult] = {}
        wanted: dict[str, list[str]] = {}
        for given in ids:
            norm = normalize_work_id(given)
            if norm is None:
                out[given] = FetchResult(ABSENT, error=INVALID_ID)
            else:
                wanted.setdefault(norm, []).append(given)
        found: dict[str, FetchResult] = {}
        for batch in _chunks(list(wanted), BATCH_SIZE):
            found.update(self._fetch_batch(batch))
        out.update({given: found[norm] for norm, gs in wanted.items() for given in gs})
        return out

    def _fetch_batch(self, ids: list[str]) -> dict[str, FetchResult]:
        params = {"filter": "openalex_id:" + "|".join(ids), "select": SELECT, "per_page": "50"}
        answer = self._request("/works", params)
        if isinstance(answer, FetchResult):
            return dict.fromkeys(ids, answer)
        results = answer.get("results") if answer is not None else None
        if not isinstance(results, list):
            return dict.fromkeys(ids, FetchResult(ERROR, error="OpenAlex answer has no results"))
        out = {}
        for work in results:
            norm = normalize_work_id(str(work.get("id", ""))) if isinstance(work, dict) else None
            if norm in ids:
                out[norm] = _from_work(work)
        for norm in ids:
            if norm not in out:
                missing = FetchResult(ABSENT, error=NOT_FOUND)
                out[norm] = self._fetch_one(norm) if self.resolve_missing else missing
        return out

    def _fetch_one(self, work_id: str) -> FetchResult:
        """Single-work look-up: follows a merged id's 301 to the surviving work."""
        answer = self._request(f"/works/{work_id}", {"select": SELECT}, allow_404=True)
        if isinstance(answer, FetchResult):
            return answer
        return FetchResult(ABSENT, error=NOT_FOUND) if answer is None else _from_work(answer)

    def _request(
        self, path: str, params: dict[str, str], *, allow_404: bool = False
    ) -> dict[str, Any] | FetchResult | None:
        """GET with retries: the JSON object, None on an allowed 404, or an error result."""
        params = {**params, **self._auth}
        failure = FetchResult(ERROR, error="no attempt made")
        for attempt in range(self.retries + 1):
            wait: float | None = None
            try:
                response = self._http.get(path, params=params)
            except httpx.TimeoutException as exc:
                failure = FetchResult(ERROR, error=f"timeout: {type(exc).__name__}")
            except httpx.TransportError as exc:
                failure = FetchResult(ERROR, error=f"network error: {type(exc).__name__} {exc}")
            except httpx.HTTPError as exc:  # too many redirects, undecodable body: no retry
                return FetchResult(ERROR, error=f"request failed: {type(exc).__name__} {exc}")
            else:
                status = response.status_code
                if 200 <= status < 300:
                    return self._json(response)
                if status == 404 and allow_404:
                    return None
                detail = _detail(response)
                if status == 403:
                    error = f"HTTP 403, rate limit exceeded{detail}"
                    return FetchResult(ERROR, error=error, retry_after=_retry_after(response))
                if status != 429 and status < 500:
                    return FetchResult(ERROR, error=f"HTTP {status}{detail}")
                wait = _retry_after(response)
                kind = "daily limit exceeded" if status == 429 else "server error"
                failure = FetchResult(
                    ERROR, error=f"HTTP {status}, {kind}{detail}", retry_after=wait
                )
                if wait is not None and wait > self.max_retry_after:
                    return failure
            if attempt == self.retries:
                break
            delay = wait if wait is not None else min(self.max_backoff, self.backoff * 2**attempt)
            log.info("OpenAlex %s (try %d); retrying in %.1fs", failure.error, attempt + 1, delay)
            self._sleep(delay)
        return failure

    @staticmethod
    def _json(response: httpx.Response) -> dict[str, Any] | FetchResult:
        try:
            data = response.json()
        except ValueError:
            ctype = response.headers.get("content-type", "no content type")
            error = f"HTTP {response.status_code} with a non-JSON body ({ctype})"
            return FetchResult(ERROR, error=error)
        if not isinstance(data, dict):
            return FetchResult(ERROR, error="OpenAlex answered with unexpected JSON")
        return data


@dataclass(frozen=True, slots=True)
class AbstractState:
    """A work's abstract for the UI: state, text, error and a sentence for people.

    state: "ok" | "absent" (no abstract; error NOT_FOUND or INVALID_ID when the work itself is
    unknown) | "error" (recent failure) | "offline" (offline mode and not cached) | "pending"
    (not cached and not fetched by this call: fetch=False or a stale error).
    """

    work_id: str
    state: str
    text: str | None = None
    error: str | None = None
    message: str = ""
    fetched_at: datetime | None = None
    retry_after: datetime | None = None


_COLUMNS = ("state", "text", "error", "fetched_at", "retry_after")


def _entry(row: AbstractCache) -> AbstractState:
    return AbstractState(row.work_id, **{name: getattr(row, name) for name in _COLUMNS})


def _load(engine: Engine, ids: Sequence[str], now: datetime) -> dict[str, AbstractState]:
    """Fresh cache entries: ok and absent always, errors until their retry_after."""
    fresh: dict[str, AbstractState] = {}
    with read_session(engine) as session:
        for chunk in _chunks(ids, 500):
            for row in session.scalars(
                select(AbstractCache).where(AbstractCache.work_id.in_(chunk))
            ):
                if row.state != ERROR or (row.retry_after is not None and row.retry_after > now):
                    fresh[row.work_id] = _entry(row)
    return fresh


def _store(
    engine: Engine, results: dict[str, FetchResult], now: datetime, hold: float
) -> dict[str, AbstractState]:
    """Upsert one batch in one transaction; an error never overwrites a known abstract."""
    new: dict[str, AbstractState] = {}
    for wid, r in results.items():
        until = (
            now + timedelta(seconds=max(hold, r.retry_after or 0.0)) if r.state == ERROR else None
        )
        new[wid] = AbstractState(wid, r.state, r.text, r.error, "", now, until)
    for attempt in range(3):
        try:
            kept: dict[str, AbstractState] = {}
            with write_session(engine) as session:
                query = select(AbstractCache).where(AbstractCache.work_id.in_(list(new)))
                rows = {row.work_id: row for row in session.scalars(query)}
                for wid, e in new.items():
                    row = rows.get(wid)
                    if row is None:
                        session.add(
                            AbstractCache(work_id=wid, **{c: getattr(e, c) for c in _COLUMNS})
                        )
                    elif e.state == ERROR and row.state != ERROR:
                        kept[wid] = _entry(row)
                    else:
                        for name in _COLUMNS:
                            setattr(row, name, getattr(e, name))
            return {**new, **kept}
        except IntegrityError:  # another process inserted one of the ids first: update it
            if attempt == 2:
                log.exception("could not cache %d abstracts", len(new))
        except SQLAlchemyError:  # a failed cache write must not hide fetched abstracts
            log.exception("could not cache %d abstracts", len(new))
            break
    return new


def _fetched(
    engine: Engine,
    ids: Sequence[str],
    client: OpenAlexClient | None,
    settings: Settings,
    clock: Clock,
    hold: float,
) -> Iterator[dict[str, AbstractState]]:
    """Fetch and cache `ids` batch by batch (one transaction each), yielding the entries."""
    if not ids:
        return
    own = client is None
    client = client or OpenAlexClient(settings)
    try:
        for batch in _chunks(ids, BATCH_SIZE):
            yield _store(engine, client.fetch_abstracts(batch), clock(), hold)
    finally:
        if own:
            client.close()


def _record_hints(engine: Engine, ids: Sequence[str]) -> dict[str, bool]:
    """The frame's has_abstract flag of `ids`, where the frame has one."""
    hints: dict[str, bool] = {}
    try:
        with read_session(engine) as session:
            for chunk in _chunks(ids, 500):
                query = select(Work.id, Work.has_abstract).where(Work.id.in_(chunk))
                hints.update({w: bool(f) for w, f in session.execute(query) if f is not None})
    except SQLAlchemyError:
        log.exception("could not read has_abstract flags")
    return hints


def _message(state: str, error: str | None, retry: datetime | None, hint: bool | None) -> str:
    """One sentence for the annotator about an abstract's state."""
    if state == OK:
        return "Abstract from OpenAlex."
    if state == ABSENT and error == INVALID_ID:
        return "This is not a valid OpenAlex work id."
    if state == ABSENT and error == NOT_FOUND:
        base = "OpenAlex does not know this work (deleted or merged id)"
    elif state == ABSENT:
        base = "OpenAlex has no abstract for this work (some publishers withhold them)"
    elif state == ERROR:
        reached = (error or "").startswith(("timeout", "network"))
        base = f"OpenAlex {'could not be reached' if reached else 'did not deliver it'} ({error})"
        base += f"; next try after {retry:%H:%M:%S} UTC" if retry else ""
    elif state == OFFLINE:
        base = "Offline mode: this abstract is not in the local cache"
    else:
        base = "The abstract has not been fetched yet"
    if hint is not None:
        base += f"; the record says this work has {'an' if hint else 'no'} abstract"
    return base + "."


def get_abstracts(
    engine: Engine,
    ids: Iterable[str],
    *,
    client: OpenAlexClient | None = None,
    settings: Settings | None = None,
    fetch: bool = True,
    clock: Clock = utcnow,
    error_hold: float = ERROR_RETRY_SECONDS,
) -> dict[str, AbstractState]:
    """The abstract state of each id, from the cache or fetched (and cached) in batches of 50.

    Args:
        engine: database holding the abstract_cache table.
        ids: work ids or URLs; the result is keyed by the ids exactly as given.
        client: OpenAlex client to use (default: one built from settings, closed after).
        settings: default get_settings(); openalex_offline=True never calls the network and
            answers "offline" for uncached ids.
        fetch: False answers "pending" for uncached ids instead of fetching them.
        clock: the current UTC time (tests move it forward).
        error_hold: seconds an error is cached before the work is fetched again.
    """
    settings = settings or get_settings()
    given = {wid: normalize_work_id(wid) for wid in ids}
    unique = list(dict.fromkeys(norm for norm in given.values() if norm))
    known = _load(engine, unique, clock()) if unique else {}
    if fetch and not settings.openalex_offline:
        missing = [norm for norm in unique if norm not in known]
        for entries in _fetched(engine, missing, client, settings, clock, error_hold):
            known.update(entries)
    hints = _record_hints(engine, [n for n in unique if n not in known or known[n].state != OK])
    states: dict[str, AbstractState] = {}
    waiting = OFFLINE if settings.openalex_offline else PENDING
    for wid, norm in given.items():
        if norm is None:
            e = AbstractState(wid, ABSENT, error=INVALID_ID)
        else:
            e = known.get(norm) or AbstractState(norm, waiting)
        hint = hints.get(e.work_id)
        states[wid] = replace(e, message=_message(e.state, e.error, e.retry_after, hint))
    return states


def show_abstract(
    engine: Engine,
    work_id: str,
    *,
    client: OpenAlexClient | None = None,
    settings: Settings | None = None,
) -> AbstractState:
    """One work's abstract, from the cache or fetched (for `labeling abstracts show`).

    Args:
        engine: database holding the abstract cache.
        work_id: "W123" or an OpenAlex URL.
        client: OpenAlex client (default: built from settings).
        settings: default get_settings().
    """
    return get_abstracts(engine, [work_id], client=client, settings=settings)[work_id]


@dataclass
class PrefetchReport:
    """Counts of one prefetch run, and each distinct error message with its count."""

    requested: int = 0
    cached: int = 0  # already cached as ok or absent
    fetched: int = 0  # fetched now, with an abstract
    absent: int = 0  # fetched now, without one (or unknown to OpenAlex)
    failed: int = 0  # fetch failed now; cached as an error for a while
    deferred: int = 0  # a recent error is cached: not asked again yet
    offline: int = 0  # not cached and offline mode is on
    invalid: int = 0  # not an OpenAlex work id
    errors: dict[str, int] = field(default_factory=dict)


def prefetch(
    engine: Engine,
    ids: Iterable[str],
    *,
    client: OpenAlexClient | None = None,
    settings: Settings | None = None,
    clock: Clock = utcnow,
    progress: Callable[[int], None] | None = None,
) -> PrefetchReport:
    """Warm the cache for `ids` (for `labeling abstracts prefetch` and the Prefetcher).

    Args:
        engine: database holding the abstract cache.
        ids: work ids or URLs (duplicates count once).
        client: OpenAlex client (default: built from settings, closed after).
        settings: default get_settings(); offline mode fetches nothing.
        clock: the current UTC time.
        progress: called with the number of ids handled after each chunk of 500.
    """
    settings = settings or get_settings()
    norms = [normalize_work_id(wid) for wid in ids]
    unique = list(dict.fromkeys(norm for norm in norms if norm))
    report = PrefetchReport(invalid=norms.count(None))
    report.requested = len(unique) + report.invalid
    own = client is None and not settings.openalex_offline
    client = OpenAlexClient(settings) if own else client
    try:
        for chunk in _chunks(unique, 500):
            known = _load(engine, chunk, clock())
            report.deferred += sum(e.state == ERROR for e in known.values())
            report.cached += sum(e.state != ERROR for e in known.values())
            missing = [norm for norm in chunk if norm not in known]
            if settings.openalex_offline:
                report.offline, missing = report.offline + len(missing), []
            for entries in _fetched(engine, missing, client, settings, clock, ERROR_RETRY_SECONDS):
                for e in entries.values():
                    if e.state == ERROR:
                        report.failed += 1
                        report.errors[e.error or "?"] = report.errors.get(e.error or "?", 0) + 1
                    elif e.state == OK:
                        report.fetched += 1
                    else:
                        report.absent += 1
            if progress:
                progress(len(chunk))
    finally:
        if own and client is not None:
            client.close()
    return report


class Prefetcher:
    """Warms the cache ahead of the annotator in one background thread; submit never blocks."""

    def __init__(
        self,
        engine: Engine,
        *,
        client: OpenAlexClient | None = None,
        settings: Settings | None = None,
        max_queued: int = 8,
    ) -> None:
        """Build the prefetcher (one per process, e.g. held by st.cache_resource).

        Args:
            engine: database holding the abstract cache.
            client: OpenAlex client (default: one built in the worker thread, closed by close()).
            settings: default get_settings(); offline mode makes submit() a no-op.
            max_queued: most submissions waiting or running; further ones are dropped.
        """
        self._engine, self._client, self._own = engine, client, client is None
        self._settings = settings or get_settings()
        self._max_queued = max_queued
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="abstracts")
        self._lock = threading.Lock()
        self._in_flight: set[str] = set()
        self._queued = 0
        self._closed = False
        self.last_report: PrefetchReport | None = None

    def submit(self, ids: Iterable[str]) -> Future[PrefetchReport] | None:
        """Queue the ids not already in flight; None when nothing was queued.

        Args:
            ids: work ids or URLs, e.g. the next works of an annotator's queue.
        """
        norms = list(dict.fromkeys(n for n in map(normalize_work_id, ids) if n))
        with self._lock:
            if self._closed or self._settings.openalex_offline or self._queued >= self._max_queued:
                return None
            new = [n for n in norms if n not in self._in_flight]
            if not new:
                return None
            self._in_flight.update(new)
            self._queued += 1
        return self._executor.submit(self._run, new)

    def in_flight(self, work_id: str) -> bool:
        """True while the work is queued or being fetched.

        Args:
            work_id: work id or URL.
        """
        with self._lock:
            return normalize_work_id(work_id) in self._in_flight

    def _run(self, ids: list[str]) -> PrefetchReport:
        try:
            if self._client is None:
                self._client = OpenAlexClient(self._settings)
            report = prefetch(self._engine, ids, client=self._client, settings=self._settings)
            self.last_report = report
            return report
        except Exception:
            log.exception("abstract prefetch failed for %d works", len(ids))
            raise
        finally:
            with self._lock:
                self._in_flight.difference_update(ids)
                self._queued -= 1

    def close(self, wait: bool = True) -> None:
        """Stop taking work, drop queued submissions, close the client it built.

        Args:
            wait: wait for the running submission (the client is only closed then).
        """
        with self._lock:
            self._closed = True
        self._executor.shutdown(wait=wait, cancel_futures=True)
        if wait and self._own and self._client is not None:
            self._client.close()
