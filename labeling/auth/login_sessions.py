"""Login sessions: one token per browser tab (only its SHA-256 stored), resumed on reload.

A sign-in opens a *login* and gives its tab a random token (256 bits). A local sign-in's token
also goes into a cookie (COOKIE_NAME); a reload, a typed URL or a second tab is a new
Streamlit session that presents it (`resume_session`) and gets a token of its own in the same
login: the token presented is then *superseded* and resumes nothing once ROTATION_GRACE has
passed (two tabs restored at once both present it). A tab's own token is rotated too once it
is ROTATE_AFTER old, or at its next run after another tab superseded it, and the page writes
the new one into the cookie: a copied cookie is soon worth nothing.

A tab keeps its token in server memory (Streamlit's session state), which the browser cannot
write: so a superseded token keeps working for the tab that holds it (`check_session`), and
only the cookie path applies the grace period. Every path checks the user's active flag, that
their role is still the one they signed in with, and the idle limit. Signing out ends the
login (every token of it); deactivating a user or changing their role ends all their logins.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, delete, select, update
from sqlalchemy.orm import Session

from db.engine import affected_rows, read_session, write_session
from db.models import AuthSession, User, utcnow
from labeling.auth.users import UserInfo, UserNotFound

COOKIE_NAME = "labeling_session"
TOKEN_BYTES = 32  # secrets.token_urlsafe(32): 43 characters, 256 random bits
TOUCH_INTERVAL = timedelta(minutes=1)
ROTATE_AFTER = timedelta(minutes=30)
ROTATION_GRACE = timedelta(minutes=2)
_TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{43}")


@dataclass(frozen=True)
class LiveSession:
    """A valid session: its user, the token the tab keeps from now on, and when last used."""

    user: UserInfo
    token: str
    last_seen: datetime
    rotated: bool = False


def new_token() -> str:
    """A fresh random token (URL-safe text, never stored as such)."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def token_hash(token: str) -> str:
    """The stored form of a token (SHA-256 hex): a copy of the database opens no session."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def token_shaped(value: object) -> bool:
    """Whether a value (a cookie, say) looks like a token new_token makes."""
    return isinstance(value, str) and _TOKEN_SHAPE.fullmatch(value) is not None


def _now(now: datetime | None) -> datetime:
    """`now` as aware UTC (naive means UTC), or the current time."""
    if now is None:
        return utcnow()
    return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)


def _issue(session: Session, user_id: int, role: str, login: str, now: datetime) -> str:
    """Add a token of `login` for the user; return it (only its hash is stored)."""
    token = new_token()
    session.add(AuthSession(token=token_hash(token), user_id=user_id, login=login, role=role,
                            created_at=now, last_seen=now))  # fmt: skip
    return token


def create_session(engine: Engine, user_id: int, *, now: datetime | None = None) -> str:
    """Open a login for a user (after their password or provider was checked); return its token.

    Args:
        engine: database engine.
        user_id: the user's id.
        now: creation time (tests inject it); default utcnow().
    """
    now = _now(now)
    with write_session(engine) as session:
        user = session.get(User, user_id)
        if user is None:
            raise UserNotFound(f"no user with id {user_id}")
        return _issue(session, user.id, user.role, secrets.token_hex(16), now)


def _load(engine: Engine, token: str) -> tuple[AuthSession, UserInfo] | None:
    """The session row of a token and its user (detached), or None when unknown."""
    with read_session(engine) as session:
        row = session.execute(
            select(AuthSession, User)
            .join(User, User.id == AuthSession.user_id)
            .where(AuthSession.token == token_hash(token))
        ).first()
        if row is None:
            return None
        auth, user = row
        info = UserInfo(id=user.id, name=user.name, role=user.role, active=bool(user.active))
        session.expunge(auth)
    return auth, info


def _valid(engine: Engine, token: str | None, idle_minutes: int,
           now: datetime) -> tuple[AuthSession, UserInfo] | None:  # fmt: skip
    """The row and user of a token that is known, of an active user with the same role,
    and not idle; a token that fails these is deleted (it can never pass them again)."""
    if not token_shaped(token):
        return None
    assert token is not None
    found = _load(engine, token)
    if found is None:
        return None
    auth, user = found
    if not user.active or user.role != auth.role \
            or now - auth.last_seen > timedelta(minutes=idle_minutes):  # fmt: skip
        with write_session(engine) as session:
            session.execute(delete(AuthSession).where(AuthSession.token == auth.token))
        return None
    return found


def _rotate(engine: Engine, auth: AuthSession, user: UserInfo, now: datetime) -> str:
    """A new token in the same login; the old one is marked superseded (once)."""
    with write_session(engine) as session:
        session.execute(
            update(AuthSession)
            .where(AuthSession.token == auth.token, AuthSession.superseded_at.is_(None))
            .values(superseded_at=now)
        )
        return _issue(session, user.id, auth.role, auth.login, now)


def check_session(
    engine: Engine,
    token: str | None,
    *,
    idle_minutes: int,
    now: datetime | None = None,
    rotate: bool = True,
) -> LiveSession | None:
    """The session of the token a tab holds, rotated when due; None when it is no longer valid.

    last_seen is written at most once a minute, so a rerun of the page costs no write.

    Args:
        engine: database engine.
        token: the token the tab holds (from create_session, resume_session or a rotation).
        idle_minutes: a token unused for longer than this has expired.
        now: the current time (tests inject it); default utcnow().
        rotate: give the tab a new token when its own is superseded or ROTATE_AFTER old.
    """
    now = _now(now)
    found = _valid(engine, token, idle_minutes, now)
    if found is None:
        return None
    auth, user = found
    assert token is not None
    if rotate and (auth.superseded_at is not None or now - auth.created_at >= ROTATE_AFTER):
        return LiveSession(user, _rotate(engine, auth, user, now), now, rotated=True)
    if now - auth.last_seen < TOUCH_INTERVAL:
        return LiveSession(user, token, auth.last_seen)
    with write_session(engine) as session:
        touched = session.execute(
            update(AuthSession)
            .where(AuthSession.token == auth.token, AuthSession.last_seen < now)
            .values(last_seen=now)
        )
        if not affected_rows(touched) and session.get(AuthSession, auth.token) is None:
            return None  # signed out meanwhile
    return LiveSession(user, token, now)


def resolve_session(
    engine: Engine, token: str | None, *, idle_minutes: int, now: datetime | None = None
) -> UserInfo | None:
    """The user of a live token (no rotation), or None when unknown, expired or refused.

    Args:
        engine: database engine.
        token: the token a tab holds.
        idle_minutes: a token unused for longer than this has expired.
        now: the current time (tests inject it); default utcnow().
    """
    live = check_session(engine, token, idle_minutes=idle_minutes, now=now, rotate=False)
    return live.user if live is not None else None


def resume_session(
    engine: Engine,
    cookie: object,
    *,
    idle_minutes: int,
    roles: Collection[str] | None = None,
    now: datetime | None = None,
) -> LiveSession | None:
    """Sign a new browser session in from the cookie's token, with a token of its own.

    None (the sign-in page) for anything but a valid token: malformed, unknown, expired, of
    an inactive user or one whose role changed, of a role not in `roles`, or superseded more
    than ROTATION_GRACE ago.

    Args:
        engine: database engine.
        cookie: the cookie's value as the browser sent it.
        idle_minutes: a token unused for longer than this has expired.
        roles: the roles that may sign in this way (local sign-in); None: every role.
        now: the current time (tests inject it); default utcnow().
    """
    now = _now(now)
    token = cookie if isinstance(cookie, str) else None
    found = _valid(engine, token, idle_minutes, now)
    if found is None:
        return None
    auth, user = found
    if roles is not None and user.role not in roles:
        return None
    if auth.superseded_at is not None and now - auth.superseded_at > ROTATION_GRACE:
        return None
    return LiveSession(user, _rotate(engine, auth, user, now), now, rotated=True)


def end_session(engine: Engine, token: str | None) -> None:
    """Sign out: delete every token of the token's login (no error when there is none).

    Args:
        engine: database engine.
        token: a token of the login.
    """
    if not token_shaped(token):
        return
    assert token is not None
    with write_session(engine) as session:
        login = session.scalar(
            select(AuthSession.login).where(AuthSession.token == token_hash(token))
        )
        if login is not None:
            session.execute(delete(AuthSession).where(AuthSession.login == login))


def purge_sessions(engine: Engine, *, idle_minutes: int, now: datetime | None = None) -> int:
    """Delete every token idle for longer than `idle_minutes`; return how many.

    Args:
        engine: database engine.
        idle_minutes: the idle limit of check_session.
        now: the current time (tests inject it); default utcnow().
    """
    cutoff = _now(now) - timedelta(minutes=idle_minutes)
    with write_session(engine) as session:
        result = session.execute(delete(AuthSession).where(AuthSession.last_seen < cutoff))
        return affected_rows(result)
