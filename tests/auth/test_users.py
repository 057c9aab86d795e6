"""Local accounts: creation, roles, argon2 login with lockout (both DBs)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from argon2 import PasswordHasher
from sqlalchemy import Engine, select

from db.engine import read_session, write_session
from db.models import User, utcnow
from labeling.auth import users
from labeling.auth.users import (
    GENERIC_AUTH_ERROR,
    AuthError,
    UserError,
    UserInfo,
    add_user,
    authenticate,
    get_user,
    get_user_by_id,
    list_users,
    lock_seconds,
    set_active,
    set_password,
    set_role,
)


def _stored_hash(engine: Engine, name: str) -> str | None:
    with read_session(engine) as session:
        return session.scalars(select(User.password_hash).where(User.name == name)).one()


def test_add_and_list(engine: Engine) -> None:
    """Users are created with their role, listed by name and found by name or id."""
    ann = add_user(engine, "  ann  ", "annotator", "s3cret!")
    lead = add_user(engine, "bob", "lead")
    assert ann == UserInfo(id=ann.id, name="ann", role="annotator", active=True)
    assert [u.name for u in list_users(engine)] == ["ann", "bob"]
    assert get_user(engine, "ann") == ann
    assert get_user(engine, " bob ") == lead
    assert get_user(engine, "nobody") is None
    assert get_user_by_id(engine, lead.id) == lead


def test_duplicate_and_bad_input(engine: Engine) -> None:
    """Duplicate names, unknown roles and bad names are refused with clear messages."""
    add_user(engine, "ann", "annotator", "pw")
    with pytest.raises(UserError, match="already exists"):
        add_user(engine, "ann ", "lead", "pw2")
    with pytest.raises(UserError, match="unknown role"):
        add_user(engine, "carl", "superuser", "pw")
    with pytest.raises(UserError, match="empty"):
        add_user(engine, "   ", "annotator", "pw")
    with pytest.raises(UserError, match="longer than 128"):
        add_user(engine, "x" * 129, "annotator", "pw")
    with pytest.raises(UserError, match="password"):
        add_user(engine, "dora", "annotator", "")
    add_user(engine, "x" * 128, "exporter")
    assert len(list_users(engine)) == 2


def test_hash_is_argon2_not_password(engine: Engine) -> None:
    """Only an argon2id hash is stored, never the password."""
    add_user(engine, "ann", "annotator", "correct horse")
    stored = _stored_hash(engine, "ann")
    assert stored is not None and stored.startswith("$argon2id$")
    assert "correct horse" not in stored
    assert PasswordHasher().verify(stored, "correct horse")


def test_authenticate_ok_wrong_unknown(engine: Engine) -> None:
    """Right password logs in; wrong password and unknown name give the same message."""
    ann = add_user(engine, "ann", "annotator", "pw-ann")
    assert authenticate(engine, "ann", "pw-ann") == ann
    assert authenticate(engine, " ann ", "pw-ann") == ann
    with pytest.raises(AuthError) as wrong:
        authenticate(engine, "ann", "nope")
    with pytest.raises(AuthError) as unknown:
        authenticate(engine, "ghost", "nope")
    with pytest.raises(AuthError) as empty:
        authenticate(engine, "ann", "")
    assert str(wrong.value) == str(unknown.value) == str(empty.value) == GENERIC_AUTH_ERROR
    add_user(engine, "nopw", "lead")
    with pytest.raises(AuthError, match=GENERIC_AUTH_ERROR):
        authenticate(engine, "nopw", "anything")


def test_inactive_cannot_log_in_but_keeps_account(engine: Engine) -> None:
    """A deactivated user cannot log in, stays listed, and can be reactivated."""
    add_user(engine, "admin", "admin", "pw-admin")
    add_user(engine, "ann", "annotator", "pw-ann")
    assert set_active(engine, "ann", False).active is False
    with pytest.raises(AuthError, match="deactivated"):
        authenticate(engine, "ann", "pw-ann")
    assert "ann" in [u.name for u in list_users(engine)]
    set_active(engine, "ann", True)
    assert authenticate(engine, "ann", "pw-ann").active


def test_set_role_and_password(engine: Engine) -> None:
    """Role and password changes take effect; unknown users and roles are refused."""
    add_user(engine, "ann", "annotator", "old")
    assert set_role(engine, "ann", "lead").role == "lead"
    with pytest.raises(UserError, match="unknown role"):
        set_role(engine, "ann", "boss")
    with pytest.raises(UserError, match="no user"):
        set_role(engine, "ghost", "lead")
    set_password(engine, "ann", "new")
    with pytest.raises(AuthError):
        authenticate(engine, "ann", "old")
    assert authenticate(engine, "ann", "new").role == "lead"


def test_last_admin_is_protected(engine: Engine) -> None:
    """The last active admin can be neither demoted nor deactivated."""
    add_user(engine, "root", "admin", "pw")
    with pytest.raises(UserError, match="last active admin"):
        set_role(engine, "root", "lead")
    with pytest.raises(UserError, match="last active admin"):
        set_active(engine, "root", False)
    add_user(engine, "root2", "admin", "pw")
    set_role(engine, "root", "lead")
    assert get_user(engine, "root").role == "lead"


def test_lock_delays_grow_and_cap() -> None:
    """The lock starts at 30 s on the 5th failure, doubles, and stops at 15 min."""
    assert [lock_seconds(n) for n in range(1, 5)] == [0, 0, 0, 0]
    assert [lock_seconds(n) for n in (5, 6, 7, 8)] == [30, 60, 120, 240]
    assert lock_seconds(10) == 900 and lock_seconds(100) == 900


def test_lockout_and_expiry(engine: Engine) -> None:
    """Five failures lock the account; the lock expires; a success resets the count."""
    add_user(engine, "ann", "annotator", "pw-ann")
    t0 = utcnow()
    for _ in range(4):
        with pytest.raises(AuthError, match=GENERIC_AUTH_ERROR):
            authenticate(engine, "ann", "bad", now=t0)
    with pytest.raises(AuthError, match=r"try again in 30 s") as locked:
        authenticate(engine, "ann", "bad", now=t0)
    assert locked.value.retry_after == 30
    # Even the right password is refused while locked, and the wait counts down.
    with pytest.raises(AuthError, match=r"try again in 20 s"):
        authenticate(engine, "ann", "pw-ann", now=t0 + timedelta(seconds=10))
    # After expiry one more failure locks again, for twice as long.
    t1 = t0 + timedelta(seconds=31)
    with pytest.raises(AuthError, match=r"try again in 60 s"):
        authenticate(engine, "ann", "bad", now=t1)
    t2 = t1 + timedelta(seconds=61)
    assert authenticate(engine, "ann", "pw-ann", now=t2).name == "ann"
    with read_session(engine) as session:
        user = session.scalars(select(User).where(User.name == "ann")).one()
        assert user.failed_logins == 0 and user.locked_until is None
    with pytest.raises(AuthError, match=GENERIC_AUTH_ERROR):
        authenticate(engine, "ann", "bad", now=t2)


def test_set_password_clears_lock(engine: Engine) -> None:
    """An admin resetting the password also lifts the lock."""
    add_user(engine, "ann", "annotator", "pw")
    now = utcnow()
    for _ in range(5):
        with pytest.raises(AuthError):
            authenticate(engine, "ann", "bad", now=now)
    set_password(engine, "ann", "fresh")
    assert authenticate(engine, "ann", "fresh", now=now).name == "ann"


def test_rehash_when_parameters_change(engine: Engine) -> None:
    """A hash made with weaker parameters is replaced on the next successful login."""
    add_user(engine, "ann", "annotator", "pw")
    weak = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1).hash("pw")
    with write_session(engine) as session:
        session.scalars(select(User).where(User.name == "ann")).one().password_hash = weak
    authenticate(engine, "ann", "pw")
    stored = _stored_hash(engine, "ann")
    assert stored != weak
    assert not users._hasher.check_needs_rehash(stored)
    assert authenticate(engine, "ann", "pw").name == "ann"
