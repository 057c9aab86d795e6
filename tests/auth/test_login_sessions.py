"""Login sessions: token issue and hash, idle expiry, rotation, resume from the cookie, sign-out,
deactivation and role changes (both engines)."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from sqlalchemy import Engine, select, update

from db.engine import read_session, write_session
from db.models import AuthSession, User, utcnow
from labeling.auth.login_sessions import (
    ROTATE_AFTER,
    ROTATION_GRACE,
    check_session,
    create_session,
    end_session,
    new_token,
    purge_sessions,
    resolve_session,
    resume_session,
    token_shaped,
)
from labeling.auth.users import UserError, add_user, set_active, set_role

IDLE = 60


@pytest.fixture
def ann(engine: Engine) -> int:
    """An annotator (and an admin, so that role changes are allowed); the annotator's id."""
    add_user(engine, "admin", "admin", "pw")
    return add_user(engine, "ann", "annotator", "pw").id


def rows(engine: Engine) -> list[AuthSession]:
    """Every stored session row (detached)."""
    with read_session(engine) as session:
        found = list(session.scalars(select(AuthSession).order_by(AuthSession.created_at)))
        session.expunge_all()
    return found


def test_a_token_is_random_256_bits_and_only_its_hash_is_stored(engine: Engine, ann: int) -> None:
    tokens = [create_session(engine, ann) for _ in range(3)]
    assert len(set(tokens)) == 3
    assert all(token_shaped(t) and len(t) == 43 for t in tokens)  # 32 bytes, URL-safe base64
    stored = rows(engine)
    assert sorted(r.token for r in stored) == sorted(
        hashlib.sha256(t.encode()).hexdigest() for t in tokens
    )
    everything = " ".join(str(v) for r in stored for v in vars(r).values())
    assert not any(t in everything for t in tokens)  # the token itself is nowhere
    assert {r.role for r in stored} == {"annotator"} and len({r.login for r in stored}) == 3


def test_session_roundtrip_and_sign_out(engine: Engine, ann: int) -> None:
    token = create_session(engine, ann)
    assert resolve_session(engine, token, idle_minutes=IDLE).name == "ann"
    assert resolve_session(engine, "not-a-token", idle_minutes=IDLE) is None
    assert resolve_session(engine, None, idle_minutes=IDLE) is None
    end_session(engine, token)
    end_session(engine, token)  # twice: no error
    end_session(engine, "garbage")
    assert resolve_session(engine, token, idle_minutes=IDLE) is None
    with pytest.raises(UserError):
        create_session(engine, 999_999)


def test_idle_expiry_and_touch(engine: Engine, ann: int) -> None:
    """A token expires after idle_minutes; use keeps it alive, touched at most each minute."""
    t0 = utcnow()
    token = create_session(engine, ann, now=t0)
    live = check_session(engine, token, idle_minutes=30, now=t0 + timedelta(seconds=20))
    assert live.token == token and live.last_seen == t0 == rows(engine)[0].last_seen
    t1 = t0 + timedelta(minutes=25)
    assert check_session(engine, token, idle_minutes=30, now=t1, rotate=False).last_seen == t1
    assert rows(engine)[0].last_seen == t1
    assert resolve_session(engine, token, idle_minutes=30, now=t1 + timedelta(minutes=29))
    t2 = t1 + timedelta(minutes=60)
    assert resolve_session(engine, token, idle_minutes=30, now=t2) is None
    assert rows(engine) == []  # an expired token is deleted: it cannot come back
    assert resolve_session(engine, token, idle_minutes=30, now=t1) is None


def test_a_tab_token_is_rotated_once_it_is_old(engine: Engine, ann: int) -> None:
    t0 = utcnow()
    token = create_session(engine, ann, now=t0)
    young = check_session(engine, token, idle_minutes=IDLE, now=t0 + ROTATE_AFTER / 2)
    assert young.token == token and not young.rotated
    due = t0 + ROTATE_AFTER
    live = check_session(engine, token, idle_minutes=IDLE, now=due)
    assert live.rotated and live.token != token and token_shaped(live.token)
    old, new = rows(engine)
    assert old.superseded_at == due and new.superseded_at is None and new.login == old.login
    # The old token no longer resumes from a cookie once the grace period is over.
    late = due + ROTATION_GRACE + timedelta(seconds=1)
    assert resume_session(engine, token, idle_minutes=IDLE, now=late) is None
    assert check_session(engine, live.token, idle_minutes=IDLE, now=late).token == live.token


def test_resume_from_the_cookie_gives_the_new_tab_its_own_token(engine: Engine, ann: int) -> None:
    t0 = utcnow()
    first = create_session(engine, ann, now=t0)
    t1 = t0 + timedelta(minutes=5)
    tab = resume_session(engine, first, idle_minutes=IDLE, now=t1)
    assert tab is not None and tab.user.name == "ann" and tab.rotated
    assert tab.token != first and resolve_session(engine, tab.token, idle_minutes=IDLE, now=t1)
    # Two tabs restored at once both present the old cookie: within the grace both resume.
    again = resume_session(engine, first, idle_minutes=IDLE, now=t1 + ROTATION_GRACE)
    assert again is not None and again.token not in (first, tab.token)
    assert (
        resume_session(
            engine, first, idle_minutes=IDLE, now=t1 + ROTATION_GRACE + timedelta(seconds=1)
        )
        is None
    )
    # The tab that holds the superseded token (in server memory) keeps working, and gets a
    # new token at its next run, which it writes into the cookie.
    held = check_session(engine, first, idle_minutes=IDLE, now=t1 + timedelta(minutes=10))
    assert held is not None and held.rotated and held.token not in (first, tab.token)
    assert len({r.login for r in rows(engine)}) == 1


@pytest.mark.parametrize(
    "cookie",
    [
        None,
        "",
        "x",
        12345,
        "a" * 42,
        "a" * 44,
        "a" * 42 + "!",
        "a" * 42 + "=",
        " " + "a" * 42,
        "a" * 10_000,
        "../" * 20,
        "a" * 42 + "\x00",
    ],
)
def test_a_malformed_cookie_resumes_nothing(engine: Engine, ann: int, cookie: object) -> None:
    create_session(engine, ann)
    assert resume_session(engine, cookie, idle_minutes=IDLE) is None
    assert len(rows(engine)) == 1


def test_unknown_expired_deactivated_or_demoted_tokens_are_refused(
    engine: Engine, ann: int
) -> None:
    assert resume_session(engine, new_token(), idle_minutes=IDLE) is None  # unknown
    old = create_session(engine, ann, now=utcnow() - timedelta(minutes=IDLE + 1))
    assert resume_session(engine, old, idle_minutes=IDLE) is None  # expired
    token = create_session(engine, ann)
    assert resume_session(engine, token, idle_minutes=IDLE, roles={"lead"}) is None
    set_active(engine, "ann", False)
    assert resume_session(engine, token, idle_minutes=IDLE) is None
    assert rows(engine) == []  # deactivation ended every session at once
    set_active(engine, "ann", True)
    assert resume_session(engine, token, idle_minutes=IDLE) is None  # not revived


def test_a_role_change_ends_every_session_of_the_user(engine: Engine, ann: int) -> None:
    mine, other = create_session(engine, ann), create_session(engine, ann)
    admin = create_session(engine, add_user(engine, "lead", "lead", "pw").id)
    set_role(engine, "ann", "annotator")  # unchanged: nothing ends
    assert resolve_session(engine, mine, idle_minutes=IDLE)
    set_role(engine, "ann", "lead")
    assert resolve_session(engine, mine, idle_minutes=IDLE) is None
    assert resume_session(engine, other, idle_minutes=IDLE) is None
    assert resolve_session(engine, admin, idle_minutes=IDLE).role == "lead"


def test_a_role_changed_behind_the_tools_back_is_refused(engine: Engine, ann: int) -> None:
    """Even when the role changes without set_role (SQL by hand), the session's role is checked."""
    token = create_session(engine, ann)
    with write_session(engine) as session:
        session.execute(update(User).where(User.id == ann).values(role="lead"))
    assert resolve_session(engine, token, idle_minutes=IDLE) is None
    assert resume_session(engine, token, idle_minutes=IDLE) is None


def test_sign_out_ends_every_token_of_the_login_only(engine: Engine, ann: int) -> None:
    first = create_session(engine, ann)
    tab = resume_session(engine, first, idle_minutes=IDLE)
    elsewhere = create_session(engine, ann)  # another sign-in (another browser)
    end_session(engine, tab.token)
    assert resolve_session(engine, first, idle_minutes=IDLE) is None
    assert resolve_session(engine, tab.token, idle_minutes=IDLE) is None
    assert resolve_session(engine, elsewhere, idle_minutes=IDLE).name == "ann"


def test_purge_deletes_idle_tokens_only(engine: Engine, ann: int) -> None:
    t0 = utcnow()
    old = create_session(engine, ann, now=t0 - timedelta(hours=5))
    new = create_session(engine, ann, now=t0)
    rotated = check_session(engine, new, idle_minutes=IDLE, now=t0 + ROTATE_AFTER)
    assert purge_sessions(engine, idle_minutes=IDLE, now=t0 + ROTATE_AFTER) == 1
    assert resolve_session(engine, old, idle_minutes=600, now=t0) is None
    # A superseded token a tab may still hold stays until it is idle too.
    assert len(rows(engine)) == 2 and rotated.token != new


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("A" * 43, True),
        ("a-b_c" + "0" * 38, True),
        ("A" * 42, False),
        ("A" * 44, False),
        ("A" * 42 + "+", False),
        ("A" * 42 + "/", False),
        (None, False),
        (b"A" * 43, False),
        (43, False),
        ("é" + "A" * 42, False),
    ],
)
def test_token_shape(value: object, ok: bool) -> None:
    assert token_shaped(value) is ok
