"""Single sign-on: map an OpenID Connect identity (st.user's claims) to a local user.

The app signs people in with Streamlit's `st.login`; this module decides who they are here.
It never imports Streamlit: it takes the claims as a plain mapping.

An identity is matched, in this order, by
1. `subject`: the provider's issuer and subject (`iss`, `sub`), linked to one local user;
2. `email`: a verified e-mail address, linked to one local user;
3. `domain`: a verified address at a domain; on the first sign-in a local user named after
   the address is created with the rule's role, and a `subject` row links it from then on.

The first rule that matches decides: a deactivated user is refused, never passed on to a
later rule (a domain rule cannot revive a deactivated account). Unverified addresses
(`email_verified` false) never match an e-mail or domain rule. Roles live on the users row,
so `labeling users set-role` and deactivation work for SSO users as for local ones, and
labels are attributed to a users row.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.engine import read_session, write_session
from db.models import SSOIdentity, User, utcnow
from labeling.auth.login_sessions import create_session
from labeling.auth.users import MAX_NAME_LENGTH, UserError, UserInfo, check_new_name
from labeling.errors import Denied, InputError, NotFound
from labeling.vocabulary import ROLES

KIND_SUBJECT = "subject"
KIND_EMAIL = "email"
KIND_DOMAIN = "domain"
MAX_EMAIL_LENGTH = 320
MAX_ISSUER_LENGTH = 512
TOUCH_INTERVAL = timedelta(minutes=1)
# Roles a domain rule may hand out to whoever has an address there; admins are mapped one
# by one, so a mistyped domain cannot make strangers administrators.
DOMAIN_ROLES = tuple(r for r in ROLES if r != "admin")
REQUIRED_PROVIDER_KEYS = ("client_id", "client_secret", "server_metadata_url")


class SSOError(InputError):
    """An admin operation on the mappings that cannot be done; the message says why."""


class SSORefused(Denied):
    """A sign-in that is refused; the message is meant for the person signing in."""


class MappingNotFound(NotFound, SSOError):
    """No SSO mapping has the id given."""


class SSOStale(SSORefused):
    """The provider's sign-in is too old (or from another provider): sign in again there."""


@dataclass(frozen=True)
class Identity:
    """The claims of an OIDC identity that the mapping reads."""

    issuer: str
    subject: str
    email: str | None
    email_verified: bool
    name: str | None

    def describe(self) -> str:
        """How the identity is named in messages (address when there is one, and issuer)."""
        who = self.email or f"subject {self.subject}"
        return f"{who} (issuer {self.issuer}, subject {self.subject})"


@dataclass(frozen=True)
class SSOMapping:
    """One row of sso_identities as the admin page and the CLI show it."""

    id: int
    kind: str
    issuer: str
    value: str
    user: str | None
    role: str
    active: bool | None
    created_at: datetime
    created_by: str | None
    last_used_at: datetime | None

    def as_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict (times as ISO strings)."""
        return {
            "id": self.id, "kind": self.kind, "issuer": self.issuer, "value": self.value,
            "user": self.user, "role": self.role, "active": self.active,
            "created_at": self.created_at.isoformat(), "created_by": self.created_by,
            "last_used_at": self.last_used_at.isoformat() if self.last_used_at else None,
        }  # fmt: skip


# ---------------------------------------------------------------- claims and normalisation


def _text(value: Any) -> str | None:
    """A stripped non-empty string, or None."""
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def normalize_email(email: str) -> str:
    """The address in lower case; SSOError unless it looks like local@domain.

    Args:
        email: an e-mail address.
    """
    cleaned = (email or "").strip().lower() if isinstance(email, str) else ""
    local, at, domain = cleaned.rpartition("@")
    if not at or not local or not domain or " " in cleaned or "." not in domain:
        raise SSOError(f"not an e-mail address: {email!r}")
    if len(cleaned) > MAX_EMAIL_LENGTH:
        raise SSOError(f"e-mail address longer than {MAX_EMAIL_LENGTH} characters")
    return cleaned


def normalize_domain(domain: str) -> str:
    """The domain in lower case without a leading '@'; SSOError when malformed.

    Args:
        domain: a domain such as 'example.org' or '@example.org'.
    """
    cleaned = (domain or "").strip().lower().removeprefix("@") if isinstance(domain, str) else ""
    labels = cleaned.split(".")
    if len(labels) < 2 or not all(labels) or any(c in cleaned for c in " @/:"):
        raise SSOError(f"not a domain: {domain!r} (write it as example.org)")
    return cleaned


def _verified(value: Any, assume_verified: bool) -> bool:
    """Whether an email_verified claim says yes (some providers send the string 'true')."""
    if value is None:
        return assume_verified
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return False


def identity_from_claims(
    claims: Mapping[str, Any], *, assume_email_verified: bool = False
) -> Identity:
    """The Identity in st.user's claims; SSORefused when it has no issuer or subject.

    Args:
        claims: st.user as a dict (the ID token's claims).
        assume_email_verified: treat a missing email_verified claim as verified.
    """
    issuer, subject = _text(claims.get("iss")), _text(claims.get("sub"))
    if not issuer or not subject:
        raise SSORefused(
            "The identity provider did not send an issuer and a subject (iss, sub); "
            "single sign-on cannot tell who you are. Ask an admin."
        )
    try:
        email = normalize_email(claims["email"]) if _text(claims.get("email")) else None
    except SSOError:
        email = None
    verified = email is not None and _verified(claims.get("email_verified"), assume_email_verified)
    return Identity(
        issuer=issuer, subject=subject, email=email, email_verified=verified,
        name=_text(claims.get("name")),
    )  # fmt: skip


def issued_at(claims: Mapping[str, Any]) -> datetime | None:
    """When the provider issued the identity (the `iat` claim), or None when absent.

    Args:
        claims: st.user as a dict.
    """
    iat = claims.get("iat")
    if isinstance(iat, str):
        try:
            iat = float(iat)
        except ValueError:
            return None
    if isinstance(iat, bool) or not isinstance(iat, int | float):
        return None
    try:
        return datetime.fromtimestamp(iat, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def check_fresh(
    claims: Mapping[str, Any], *, max_age_minutes: int, provider: str | None = None,
    now: datetime | None = None,
) -> None:  # fmt: skip
    """Raise SSOStale when the provider's sign-in is too old to open a new session.

    Streamlit keeps the provider's identity in a cookie for 30 days. A new login session
    is opened from it only while the identity is younger than the idle limit, so that the
    idle expiry of a session also ends its single sign-on: after it, the person signs in at
    the provider again (usually one click). Without an `iat` claim the age is unknown and
    the identity is accepted.

    Args:
        claims: st.user as a dict.
        max_age_minutes: the sessions' idle limit.
        provider: the configured provider; a cookie from another provider is stale.
        now: the current time (tests inject it).
    """
    signed_with = _text(claims.get("provider"))
    if provider and signed_with and signed_with != provider:
        raise SSOStale(f"You signed in with {signed_with!r}; sign in again.")
    issued = issued_at(claims)
    now = now or utcnow()
    if issued is not None and now - issued > timedelta(minutes=max_age_minutes):
        raise SSOStale("Your single sign-on has expired; sign in again.")


# ---------------------------------------------------------------- sign-in


def find_identity(session: Session, kind: str, issuer: str, value: str) -> SSOIdentity | None:
    return session.scalars(
        select(SSOIdentity).where(
            SSOIdentity.kind == kind, SSOIdentity.issuer == issuer, SSOIdentity.value == value
        )
    ).first()


def _user_of(session: Session, row: SSOIdentity) -> UserInfo:
    """The (active) user a subject or e-mail row points at; SSORefused when deactivated."""
    user = session.get(User, row.user_id)
    if user is None:  # pragma: no cover - the foreign key cascades
        raise SSORefused("Your mapped account no longer exists; ask an admin.")
    if not user.active:
        raise SSORefused(f"The account {user.name} is deactivated; ask an admin.")
    return UserInfo(id=user.id, name=user.name, role=user.role, active=True)


def _plan(engine: Engine, identity: Identity) -> tuple[str, int, UserInfo | None, str | None]:
    """Which row matches (kind, row id) and its user, or the role a domain rule would give."""
    with read_session(engine) as session:
        row = find_identity(session, KIND_SUBJECT, identity.issuer, identity.subject)
        if row is not None:
            return KIND_SUBJECT, row.id, _user_of(session, row), None
        if identity.email is None:
            raise SSORefused(
                f"Your identity {identity.describe()} is not mapped to a role; ask an admin."
            )
        domain = identity.email.rpartition("@")[2]
        email_row = find_identity(session, KIND_EMAIL, "", identity.email)
        domain_row = find_identity(session, KIND_DOMAIN, "", domain)
        if (email_row or domain_row) and not identity.email_verified:
            raise SSORefused(
                f"Your e-mail {identity.email} is not verified by the identity provider, so it "
                f"cannot be used to sign in; ask an admin to map {identity.describe()}."
            )
        if email_row is not None:
            return KIND_EMAIL, email_row.id, _user_of(session, email_row), None
        if domain_row is not None:
            taken = session.scalars(select(User).where(User.name == identity.email)).first()
            if taken is not None:
                raise SSORefused(
                    f"A local account called {identity.email} already exists and is not linked "
                    "to your identity; ask an admin to map it."
                )
            if len(identity.email) > MAX_NAME_LENGTH:
                raise SSORefused("Your e-mail address is too long for a user name; ask an admin.")
            return KIND_DOMAIN, domain_row.id, None, domain_row.role
    raise SSORefused(f"Your identity {identity.describe()} is not mapped to a role; ask an admin.")


def resolve(
    engine: Engine, claims: Mapping[str, Any], *, assume_email_verified: bool = False,
    now: datetime | None = None,
) -> UserInfo:  # fmt: skip
    """The local user of an identity, creating it when a domain rule allows; else SSORefused.

    A sign-in costs one read; it writes only to create a user or, at most once a minute,
    to record when the mapping was last used.

    Args:
        engine: database engine.
        claims: st.user as a dict (iss, sub, email, email_verified, name, ...).
        assume_email_verified: treat a missing email_verified claim as verified.
        now: the current time (tests inject it).
    """
    identity = identity_from_claims(claims, assume_email_verified=assume_email_verified)
    now = now or utcnow()
    for attempt in range(2):
        _kind, row_id, user, role = _plan(engine, identity)
        if user is not None:
            _touch(engine, row_id, now)
            return user
        try:
            return _create_from_domain(engine, identity, role, row_id, now)
        except IntegrityError:
            if attempt:  # pragma: no cover - needs two concurrent first sign-ins twice
                raise SSORefused("Your account could not be created; try again.") from None
            # Another process signed the same person in meanwhile: the next plan finds it.
    raise AssertionError("unreachable")  # pragma: no cover


def _touch(engine: Engine, row_id: int, now: datetime) -> None:
    """Record when a mapping was last used (at most one write a minute)."""
    with read_session(engine) as session:
        row = session.get(SSOIdentity, row_id)
        if row is None or (row.last_used_at and now - row.last_used_at < TOUCH_INTERVAL):
            return
    with write_session(engine) as session:
        row = session.get(SSOIdentity, row_id)
        if row is not None:
            row.last_used_at = now


def _create_from_domain(
    engine: Engine, identity: Identity, role: str | None, rule_id: int, now: datetime
) -> UserInfo:
    """Create the user of a first sign-in by domain rule and link its subject to it."""
    assert identity.email is not None and role is not None
    with write_session(engine) as session:
        rule = session.get(SSOIdentity, rule_id)
        if rule is None:
            raise SSORefused("The rule for your domain was just removed; ask an admin.")
        try:  # the checks of every new user: a name that renders like another's is refused
            check_new_name(session, identity.email)
        except UserError as exc:
            raise SSORefused(f"Your account cannot be created: {exc}; ask an admin.") from exc
        user = User(name=identity.email, role=role, password_hash=None, active=True,
                    failed_logins=0)  # fmt: skip
        session.add(user)
        session.flush()
        session.add(SSOIdentity(
            kind=KIND_SUBJECT, issuer=identity.issuer, value=identity.subject,
            user_id=user.id, created_by=f"domain rule {rule.value}", last_used_at=now,
        ))  # fmt: skip
        rule.last_used_at = now
        session.flush()
        return UserInfo(id=user.id, name=user.name, role=user.role, active=True)


def start_session(
    engine: Engine, claims: Mapping[str, Any], *, idle_minutes: int,
    provider: str | None = None, assume_email_verified: bool = False,
    now: datetime | None = None,
) -> tuple[UserInfo, str]:  # fmt: skip
    """Sign an identity in: check freshness, resolve it, open a normal login session.

    The token is the same kind local sign-in returns (users.create_session), so the pages'
    role check, idle expiry and deactivation apply unchanged.

    Args:
        engine: database engine.
        claims: st.user as a dict.
        idle_minutes: the sessions' idle limit (also the identity's maximum age).
        provider: the configured provider name.
        assume_email_verified: treat a missing email_verified claim as verified.
        now: the current time (tests inject it).
    """
    check_fresh(claims, max_age_minutes=idle_minutes, provider=provider, now=now)
    user = resolve(engine, claims, assume_email_verified=assume_email_verified, now=now)
    return user, create_session(engine, user.id, now=now)


# ---------------------------------------------------------------- configuration


def local_login_allowed(role: str, roles: frozenset[str] | set[str]) -> bool:
    """Whether a user with `role` may sign in with a local password.

    Args:
        role: the user's role.
        roles: the roles of LABELING_LOCAL_LOGIN_ROLES.
    """
    return role in roles


def authlib_installed() -> bool:
    """Whether Authlib, which st.login needs, is importable."""
    return importlib.util.find_spec("authlib") is not None


def check_auth_config(auth: Mapping[str, Any] | None, provider: str) -> list[str]:
    """What is missing from secrets.toml's [auth] section for `provider` (empty when none).

    Args:
        auth: the [auth] section of .streamlit/secrets.toml (None when absent).
        provider: LABELING_SSO_PROVIDER ('default' reads the keys from [auth] itself).
    """
    problems: list[str] = []
    if not authlib_installed():
        problems.append("Authlib is not installed (pip install 'labeling[sso]')")
    if not auth:
        return [*problems, "no [auth] section in .streamlit/secrets.toml"]
    redirect = auth.get("redirect_uri")
    if not redirect:
        problems.append("[auth] has no redirect_uri")
    elif not str(redirect).rstrip().endswith("/oauth2callback"):
        problems.append("[auth] redirect_uri must end with /oauth2callback")
    if not auth.get("cookie_secret"):
        problems.append("[auth] has no cookie_secret")
    block = auth if provider == "default" else auth.get(provider)
    name = "[auth]" if provider == "default" else f"[auth.{provider}]"
    if not isinstance(block, Mapping):
        problems.append(f"no {name} section in .streamlit/secrets.toml")
        return problems
    problems.extend(f"{name} has no {key}" for key in REQUIRED_PROVIDER_KEYS if not block.get(key))
    return problems
