"""Abstracts for the UI: a database cache over the OpenAlex client, get/prefetch, a prefetcher.

The HTTP side (batching, retries, Retry-After, parsing, de-inversion) is
labeling.abstracts.openalex;
its names are re-exported here. Errors are cached ERROR_RETRY_SECONDS (or the server's longer
``Retry-After``) so a dead API is not hammered; "ok" and "absent" are cached forever.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from db.engine import read_session, write_session
from db.models import AbstractCache, Work, utcnow
from labeling.abstracts.openalex import (
    ABSENT,
    BATCH_SIZE,
    ERROR,
    INVALID_ID,
    MAX_ERROR_HOLD,
    MAX_RETRY_AFTER,
    NOT_FOUND,
    OK,
    FetchResult,
    OpenAlexClient,
    chunks,
    deinvert,
    normalize_work_id,
)
from labeling.retrying import retry_now
from labeling.settings import Settings

__all__ = [
    "ABSENT",
    "BATCH_SIZE",
    "ERROR",
    "ERROR_RETRY_SECONDS",
    "INVALID_ID",
    "MAX_ERROR_HOLD",
    "MAX_RETRY_AFTER",
    "NOT_FOUND",
    "OFFLINE",
    "OK",
    "PENDING",
    "AbstractState",
    "FetchResult",
    "OpenAlexClient",
    "PrefetchReport",
    "Prefetcher",
    "deinvert",
    "get_abstracts",
    "normalize_work_id",
    "prefetch",
    "show_abstract",
]

log = logging.getLogger(__name__)

OFFLINE, PENDING = "offline", "pending"
ERROR_RETRY_SECONDS = 120.0
Clock = Callable[[], datetime]


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
        for chunk in chunks(ids, 500):
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

    def write() -> dict[str, AbstractState]:
        kept: dict[str, AbstractState] = {}
        with write_session(engine) as session:
            query = select(AbstractCache).where(AbstractCache.work_id.in_(list(new)))
            rows = {row.work_id: row for row in session.scalars(query)}
            for wid, e in new.items():
                row = rows.get(wid)
                if row is None:
                    session.add(AbstractCache(work_id=wid, **{c: getattr(e, c) for c in _COLUMNS}))
                elif e.state == ERROR and row.state != ERROR:
                    kept[wid] = _entry(row)
                else:
                    for name in _COLUMNS:
                        setattr(row, name, getattr(e, name))
        return {**new, **kept}

    try:  # another process inserted one of the ids first (IntegrityError): update it
        return retry_now(write, attempts=3, retry_on=_inserted_first)
    except SQLAlchemyError:  # a failed cache write must not hide fetched abstracts
        log.exception("could not cache %d abstracts", len(new))
        return new


def _inserted_first(exc: BaseException) -> bool:
    """A concurrent writer cached one of the ids first: the retry updates its row."""
    return isinstance(exc, IntegrityError)


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
        for batch in chunks(ids, BATCH_SIZE):
            yield _store(engine, client.fetch_abstracts(batch), clock(), hold)
    finally:
        if own:
            client.close()


def _record_hints(engine: Engine, ids: Sequence[str]) -> dict[str, bool]:
    """The frame's has_abstract flag of `ids`, where the frame has one."""
    hints: dict[str, bool] = {}
    try:
        with read_session(engine) as session:
            for chunk in chunks(ids, 500):
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
        base = "OpenAlex has not delivered it yet"
    if hint is not None:
        base += f"; the record says this work has {'an' if hint else 'no'} abstract"
    return base + "."


def get_abstracts(
    engine: Engine,
    ids: Iterable[str],
    *,
    settings: Settings,
    client: OpenAlexClient | None = None,
    fetch: bool = True,
    clock: Clock = utcnow,
    error_hold: float = ERROR_RETRY_SECONDS,
) -> dict[str, AbstractState]:
    """The abstract state of each id, from the cache or fetched (and cached) in batches of 50.

    Args:
        engine: database holding the abstract_cache table.
        ids: work ids or URLs; the result is keyed by the ids exactly as given.
        client: OpenAlex client to use (default: one built from settings, closed after).
        settings: the OpenAlex settings; openalex_offline=True never calls the network and
            answers "offline" for uncached ids.
        fetch: False answers "pending" for uncached ids instead of fetching them.
        clock: the current UTC time (tests move it forward).
        error_hold: seconds an error is cached before the work is fetched again.
    """
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
    settings: Settings,
    client: OpenAlexClient | None = None,
) -> AbstractState:
    """One work's abstract, from the cache or fetched (for `labeling abstracts show`).

    Args:
        engine: database holding the abstract cache.
        work_id: "W123" or an OpenAlex URL.
        client: OpenAlex client (default: built from settings).
        settings: the OpenAlex settings.
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
    settings: Settings,
    client: OpenAlexClient | None = None,
    clock: Clock = utcnow,
    progress: Callable[[int], None] | None = None,
) -> PrefetchReport:
    """Warm the cache for `ids` (for `labeling abstracts prefetch` and the Prefetcher).

    Args:
        engine: database holding the abstract cache.
        ids: work ids or URLs (duplicates count once).
        client: OpenAlex client (default: built from settings, closed after).
        settings: the OpenAlex settings; offline mode fetches nothing.
        clock: the current UTC time.
        progress: called with the number of ids handled after each chunk of 500.
    """
    norms = [normalize_work_id(wid) for wid in ids]
    unique = list(dict.fromkeys(norm for norm in norms if norm))
    report = PrefetchReport(invalid=norms.count(None))
    report.requested = len(unique) + report.invalid
    own = client is None and not settings.openalex_offline
    client = OpenAlexClient(settings) if own else client
    try:
        for chunk in chunks(unique, 500):
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


class _Stopped(Exception):
    """The prefetcher was closed while it waited to retry."""


class Prefetcher:
    """Warms the cache ahead of the annotator in one background thread; submit never blocks.

    Between retries (backoff, ``Retry-After``) its works do not count as in flight, so the page
    fetches (or shows) them itself instead of waiting; close() cuts such a wait short.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        settings: Settings,
        client: OpenAlexClient | None = None,
        max_queued: int = 8,
    ) -> None:
        """Build the prefetcher (one per process, e.g. held by st.cache_resource).

        Args:
            engine: database holding the abstract cache.
            client: OpenAlex client (default: one built in the worker thread, closed by close()).
            settings: the OpenAlex settings; offline mode makes submit() a no-op.
            max_queued: most submissions waiting or running; further ones are dropped.
        """
        self._engine, self._client, self._own = engine, client, client is None
        self._settings = settings
        self._max_queued = max_queued
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="abstracts")
        self._lock = threading.Lock()
        self._in_flight: set[str] = set()
        self._queued = 0
        self._closed = False
        self._stop = threading.Event()
        self._waiting = False  # between two attempts of a failing request
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

    def submit_later(self, find_ids: Callable[[], Iterable[str]]) -> None:
        """Like submit, but find_ids (e.g. a queue query) runs in the background thread too.

        The label page calls this while the annotator waits for the next work: the query
        costs the page nothing, and nothing at all when offline.
        """
        if not (self._closed or self._settings.openalex_offline):
            self._executor.submit(self._find_and_submit, find_ids)

    def _find_and_submit(self, find_ids: Callable[[], Iterable[str]]) -> None:
        try:
            self.submit(find_ids())
        except Exception:  # nobody waits on this future: say it in the log, never raise
            log.exception("finding the works to prefetch failed")

    def in_flight(self, work_id: str) -> bool:
        """True while the work is queued or being fetched, not while a failure is waited out.

        Args:
            work_id: work id or URL.
        """
        with self._lock:
            return not self._waiting and normalize_work_id(work_id) in self._in_flight

    def _pause(self, seconds: float) -> None:
        """The client's sleep between attempts: marks the wait, ends it early on close()."""
        self._waiting = True
        try:
            if self._stop.wait(seconds):
                raise _Stopped
        finally:
            self._waiting = False

    def _run(self, ids: list[str]) -> PrefetchReport:
        try:
            if self._client is None:
                self._client = OpenAlexClient(self._settings, sleep=self._pause)
            report = prefetch(self._engine, ids, client=self._client, settings=self._settings)
            self.last_report = report
            return report
        except _Stopped:  # closed while waiting to retry: the works stay uncached
            return PrefetchReport(requested=len(ids))
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
        self._stop.set()
        self._executor.shutdown(wait=wait, cancel_futures=True)
        if wait and self._own and self._client is not None:
            self._client.close()
