"""The domain's exceptions: one root, LabelingError, and the categories callers act on.

Every exception the package raises for a caller to handle derives from LabelingError through
a category; where a class keeps an older base as well (LeaseError is a Conflict and still a
LabelError, so an InputError), the first category in its MRO is the one that counts:

- InputError: bad input from a person or a file (a malformed frame or schema, an unknown
  question, a bad filter). Also a ValueError, so the `except ValueError` that predate this
  module keep catching what they caught.
- NotFound: what was named does not exist (a user, an SSO mapping).
- Conflict: the request collides with another one (queue contention, a lease taken over).
- StorageError: the database could not store a write (a full disk, a read-only database,
  a write error); nothing of that write was recorded.
- Denied: a person may not do this (a failed sign-in, a role that may not open a page).

The CLI turns these categories into exit codes in one place (labeling/cli/errors.py), the
pages into messages in one place (pages/_errors.py). Private control-flow exceptions
(`_LostRace`, `_Stop`, ...) are not part of this tree.

Storage faults are classified in db/faults.py, which cannot import this package (db never
imports labeling). A virtual subclass (`StorageError.register(db.faults.StorageError)`) would
be dishonest: `except` clauses test the real MRO and ignore ABC registration. So the domain
has its own StorageError, StorageFull and StorageReadOnly, each a subclass of LabelingError
*and* of its db.faults namesake (an `except db.faults.StorageFull` still catches it, and the
`reason` text comes from db), and `storage_errors` below wraps `db.faults.storage_errors`,
re-raising the db fault as its domain class with the same message. Domain code uses this
module's `storage_errors`, and `category()` counts a db.faults fault that reached a caller
unwrapped as StorageError.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from db import faults


class LabelingError(Exception):
    """The root of the domain's exceptions; the message is meant for the person reading it."""


class InputError(LabelingError, ValueError):
    """Bad input from a person or a file; the message says what and where."""


class NotFound(LabelingError):
    """What the request names does not exist."""


class Conflict(LabelingError):
    """The request collides with another (contention, a concurrent edit, a lease lost)."""


class StorageError(LabelingError, faults.StorageError):
    """The database could not store a write; nothing of that write was recorded."""


class StorageFull(StorageError, faults.StorageFull):
    """The database's disk (or its size limit) is full."""


class StorageReadOnly(StorageError, faults.StorageReadOnly):
    """The database is read-only (file permissions, a read-only mount or a standby server)."""


class Denied(LabelingError):
    """A person may not do this: a refused sign-in, a role without access."""


class CampaignError(InputError):
    """A campaign (or its sample) that cannot be created or found; the message says why.

    Here rather than in review/campaigns.py because review/filters.py and review/sampling.py,
    which campaigns.py imports, raise it too; campaigns, filters and sampling re-export it.
    """


CATEGORIES: tuple[type[LabelingError], ...] = (InputError, NotFound, Conflict, StorageError,
                                               Denied)  # fmt: skip

_DOMAIN_FAULTS: dict[type[faults.StorageError], type[StorageError]] = {
    faults.StorageError: StorageError,
    faults.StorageFull: StorageFull,
    faults.StorageReadOnly: StorageReadOnly,
}


def category(exc: BaseException) -> type[LabelingError] | None:
    """The category of an exception (see the module docstring), or None for any other error."""
    if isinstance(exc, LabelingError):
        return next(c for c in type(exc).__mro__ if c in CATEGORIES)
    if isinstance(exc, faults.StorageError):
        return StorageError
    return None


@contextmanager
def storage_errors(what: str) -> Iterator[None]:
    """Re-raise a full-disk, read-only or disk I/O database error as the domain's StorageError.

    Usable as a decorator too. The message is db.faults.storage_errors' (e.g. "Not saved: the
    database's disk is full (database or disk is full)"); the driver's error stays the cause.

    Args:
        what: the start of the message, e.g. "Not saved".
    """
    try:
        with faults.storage_errors(what):
            yield
    except faults.StorageError as exc:
        if isinstance(exc, StorageError):  # already the domain's (a nested storage_errors)
            raise
        raise _DOMAIN_FAULTS.get(type(exc), StorageError)(str(exc)) from exc.__cause__
