"""Local accounts: argon2 password hashes, lockout after failed logins (see login_sessions)."""

from __future__ import annotations

import secrets
import threading
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from icu import SpoofChecker
from sqlalchemy import Engine, delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.engine import read_session, write_session
from db.models import AuthSession, User, utcnow
from labeling.errors import Denied, InputError, NotFound
from labeling.inputs import shown, storable
from labeling.vocabulary import ROLES

MAX_NAME_LENGTH = 128
MAX_FAILED_LOGINS = 5
LOCK_BASE_SECONDS = 30
LOCK_MAX_SECONDS = 15 * 60
GENERIC_AUTH_ERROR = "invalid name or password"

_hasher = PasswordHasher()
_dummy_hash: str | None = None


class UserError(InputError):
    """A user operation that cannot be done; the message says why."""


class UserNotFound(NotFound, UserError):
    """No user goes by the name or id given."""


class AuthError(Denied):
    """A failed login; `retry_after` is set (seconds) when the account is locked."""

    def __init__(self, message: str, *, retry_after: int | None = None) -> None:
        """Keep the message and the optional lock delay."""
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class UserInfo:
    """What the rest of the tool may know about a user (never the password hash)."""

    id: int
    name: str
    role: str
    active: bool


def _info(user: User) -> UserInfo:
    """The public view of a User row."""
    return UserInfo(id=user.id, name=user.name, role=user.role, active=bool(user.active))


def clean_name(name: str) -> str:
    """The stripped name, or UserError when empty or too long."""
    if not isinstance(name, str):
        raise UserError("user name must be a string")
    cleaned = name.strip()
    if not cleaned:
        raise UserError("user name cannot be empty")
    if len(cleaned) > MAX_NAME_LENGTH:
        raise UserError(f"user name is longer than {MAX_NAME_LENGTH} characters")
    if not cleaned.isprintable():  # NUL, newlines, bidi controls: never part of a login name
        raise UserError(f"user name {shown(cleaned)!r} contains control characters")
    return cleaned


def name_key(name: str) -> str:
    """The form two names are the same in: NFKC, case-folded, NFKC again (`Lead`, `ｌｅａｄ`: lead).

    Unicode's NFKC_Casefold up to default-ignorable characters, which clean_name refuses as
    unprintable anyway. NFD and NFC spellings of `josé` get one key.
    """
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())


_spoof_lock = threading.Lock()


@lru_cache(maxsize=1)
def _spoof_checker() -> SpoofChecker:
    """ICU's checker, whose skeletons are Unicode TR39's (one per process)."""
    return SpoofChecker()


def _skeleton(text: str) -> str:
    """The TR39 skeleton of `text`: confusable characters mapped to one prototype."""
    with _spoof_lock:  # pages call from several threads; PyICU promises no thread safety
        return str(_spoof_checker().getSkeleton(0, text))


def confusion_keys(name: str) -> frozenset[str]:
    """Strings two names share when they render alike (either is in both sets: a collision).

    The skeleton of the name as typed (`Iead` like `lead`: capital I is confusable with l)
    and of its name_key (`Lead`, `ｌｅａｄ`, Cyrillic `leаd` like `lead`).
    """
    return frozenset((_skeleton(name), _skeleton(name_key(name))))


def confusable_with(name: str, others: Iterable[str]) -> str | None:
    """The first of `others` that `name` could be mistaken for (not counting `name` itself)."""
    keys = confusion_keys(name)
    return next((o for o in others if o != name and keys & confusion_keys(o)), None)


def name_collisions(names: Iterable[str]) -> dict[str, list[str]]:
    """For each name that collides with others (see confusable_with), those others, sorted."""
    by_key: dict[str, set[str]] = {}
    for name in set(names):
        for key in confusion_keys(name):
            by_key.setdefault(key, set()).add(name)
    out: dict[str, set[str]] = {}
    for group in by_key.values():
        for name in group if len(group) > 1 else ():
            out.setdefault(name, set()).update(group - {name})
    return {name: sorted(others) for name, others in sorted(out.items())}


def check_new_name(session: Session, name: str) -> None:
    """UserError when `name` is taken or renders like an existing user's name.

    Every path that creates a user calls it in the creating transaction (add_user, SSO
    mappings and domain sign-ins), so the Adjudicate and Monitor pages never show two
    people as one. Existing colliding accounts are left alone (`users list` marks them).
    """
    names = list(session.scalars(select(User.name)))
    if name in names:
        raise UserError(f"a user called {name!r} already exists")
    other = confusable_with(name, names)
    if other is not None:
        # Escapes show what the eye cannot: NFD josé against NFC josé, a Cyrillic а.
        spelled = "" if (name + other).isascii() else f"; spelled {ascii(name)} and {ascii(other)}"
        raise UserError(
            f"user name {name!r} looks like the existing user {other!r} (the same after Unicode "
            f"normalisation, case folding or confusable characters{spelled}); choose another name"
        )


def _check_role(role: str) -> str:
    """The role, or UserError when it is not one of ROLES."""
    if role not in ROLES:
        raise UserError(f"unknown role {role!r}; choose one of {', '.join(ROLES)}")
    return role


def _check_password(password: str) -> str:
    """The password, or UserError when it is empty."""
    if not isinstance(password, str) or not password:
        raise UserError("password cannot be empty")
    return password


def _get_for_update(session: Session, name: str) -> User:
    """The User row called name, locked for update (UserError when missing)."""
    if not storable(name):
        raise UserNotFound(f"no user called {shown(name)!r}")
    user = session.scalars(select(User).where(User.name == name).with_for_update()).first()
    if user is None:
        raise UserNotFound(f"no user called {name!r}")
    return user


def _active_admins(session: Session) -> int:
    """How many active admins there are."""
    query = select(func.count()).select_from(User).where(User.role == "admin", User.active)
    return int(session.scalar(query) or 0)


def add_user(engine: Engine, name: str, role: str, password: str | None = None) -> UserInfo:
    """Create a user; raise UserError on a bad name or role or when the name is taken.

    Args:
        engine: database engine.
        name: login name (surrounding spaces are stripped; 1-128 characters).
        role: one of labeling.vocabulary.ROLES.
        password: initial password; None creates an account that cannot log in yet.
    """
    name = clean_name(name)
    _check_role(role)
    pw_hash = _hasher.hash(_check_password(password)) if password is not None else None
    try:
        with write_session(engine) as session:
            check_new_name(session, name)
            user = User(name=name, role=role, password_hash=pw_hash, active=True, failed_logins=0)
            session.add(user)
            session.flush()
            return _info(user)
    except IntegrityError as exc:  # another process added the same name meanwhile
        raise UserError(f"a user called {name!r} already exists") from exc


def list_users(engine: Engine) -> list[UserInfo]:
    """All users, active or not, ordered by name.

    Args:
        engine: database engine.
    """
    with read_session(engine) as session:
        return [_info(u) for u in session.scalars(select(User).order_by(User.name))]


def get_user(engine: Engine, name: str) -> UserInfo | None:
    """The user called `name`, or None.

    Args:
        engine: database engine.
        name: login name (surrounding spaces are ignored).
    """
    if not storable(name):  # no user has such a name (PostgreSQL would refuse the query)
        return None
    with read_session(engine) as session:
        user = session.scalars(select(User).where(User.name == name.strip())).first()
        return _info(user) if user is not None else None


def get_user_by_id(engine: Engine, user_id: int) -> UserInfo | None:
    """The user with this id, or None.

    Args:
        engine: database engine.
        user_id: primary key of the user.
    """
    with read_session(engine) as session:
        user = session.get(User, user_id)
        return _info(user) if user is not None else None


def set_role(engine: Engine, name: str, role: str) -> UserInfo:
    """Change a user's role (ending their login sessions); the last admin cannot be demoted.

    Args:
        engine: database engine.
        name: login name.
        role: one of labeling.vocabulary.ROLES.
    """
    _check_role(role)
    with write_session(engine) as session:
        user = _get_for_update(session, name.strip())
        if user.role == "admin" and role != "admin" and user.active:
            if _active_admins(session) <= 1:
                raise UserError("cannot demote the last active admin")
        if user.role != role:  # a session keeps the role it was opened with: end them all
            session.execute(delete(AuthSession).where(AuthSession.user_id == user.id))
        user.role = role
        return _info(user)


def set_active(engine: Engine, name: str, active: bool) -> UserInfo:
    """Activate or deactivate a user; deactivation keeps labels and ends login sessions.

    Args:
        engine: database engine.
        name: login name.
        active: False to deactivate, True to reactivate.
    """
    with write_session(engine) as session:
        user = _get_for_update(session, name.strip())
        if not active and user.active and user.role == "admin":
            if _active_admins(session) <= 1:
                raise UserError("cannot deactivate the last active admin")
        user.active = bool(active)
        if not active:
            session.execute(delete(AuthSession).where(AuthSession.user_id == user.id))
        else:
            user.failed_logins = 0
            user.locked_until = None
        return _info(user)


def set_password(engine: Engine, name: str, password: str) -> None:
    """Set a new password (argon2 hash); also clears a lockout.

    Args:
        engine: database engine.
        name: login name.
        password: the new password (non-empty).
    """
    pw_hash = _hasher.hash(_check_password(password))
    with write_session(engine) as session:
        user = _get_for_update(session, name.strip())
        user.password_hash = pw_hash
        user.failed_logins = 0
        user.locked_until = None


def lock_seconds(failed_logins: int) -> int:
    """Lock delay after `failed_logins` consecutive failures (0 below the limit).

    Args:
        failed_logins: consecutive failures so far, including the latest.
    """
    if failed_logins < MAX_FAILED_LOGINS:
        return 0
    doublings = min(failed_logins - MAX_FAILED_LOGINS, 16)
    return min(LOCK_MAX_SECONDS, LOCK_BASE_SECONDS * 2**doublings)


def _now(now: datetime | None) -> datetime:
    """`now` as aware UTC (naive means UTC), or the current time."""
    if now is None:
        return utcnow()
    return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)


def _locked_error(locked_until: datetime, now: datetime) -> AuthError:
    """The AuthError telling how many seconds the lock still lasts."""
    wait = max(1, int((locked_until - now).total_seconds() + 0.999))
    return AuthError(f"too many failed attempts, try again in {wait} s", retry_after=wait)


def _verify(pw_hash: str | None, password: str) -> bool:
    """Whether the password matches; a missing hash costs as much time and fails."""
    global _dummy_hash
    if pw_hash is None:
        # Spend the same time as a real check so timing does not reveal the account.
        if _dummy_hash is None:
            _dummy_hash = _hasher.hash(secrets.token_urlsafe(16))
        pw_hash = _dummy_hash
        password = password + "\x00never"
    try:
        return _hasher.verify(pw_hash, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def _sign_in_user(session: Session, name: str) -> User | None:
    """The user a typed name signs in as: the exact name, else the one with its name_key.

    Two accounts that share a key (made before names were compared so) are signed in by
    their exact names only: neither is picked for a typed variant.
    """
    user = session.scalars(select(User).where(User.name == name)).first()
    if user is not None:
        return user
    key = name_key(name)
    ids = [i for i, n in session.execute(select(User.id, User.name)).all() if name_key(n) == key]
    return session.get(User, ids[0]) if len(ids) == 1 else None


def authenticate(
    engine: Engine, name: str, password: str, *, now: datetime | None = None
) -> UserInfo:
    """Check a name and password; return the user or raise AuthError.

    The message never says whether the name exists, except that a locked account says so
    and for how long. Five consecutive failures lock the account for 30 s, doubling with
    each further failure up to 15 min; a success resets the count.

    Args:
        engine: database engine.
        name: login name.
        password: the password typed.
        now: the current time (tests inject it); default utcnow().
    """
    now = _now(now)
    name = name.strip() if storable(name) else ""
    with read_session(engine) as session:
        user = _sign_in_user(session, name) if name else None
        snapshot = (
            (_info(user), user.password_hash, user.locked_until, user.failed_logins)
            if user
            else None
        )
    if snapshot is None:
        _verify(None, password or "")
        raise AuthError(GENERIC_AUTH_ERROR)
    info, pw_hash, locked_until, failed = snapshot
    user_id = info.id
    if locked_until is not None and locked_until > now:
        raise _locked_error(locked_until, now)
    # The slow hash check runs outside any transaction so it never holds a write lock.
    if not _verify(pw_hash, password or ""):
        with write_session(engine) as session:
            user = session.get(User, user_id, with_for_update=True)
            if user is None:
                raise AuthError(GENERIC_AUTH_ERROR)
            user.failed_logins = (user.failed_logins or 0) + 1
            delay = lock_seconds(user.failed_logins)
            if delay:
                user.locked_until = now + timedelta(seconds=delay)
        if delay:
            raise AuthError(f"too many failed attempts, try again in {delay} s", retry_after=delay)
        raise AuthError(GENERIC_AUTH_ERROR)
    if not info.active:
        raise AuthError("this account is deactivated; ask an admin")
    rehash = pw_hash is not None and _hasher.check_needs_rehash(pw_hash)
    new_hash = _hasher.hash(password) if rehash else None
    if not failed and locked_until is None and new_hash is None:
        return info  # nothing to change: a login costs no write
    with write_session(engine) as session:
        user = session.get(User, user_id, with_for_update=True)
        if user is None:
            raise AuthError(GENERIC_AUTH_ERROR)
        user.failed_logins = 0
        user.locked_until = None
        if new_hash is not None and user.password_hash == pw_hash:
            user.password_hash = new_hash
        return _info(user)
