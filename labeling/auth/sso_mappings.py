"""Single sign-on mappings: which identities may sign in, and as which local user.

Admins manage them (admin page, `labeling sso`); labeling.auth.sso applies them at sign-in.
"""

from __future__ import annotations

from sqlalchemy import Engine, delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.engine import read_session, write_session
from db.models import SSOIdentity, User
from labeling.auth.sso import (
    DOMAIN_ROLES,
    KIND_DOMAIN,
    KIND_EMAIL,
    KIND_SUBJECT,
    MAX_EMAIL_LENGTH,
    MAX_ISSUER_LENGTH,
    MappingNotFound,
    SSOError,
    SSOMapping,
    find_identity,
    normalize_domain,
    normalize_email,
)
from labeling.auth.users import UserError, check_new_name, clean_name
from labeling.vocabulary import ROLES


def _to_mapping(row: SSOIdentity, user: User | None) -> SSOMapping:
    return SSOMapping(
        id=row.id, kind=row.kind, issuer=row.issuer, value=row.value,
        user=user.name if user is not None else None,
        role=user.role if user is not None else str(row.role),
        active=bool(user.active) if user is not None else None,
        created_at=row.created_at, created_by=row.created_by, last_used_at=row.last_used_at,
    )  # fmt: skip


def _clean_user_name(name: str) -> str:
    """The stripped user name, with the checks every user name gets (SSOError if bad)."""
    try:
        return clean_name(name)
    except UserError as exc:
        raise SSOError(str(exc)) from exc


def _check_role(role: str | None, allowed: tuple[str, ...] = ROLES) -> None:
    if role is not None and role not in allowed:
        raise SSOError(f"unknown role {role!r}; choose one of {', '.join(allowed)}")


def _target_user(session: Session, name: str, role: str | None) -> User:
    """The user a mapping points at; created (no password) when missing and role is given."""
    user = session.scalars(select(User).where(User.name == name)).first()
    if user is None:
        if role is None:
            raise SSOError(f"no user called {name!r}; give a role to create it")
        try:  # the checks of every new user: a name that renders like another's is refused
            check_new_name(session, name)
        except UserError as exc:
            raise SSOError(str(exc)) from exc
        user = User(name=name, role=role, password_hash=None, active=True, failed_logins=0)
        session.add(user)
        session.flush()
    elif role is not None and role != user.role:
        raise SSOError(
            f"{name} is already {user.role}; change a role with `labeling users set-role`"
        )
    return user


def _add(engine: Engine, row: SSOIdentity, user_name: str | None, role: str | None,
         what: str) -> SSOMapping:  # fmt: skip
    try:
        with write_session(engine) as session:
            exists = find_identity(session, row.kind, row.issuer, row.value)
            if exists is not None:
                raise SSOError(f"{what} is already mapped (id {exists.id}); remove it first")
            user = _target_user(session, user_name, role) if user_name is not None else None
            row.user_id = user.id if user is not None else None
            session.add(row)
            session.flush()
            return _to_mapping(row, user)
    except IntegrityError as exc:  # another admin added the same mapping meanwhile
        raise SSOError(f"{what} is already mapped") from exc


def map_subject(
    engine: Engine, issuer: str, subject: str, user: str, *, role: str | None = None,
    created_by: str | None = None,
) -> SSOMapping:  # fmt: skip
    """Link an identity (issuer and subject claims) to a local user.

    Args:
        engine: database engine.
        issuer: the `iss` claim, e.g. https://accounts.google.com.
        subject: the `sub` claim.
        user: local user name; created without a password when missing and `role` is given.
        role: the role of a user to create; must equal the role of an existing one.
        created_by: who made the mapping (shown in the list).
    """
    issuer, subject = (issuer or "").strip(), (subject or "").strip()
    if not issuer or not subject:
        raise SSOError("issuer and subject cannot be empty")
    if len(issuer) > MAX_ISSUER_LENGTH or len(subject) > MAX_EMAIL_LENGTH:
        raise SSOError("issuer or subject is too long")
    _check_role(role)
    row = SSOIdentity(kind=KIND_SUBJECT, issuer=issuer, value=subject, created_by=created_by)
    return _add(engine, row, _clean_user_name(user), role, f"subject {subject} of {issuer}")


def map_email(
    engine: Engine, email: str, user: str, *, role: str | None = None,
    created_by: str | None = None,
) -> SSOMapping:  # fmt: skip
    """Let whoever the provider vouches for as `email` (verified) sign in as `user`.

    Args:
        engine: database engine.
        email: the address (compared in lower case).
        user: local user name; created without a password when missing and `role` is given.
        role: the role of a user to create; must equal the role of an existing one.
        created_by: who made the mapping (shown in the list).
    """
    email = normalize_email(email)
    _check_role(role)
    row = SSOIdentity(kind=KIND_EMAIL, issuer="", value=email, created_by=created_by)
    return _add(engine, row, _clean_user_name(user), role, f"e-mail {email}")


def map_domain(
    engine: Engine, domain: str, role: str, *, created_by: str | None = None
) -> SSOMapping:
    """Let anyone with a verified address at `domain` sign in; new users get `role`.

    Only the exact domain matches (not its subdomains). A domain rule cannot grant admin.

    Args:
        engine: database engine.
        domain: e.g. example.org (a leading '@' is ignored).
        role: role of the users created on first sign-in (not admin).
        created_by: who made the rule (shown in the list).
    """
    domain = normalize_domain(domain)
    if role == "admin":
        raise SSOError("a domain rule cannot grant admin; map each admin's e-mail or subject")
    _check_role(role, DOMAIN_ROLES)
    row = SSOIdentity(kind=KIND_DOMAIN, issuer="", value=domain, role=role, created_by=created_by)
    return _add(engine, row, None, None, f"domain {domain}")


def list_mappings(engine: Engine) -> list[SSOMapping]:
    """Every mapping: subjects, e-mails, then domain rules, each sorted by value.

    Args:
        engine: database engine.
    """
    order = {KIND_SUBJECT: 0, KIND_EMAIL: 1, KIND_DOMAIN: 2}
    with read_session(engine) as session:
        rows = session.execute(
            select(SSOIdentity, User).outerjoin(User, User.id == SSOIdentity.user_id)
        ).all()
        out = [_to_mapping(row, user) for row, user in rows]
    return sorted(out, key=lambda m: (order[m.kind], m.value, m.issuer, m.id))


def unmap(engine: Engine, mapping_id: int) -> SSOMapping:
    """Remove one mapping (the local user and their labels stay); SSOError when unknown.

    Removing a domain rule stops new sign-ins from the domain; users it already created
    keep their own `subject` rows (remove those, or deactivate the users, to lock them out).

    Args:
        engine: database engine.
        mapping_id: the id shown by list_mappings.
    """
    with write_session(engine) as session:
        row = session.get(SSOIdentity, mapping_id, with_for_update=True)
        if row is None:
            raise MappingNotFound(f"no mapping with id {mapping_id}")
        user = session.get(User, row.user_id) if row.user_id is not None else None
        gone = _to_mapping(row, user)
        session.execute(delete(SSOIdentity).where(SSOIdentity.id == mapping_id))
        return gone
