"""The OpenAlex HTTP client for abstracts: batching, retries, Retry-After, parsing, de-inversion.

Every failure ends in a FetchResult, never an exception for the caller:
- null (or empty) ``abstract_inverted_index``: "absent", error None;
- id missing from a batch answer and 404 on the single-work look-up: "absent", error NOT_FOUND
  (a merged id follows its 301 to the surviving work and answers "ok");
- 429, 5xx, timeouts, connection errors: retried with exponential backoff, honouring
  ``Retry-After`` up to MAX_RETRY_AFTER s (a longer one stops retrying), then "error";
- 403 (rate limit) and other 4xx, non-JSON bodies (HTML pages, even with 200), malformed
  indexes: "error" at once.
The cache, the public get/prefetch API and the background prefetcher are in
labeling.abstracts.cache.
"""

from __future__ import annotations

import email.utils
import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import Any

import httpx

from db.models import utcnow
from labeling.numbers import finite_or_none
from labeling.retrying import Transient, retry_backoff
from labeling.settings import Settings

log = logging.getLogger(__name__)

OK, ABSENT, ERROR = "ok", "absent", "error"
BATCH_SIZE = 50  # OpenAlex accepts at most 50 values in one OR filter
MAX_RETRY_AFTER = 60.0
MAX_ERROR_HOLD = 86_400.0
NOT_FOUND = "not found in OpenAlex"
INVALID_ID = "not an OpenAlex work id"
SELECT = "id,abstract_inverted_index"
# re.ASCII: \d would also match other scripts' digits ("W１２３" is not a work id).
_ID_RE = re.compile(
    r"(?:(?:https?://)?(?:api\.)?openalex\.org/)?(?:works/)?W(\d{1,30})", re.I | re.ASCII
)


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


def chunks(items: Sequence[str], size: int) -> Iterator[list[str]]:
    """Consecutive lists of at most `size` items."""
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
    finite = finite_or_none(seconds)
    return None if finite is None else min(max(0.0, finite), MAX_ERROR_HOLD)


def _log_retry(failure: Transient[FetchResult], tries: int, delay: float) -> None:
    """Log a failed try before its retry."""
    log.info("OpenAlex %s (try %d); retrying in %.1fs", failure.result.error, tries, delay)


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
        settings: Settings,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        retries: int | None = None,
        timeout: float | None = None,
    ) -> None:
        """Build the client.

        Args:
            settings: URL, api_key, mailto, timeout and retries.
            transport: httpx transport (tests pass httpx.MockTransport).
            sleep: called with the seconds to wait between attempts.
            retries: retries after the first attempt (default: settings.openalex_retries).
            timeout: seconds per request (default: settings.openalex_timeout).
        """
        s = settings
        self.retries = max(0, s.openalex_retries if retries is None else retries)
        self._sleep = sleep
        given = {"api_key": s.openalex_api_key, "mailto": s.openalex_mailto}
        self._auth: dict[str, str] = {k: v for k, v in given.items() if v}
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
        for batch in chunks(list(wanted), BATCH_SIZE):
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
        return retry_backoff(
            lambda: self._attempt(path, params, allow_404),
            attempts=self.retries + 1,
            first=self.backoff,
            cap=self.max_backoff,
            sleep=self._sleep,
            on_retry=_log_retry,
        )

    def _attempt(
        self, path: str, params: dict[str, str], allow_404: bool
    ) -> dict[str, Any] | FetchResult | None:
        """One GET: the answer, or Transient (429, 5xx, timeout, network) to be retried."""
        try:
            response = self._http.get(path, params=params)
        except httpx.TimeoutException as exc:
            raise Transient(FetchResult(ERROR, error=f"timeout: {type(exc).__name__}")) from exc
        except httpx.TransportError as exc:
            error = f"network error: {type(exc).__name__} {exc}"
            raise Transient(FetchResult(ERROR, error=error)) from exc
        except httpx.HTTPError as exc:  # too many redirects, undecodable body: no retry
            return FetchResult(ERROR, error=f"request failed: {type(exc).__name__} {exc}")
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
        failure = FetchResult(ERROR, error=f"HTTP {status}, {kind}{detail}", retry_after=wait)
        if wait is not None and wait > self.max_retry_after:
            return failure  # a longer wait than we keep a caller for: no retry
        raise Transient(failure, retry_after=wait)

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
