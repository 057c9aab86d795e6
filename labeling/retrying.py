"""Retries, one way (tenacity): a write that lost a race, a request that failed in passing.

Two policies, shared by the three places that retry:
- ``retry_now``: a transaction that lost a race to a concurrent writer (the queue's claim, a
  label submit) is run again at once, a few times; only failures the caller names are retried.
- ``retry_backoff``: an HTTP request that failed in a passing way (OpenAlex) is tried again
  after an exponential backoff, or after the wait the server asked for (``Retry-After``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import tenacity

T = TypeVar("T")


def retry_now(
    fn: Callable[[], T],
    *,
    attempts: int,
    retry_on: Callable[[BaseException], bool],
    exhausted: Callable[[BaseException], Exception] | None = None,
) -> T:
    """Call fn until it returns, again at once after a failure retry_on accepts.

    Args:
        fn: one attempt (its own transaction).
        attempts: most calls of fn.
        retry_on: whether a failure lost a race (retried); any other failure propagates as is.
        exhausted: the error raised (from the last failure) once every attempt lost;
            None raises the last failure itself.
    """
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(attempts),
        retry=tenacity.retry_if_exception(retry_on),
        reraise=exhausted is None,
    )
    try:
        return retrying(fn)
    except tenacity.RetryError as err:
        last = err.last_attempt.exception()
        assert last is not None and exhausted is not None  # only failures are retried
        raise exhausted(last) from last


class Transient(Exception, Generic[T]):
    """A passing failure worth another try; `result` is returned if no try succeeds."""

    def __init__(self, result: T, retry_after: float | None = None) -> None:
        """Carry the failure's result and the seconds the server asked to wait, if any."""
        super().__init__(result)
        self.result = result
        self.retry_after = retry_after


class _RetryAfter(tenacity.wait.wait_base):
    """Wait what the Transient failure asked for, else the fallback wait."""

    def __init__(self, fallback: tenacity.wait.wait_base) -> None:
        """Wrap the fallback (the backoff)."""
        self.fallback = fallback

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        """The seconds to sleep before the next attempt."""
        failure = retry_state.outcome.exception() if retry_state.outcome else None
        asked = getattr(failure, "retry_after", None)
        return float(asked) if asked is not None else self.fallback(retry_state)


def retry_backoff(
    fn: Callable[[], T],
    *,
    attempts: int,
    first: float,
    cap: float,
    sleep: Callable[[float], None],
    on_retry: Callable[[Transient[Any], int, float], None] | None = None,
) -> T:
    """Call fn until it returns; after a Transient failure wait, then try again.

    The wait is the failure's retry_after when it has one, else first * 2**(n - 1) seconds
    after the n-th try, at most cap. Once `attempts` tries failed, the last failure's result
    is returned (no wait after the last try). Any other exception propagates, and so does one
    raised by `sleep` (a wait cut short).

    Args:
        fn: one try; returns the result or raises Transient.
        attempts: most tries.
        first: the first backoff in seconds.
        cap: the longest backoff.
        sleep: called with the seconds to wait (tests record them instead).
        on_retry: called with (failure, tries so far, seconds to wait) before each wait.
    """

    def before_sleep(state: tenacity.RetryCallState) -> None:
        if on_retry is not None and state.outcome is not None and state.next_action is not None:
            failure = state.outcome.exception()
            assert isinstance(failure, Transient)
            on_retry(failure, state.attempt_number, state.next_action.sleep)

    def give_up(state: tenacity.RetryCallState) -> T:
        failure = state.outcome.exception() if state.outcome else None
        assert isinstance(failure, Transient)
        return failure.result

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(attempts),
        wait=_RetryAfter(tenacity.wait_exponential(multiplier=first, max=cap)),
        retry=tenacity.retry_if_exception_type(Transient),
        sleep=sleep,
        before_sleep=before_sleep,
        retry_error_callback=give_up,
    )
    return retrying(fn)
