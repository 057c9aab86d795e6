"""Single sign-on: identity -> user mapping, sessions, settings, CLI, login page, admin tab."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import streamlit as st
from click.testing import CliRunner
from pydantic import ValidationError
from sqlalchemy import Engine, func, inspect, select
from streamlit.testing.v1 import AppTest

from db.engine import alembic_config, make_engine, read_session, upgrade
from db.models import AuthSession, SSOIdentity, User, utcnow
from labeling.auth import sso, sso_mappings
from labeling.auth.login_sessions import resolve_session
from labeling.auth.users import (
    AuthError,
    add_user,
    authenticate,
    get_user,
    set_active,
)
from labeling.cli.main import main as cli
from labeling.database import dispose_all, get_engine
from labeling.settings import Settings, get_settings
from tests.pages.test_app_shell import APP

GOOGLE = "https://accounts.google.com"
KEYCLOAK = "https://id.example.org/realms/lab"


def shown(markdown: str) -> str:
    """What Markdown shows for escaped text: the pages escape names and messages."""
    return re.sub(r"\\(.)", r"\1", markdown)


def claims(sub: str = "1001", email: str | None = "ann@example.org", verified: Any = True,
           iss: str = GOOGLE, **extra: Any) -> dict[str, Any]:  # fmt: skip
    """st.user-shaped claims of a signed-in identity."""
    out: dict[str, Any] = {"is_logged_in": True, "iss": iss, "sub": sub, "name": "Ann"}
    if email is not None:
        out["email"] = email
    if verified is not None:
        out["email_verified"] = verified
    out.update(extra)
    return out


# ---------------------------------------------------------------- mapping rules (both engines)


def test_subject_mapping_signs_in_as_the_linked_user(engine: Engine) -> None:
    ann = add_user(engine, "ann", "annotator")
    sso_mappings.map_subject(engine, GOOGLE, "1001", "ann")
    # The subject decides even without any e-mail claim.
    assert sso.resolve(engine, claims(email=None, verified=None)) == ann
    # Same subject from another issuer is another identity.
    with pytest.raises(sso.SSORefused, match="not mapped"):
        sso.resolve(engine, claims(iss=KEYCLOAK, email=None, verified=None))


@pytest.mark.parametrize("verified", [True, "true", "TRUE"])
def test_verified_email_mapping_signs_in(engine: Engine, verified: Any) -> None:
    lead = add_user(engine, "lena", "lead")
    sso_mappings.map_email(engine, "Lena@Example.org", "lena")
    assert sso.resolve(engine, claims(email="lena@EXAMPLE.org", verified=verified)) == lead


@pytest.mark.parametrize(
    ("verified", "assume", "ok"),
    [
        (False, False, False),
        ("false", False, False),
        (None, False, False),  # no claim at all: not verified by default
        (None, True, True),  # LABELING_SSO_ASSUME_EMAIL_VERIFIED (Entra ID sends no claim)
        (False, True, False),  # an explicit false is never overridden
        (1, False, False),  # neither a bool nor 'true'
    ],
)
@pytest.mark.parametrize("rule", ["email", "domain"])
def test_unverified_email_is_refused_by_email_and_domain_rules(
    engine: Engine, verified: Any, assume: bool, ok: bool, rule: str
) -> None:
    if rule == "email":
        add_user(engine, "ann", "annotator")
        sso_mappings.map_email(engine, "ann@example.org", "ann")
    else:
        sso_mappings.map_domain(engine, "example.org", "annotator")
    c = claims(verified=verified)
    if ok:
        assert sso.resolve(engine, c, assume_email_verified=assume).role == "annotator"
    else:
        with pytest.raises(sso.SSORefused, match="not verified"):
            sso.resolve(engine, c, assume_email_verified=assume)
        assert get_user(engine, "ann@example.org") is None


def test_domain_rule_creates_the_user_once_and_links_the_subject(engine: Engine) -> None:
    rule = sso_mappings.map_domain(engine, "@Example.org", "annotator")
    assert rule.value == "example.org" and rule.user is None
    first = sso.resolve(engine, claims())
    assert (first.name, first.role, first.active) == ("ann@example.org", "annotator", True)
    # The created account has no password: it cannot sign in locally.
    with pytest.raises(AuthError):
        authenticate(engine, "ann@example.org", "")
    # Next time the subject row matches; no second user.
    assert sso.resolve(engine, claims()) == first
    rows = {(m.kind, m.value, m.user) for m in sso_mappings.list_mappings(engine)}
    assert ("subject", "1001", "ann@example.org") in rows
    # Later sign-ins follow the subject even if the address changes at the provider.
    assert sso.resolve(engine, claims(email="ann.new@elsewhere.net")) == first
    with read_session(engine) as s:
        assert s.scalar(select(func.count()).select_from(User)) == 1


@pytest.mark.parametrize("email", ["ann@sub.example.org", "ann@example.org.evil.net",
                                   "ann@notexample.org"])  # fmt: skip
def test_domain_rule_matches_only_its_exact_domain(engine: Engine, email: str) -> None:
    sso_mappings.map_domain(engine, "example.org", "annotator")
    with pytest.raises(sso.SSORefused, match="not mapped"):
        sso.resolve(engine, claims(email=email))


def test_unmapped_identity_is_refused_with_what_an_admin_needs(engine: Engine) -> None:
    add_user(engine, "ann", "annotator")
    with pytest.raises(sso.SSORefused) as err:
        sso.resolve(engine, claims(sub="s-42", email="bob@example.org"))
    message = str(err.value)
    assert "bob@example.org" in message and GOOGLE in message and "s-42" in message
    assert "ask an admin" in message


@pytest.mark.parametrize("how", ["subject", "email", "domain"])
def test_deactivated_user_is_refused_and_no_rule_revives_them(engine: Engine, how: str) -> None:
    sso_mappings.map_domain(engine, "example.org", "annotator")  # present in every case
    if how == "subject":
        add_user(engine, "ann", "annotator")
        sso_mappings.map_subject(engine, GOOGLE, "1001", "ann")
        name = "ann"
    elif how == "email":
        add_user(engine, "ann", "annotator")
        sso_mappings.map_email(engine, "ann@example.org", "ann")
        name = "ann"
    else:
        name = sso.resolve(engine, claims()).name  # created by the domain rule
    set_active(engine, name, False)
    with pytest.raises(sso.SSORefused, match="deactivated"):
        sso.resolve(engine, claims())
    with read_session(engine) as s:  # the domain rule created nobody new
        assert s.scalar(select(func.count()).select_from(User)) == 1


def test_subject_beats_email_and_email_beats_domain(engine: Engine) -> None:
    add_user(engine, "by-subject", "lead")
    add_user(engine, "by-email", "exporter")
    sso_mappings.map_domain(engine, "example.org", "annotator")
    sso_mappings.map_email(engine, "ann@example.org", "by-email")
    assert sso.resolve(engine, claims()).name == "by-email"
    sso_mappings.map_subject(engine, GOOGLE, "1001", "by-subject")
    assert sso.resolve(engine, claims()).name == "by-subject"


def test_domain_rule_never_takes_over_an_existing_local_account(engine: Engine) -> None:
    add_user(engine, "ann@example.org", "admin", "secret")
    sso_mappings.map_domain(engine, "example.org", "annotator")
    with pytest.raises(sso.SSORefused, match="already exists"):
        sso.resolve(engine, claims())
    assert get_user(engine, "ann@example.org").role == "admin"


def test_identity_without_issuer_or_subject_is_refused(engine: Engine) -> None:
    sso_mappings.map_domain(engine, "example.org", "annotator")
    for broken in (claims(iss=""), {**claims(), "sub": None}):
        with pytest.raises(sso.SSORefused, match="issuer and a subject"):
            sso.resolve(engine, broken)


def test_admin_operations_refuse_what_they_cannot_do(engine: Engine) -> None:
    add_user(engine, "ann", "annotator")
    sso_mappings.map_email(engine, "ann@example.org", "ann")
    cases = [
        (lambda: sso_mappings.map_email(engine, "ANN@example.org", "ann"), "already mapped"),
        (lambda: sso_mappings.map_email(engine, "bob@example.org", "bob"), "no user called 'bob'"),
        (
            lambda: sso_mappings.map_email(engine, "x@example.org", "ann", role="lead"),
            "already annotator",
        ),
        (lambda: sso_mappings.map_email(engine, "not-an-address", "ann"), "not an e-mail"),
        (lambda: sso_mappings.map_domain(engine, "example.org", "admin"), "cannot grant admin"),
        (lambda: sso_mappings.map_domain(engine, "localhost", "annotator"), "not a domain"),
        (lambda: sso_mappings.map_domain(engine, "example.org", "boss"), "unknown role"),
        (lambda: sso_mappings.map_subject(engine, GOOGLE, " ", "ann"), "cannot be empty"),
        (lambda: sso_mappings.unmap(engine, 999), "no mapping with id 999"),
    ]
    for call, message in cases:
        with pytest.raises(sso.SSOError, match=message):
            call()
    assert len(sso_mappings.list_mappings(engine)) == 1


def test_mapping_with_a_role_creates_a_passwordless_user(engine: Engine) -> None:
    made = sso_mappings.map_email(
        engine, "eve@example.org", "eve", role="exporter", created_by="admin"
    )
    assert (made.user, made.role, made.active, made.created_by) == ("eve", "exporter", True,
                                                                    "admin")  # fmt: skip
    assert get_user(engine, "eve").role == "exporter"
    with pytest.raises(AuthError):
        authenticate(engine, "eve", "")


def test_unmap_stops_sign_in_but_keeps_the_user(engine: Engine) -> None:
    add_user(engine, "ann", "annotator")
    m = sso_mappings.map_email(engine, "ann@example.org", "ann")
    assert sso.resolve(engine, claims()).name == "ann"
    assert sso_mappings.unmap(engine, m.id).value == "ann@example.org"
    with pytest.raises(sso.SSORefused, match="not mapped"):
        sso.resolve(engine, claims())
    assert get_user(engine, "ann") is not None


def test_sign_in_records_last_use_at_most_once_a_minute(engine: Engine) -> None:
    add_user(engine, "ann", "annotator")
    m = sso_mappings.map_email(engine, "ann@example.org", "ann")
    t0 = utcnow()
    sso.resolve(engine, claims(), now=t0)
    sso.resolve(engine, claims(), now=t0 + timedelta(seconds=30))
    first = sso_mappings.list_mappings(engine)[0]
    assert first.last_used_at == t0.replace(microsecond=t0.microsecond)
    sso.resolve(engine, claims(), now=t0 + timedelta(minutes=2))
    assert sso_mappings.list_mappings(engine)[0].last_used_at == t0 + timedelta(minutes=2)
    assert m.last_used_at is None


# ---------------------------------------------------------------- sessions


def test_sso_session_is_a_normal_login_session(engine: Engine) -> None:
    add_user(engine, "ann", "annotator")
    sso_mappings.map_email(engine, "ann@example.org", "ann")
    now = utcnow()
    user, token = sso.start_session(engine, claims(iat=now.timestamp()), idle_minutes=60,
                                    provider="google", now=now)  # fmt: skip
    assert resolve_session(engine, token, idle_minutes=60, now=now) == user
    # Idle expiry applies as for local sign-in.
    assert resolve_session(engine, token, idle_minutes=60, now=now + timedelta(minutes=61)) is None
    _, token2 = sso.start_session(engine, claims(iat=now.timestamp()), idle_minutes=60, now=now)
    set_active(engine, "ann", False)  # deactivation ends the SSO session too
    assert resolve_session(engine, token2, idle_minutes=60, now=now) is None


@pytest.mark.parametrize(
    ("age_minutes", "provider", "stale"),
    [(1, "google", False), (59, None, False), (61, "google", True), (1, "keycloak", True)],
)
def test_an_old_or_foreign_provider_sign_in_must_be_renewed(
    engine: Engine, age_minutes: int, provider: str | None, stale: bool
) -> None:
    add_user(engine, "ann", "annotator")
    sso_mappings.map_email(engine, "ann@example.org", "ann")
    now = utcnow()
    c = claims(iat=int((now - timedelta(minutes=age_minutes)).timestamp()), provider=provider)
    if stale:
        with pytest.raises(sso.SSOStale):
            sso.start_session(engine, c, idle_minutes=60, provider="google", now=now)
    else:
        user, _ = sso.start_session(engine, c, idle_minutes=60, provider="google", now=now)
        assert user.name == "ann"


def test_issued_at_reads_numbers_and_numeric_strings() -> None:
    assert sso.issued_at({"iat": 0}).year == 1970
    assert sso.issued_at({"iat": "86400"}).day == 2
    assert sso.issued_at({"iat": "soon"}) is None
    assert sso.issued_at({"iat": True}) is None
    assert sso.issued_at({}) is None


# ---------------------------------------------------------------- configuration


GOOD_AUTH = {
    "redirect_uri": "https://labeling.example.org/oauth2callback",
    "cookie_secret": "x" * 32,
    "google": {"client_id": "id", "client_secret": "s",
               "server_metadata_url": GOOGLE + "/.well-known/openid-configuration"},
}  # fmt: skip


@pytest.mark.parametrize(
    ("auth", "provider", "problem"),
    [
        (GOOD_AUTH, "google", None),
        (None, "google", "no [auth] section"),
        ({**GOOD_AUTH, "redirect_uri": "https://x.org/"}, "google", "end with /oauth2callback"),
        ({k: v for k, v in GOOD_AUTH.items() if k != "cookie_secret"}, "google", "cookie_secret"),
        (GOOD_AUTH, "microsoft", "no [auth.microsoft] section"),
        ({**GOOD_AUTH, "google": {"client_id": "id"}}, "google", "[auth.google] has no client_sec"),
        ({**GOOD_AUTH, **GOOD_AUTH["google"]}, "default", None),
        (GOOD_AUTH, "default", "[auth] has no client_id"),
    ],
)
def test_check_auth_config(monkeypatch: pytest.MonkeyPatch, auth: Any, provider: str,
                           problem: str | None) -> None:  # fmt: skip
    monkeypatch.setattr(sso, "authlib_installed", lambda: True)
    problems = sso.check_auth_config(auth, provider)
    if problem is None:
        assert problems == []
    else:
        assert any(problem in p for p in problems), problems


def test_missing_authlib_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sso, "authlib_installed", lambda: False)
    assert any("Authlib" in p for p in sso.check_auth_config(GOOD_AUTH, "google"))


def test_settings_sso_off_by_default_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("LABELING_SSO_PROVIDER", "LABELING_LOCAL_LOGIN_ROLES"):
        monkeypatch.delenv(var, raising=False)
    s = Settings()
    assert not s.sso_enabled and s.local_login_role_set == {"annotator", "lead", "exporter",
                                                            "admin"}  # fmt: skip
    monkeypatch.setenv("LABELING_SSO_PROVIDER", "keycloak")
    monkeypatch.setenv("LABELING_LOCAL_LOGIN_ROLES", " admin ,")
    s = Settings()
    assert s.sso_enabled and s.sso_button_label == "Keycloak"
    assert s.local_login_role_set == {"admin"}
    monkeypatch.setenv("LABELING_SSO_PROVIDER", "my_idp")
    with pytest.raises(ValidationError, match="cannot contain"):
        Settings()
    monkeypatch.setenv("LABELING_SSO_PROVIDER", "google")
    monkeypatch.setenv("LABELING_LOCAL_LOGIN_ROLES", "admin,admins")
    with pytest.raises(ValidationError, match="admins"):
        Settings()


def test_migration_adds_and_removes_the_table(sqlite_url: str) -> None:
    from alembic import command

    eng = make_engine(sqlite_url)
    try:
        assert "sso_identities" in inspect(eng).get_table_names()
        cfg = alembic_config(sqlite_url)
        with eng.begin() as conn:
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0002_queue_indexes")
        assert "sso_identities" not in inspect(eng).get_table_names()
        upgrade(eng)
        names = {c["name"] for c in inspect(eng).get_unique_constraints("sso_identities")}
        assert "uq_sso_identities_kind_issuer_value" in names
    finally:
        eng.dispose()


def test_a_domain_row_without_a_role_is_refused_by_the_database(engine: Engine) -> None:
    from sqlalchemy.exc import IntegrityError

    from db.engine import write_session

    with pytest.raises(IntegrityError):
        with write_session(engine) as s:
            s.add(SSOIdentity(kind="domain", issuer="", value="example.org"))


# ---------------------------------------------------------------- CLI


def test_cli_adds_lists_and_removes_mappings(sqlite_url: str) -> None:
    runner = CliRunner()

    def run(*args: str) -> Any:
        return runner.invoke(cli, ["--db", sqlite_url, "sso", *args])

    r = run("add-email", "Ann@Example.org", "ann", "--role", "annotator")
    assert r.exit_code == 0, r.output
    assert "mapped [1] email ann@example.org -> user ann (annotator)" in r.output
    assert run("add-subject", KEYCLOAK, "abc-123", "ann").exit_code == 0
    r = run("add-domain", "example.org", "--role", "lead")
    assert r.exit_code == 0 and "new users get role lead" in r.output
    r = run("add-domain", "example.net", "--role", "admin")
    assert r.exit_code == 2 and "admin" in r.output  # not a choice for domain rules
    r = run("add-email", "bob@example.org", "bob")
    assert r.exit_code == 2 and "no user called 'bob'" in r.output
    r = run("list", "--json")
    rows = json.loads(r.output)
    assert [(m["kind"], m["value"], m["user"], m["role"]) for m in rows] == [
        ("subject", "abc-123", "ann", "annotator"),
        ("email", "ann@example.org", "ann", "annotator"),
        ("domain", "example.org", None, "lead"),
    ]
    assert all(m["created_by"].startswith("cli") for m in rows)
    r = run("list")
    assert r.exit_code == 0 and r.output.count("\n") == 3 and "last used never" in r.output
    r = run("remove", "2", "99")
    assert r.exit_code == 2 and "removed [2]" in r.output and "no mapping with id 99" in r.output
    assert [m["id"] for m in json.loads(run("list", "--json").output)] == [1, 3]
    eng = get_engine(sqlite_url)
    assert get_user(eng, "ann").role == "annotator"  # removing a mapping keeps the user
    dispose_all()


# ---------------------------------------------------------------- the app (AppTest)


@pytest.fixture
def sso_app(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    """The app with SSO on (provider 'google'), one local user per role and a mapping."""
    monkeypatch.setenv("LABELING_DB_URL", sqlite_url)
    monkeypatch.setenv("LABELING_OPENALEX_OFFLINE", "true")
    monkeypatch.setenv("LABELING_SSO_PROVIDER", "google")
    monkeypatch.setattr(sso, "authlib_installed", lambda: True)
    get_settings.cache_clear()
    st.cache_resource.clear()
    eng = get_engine(sqlite_url)
    for role in ("annotator", "lead", "exporter", "admin"):
        add_user(eng, role, role, "pw-" + role)
    sso_mappings.map_email(eng, "ann@example.org", "annotator")
    yield eng
    st.cache_resource.clear()
    get_settings.cache_clear()
    dispose_all()


def app(user: dict[str, Any] | None = None, auth: dict[str, Any] | None = GOOD_AUTH) -> AppTest:
    """An AppTest of app.py with st.user and the [auth] secrets set."""
    at = AppTest.from_file(str(APP), default_timeout=30)
    if auth is not None:
        at.secrets["auth"] = auth
    at.user = user if user is not None else {"is_logged_in": False}
    return at


def fresh(**kw: Any) -> dict[str, Any]:
    """Claims of a sign-in that just happened at the provider."""
    return claims(iat=int(utcnow().timestamp()), provider="google", **kw)


def test_sso_off_shows_no_provider_button(app_env_plain: str) -> None:
    at = AppTest.from_file(str(APP), default_timeout=30)
    at.user = fresh()  # even a provider identity is ignored when SSO is off
    at.run()
    assert not at.exception
    assert [b.key for b in at.button if b.key == "sso_login"] == []
    assert "auth_token" not in at.session_state
    assert at.text_input(key="login_name") is not None


@pytest.fixture
def app_env_plain(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The app without SSO settings (the default)."""
    monkeypatch.setenv("LABELING_DB_URL", sqlite_url)
    monkeypatch.delenv("LABELING_SSO_PROVIDER", raising=False)
    get_settings.cache_clear()
    st.cache_resource.clear()
    yield sqlite_url
    st.cache_resource.clear()
    get_settings.cache_clear()
    dispose_all()


def test_login_page_offers_the_provider_and_calls_st_login(
    sso_app: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(st, "login", lambda provider=None: calls.append(provider))
    at = app().run()
    assert not at.exception
    button = at.button(key="sso_login")
    assert button.label == "Sign in with Google"
    assert at.text_input(key="login_name") is not None  # local accounts still work
    button.click().run()
    assert calls == ["google"]


@pytest.mark.parametrize(
    ("auth", "missing"),
    [({"redirect_uri": "https://x.org/oauth2callback"}, "cookie_secret"),
     (None, "no [auth] section")],  # None: no secrets.toml at all
)  # fmt: skip
def test_misconfigured_provider_is_explained_instead_of_a_button(
    sso_app: Engine, auth: dict[str, Any] | None, missing: str
) -> None:
    at = app(auth=auth).run()
    assert not at.exception
    assert not [b for b in at.button if b.key == "sso_login"]
    text = at.error[0].value
    assert "Sign-in with Google is not available" in text and missing in text
    assert at.text_input(key="login_name") is not None  # local accounts keep working


def test_mapped_identity_is_signed_in_with_a_database_session(sso_app: Engine) -> None:
    at = app(fresh()).run()
    assert not at.exception
    token = at.session_state["auth_token"]
    assert resolve_session(sso_app, token, idle_minutes=60).name == "annotator"
    assert any("(annotator) via Google" in shown(c.value) for c in at.sidebar.caption)
    assert not at.sidebar.get("bidi_component")  # no login cookie: the provider keeps SSO users
    # A later run of the app with this session reuses it instead of opening another.
    again = app(fresh())
    again.session_state["auth_token"] = token
    again.session_state["auth_via"] = "sso"
    again.run()
    assert again.session_state["auth_token"] == token
    with read_session(sso_app) as s:
        assert s.scalar(select(func.count()).select_from(AuthSession)) == 1


def test_domain_rule_creates_the_user_on_first_sign_in(sso_app: Engine) -> None:
    sso_mappings.map_domain(sso_app, "lab.example.org", "lead")
    at = app(fresh(sub="77", email="neo@lab.example.org")).run()
    assert not at.exception
    assert get_user(sso_app, "neo@lab.example.org").role == "lead"
    assert any("neo@lab.example.org" in shown(c.value) for c in at.sidebar.caption)


def test_unmapped_identity_is_refused_and_may_sign_out(sso_app: Engine) -> None:
    at = app(fresh(sub="9", email="stranger@example.com")).run()
    assert not at.exception
    assert "auth_token" not in at.session_state
    assert "stranger@example.com" in at.error[0].value and "not mapped" in at.error[0].value
    at.button(key="sso_logout").click().run()
    assert at.user == {"is_logged_in": False}  # st.logout() ran
    at.run()  # (a browser is redirected by st.logout; the next run is a fresh login page)
    assert not at.error and at.button(key="sso_login")


def test_unverified_email_is_refused_in_the_app(sso_app: Engine) -> None:
    at = app(fresh(verified=False)).run()
    assert "auth_token" not in at.session_state
    assert "not verified" in at.error[0].value


def test_stale_provider_sign_in_asks_to_sign_in_again(sso_app: Engine) -> None:
    old = claims(iat=int((utcnow() - timedelta(hours=5)).timestamp()), provider="google")
    at = app(old).run()
    assert "auth_token" not in at.session_state
    assert "expired" in at.info[0].value
    assert at.button(key="sso_login").label == "Sign in with Google"


def test_sign_out_ends_the_session_and_the_provider_sign_in(sso_app: Engine) -> None:
    at = app(fresh()).run()
    token = at.session_state["auth_token"]
    at.button(key="logout").click().run()
    assert not at.exception
    assert at.user == {"is_logged_in": False}
    assert resolve_session(sso_app, token, idle_minutes=60) is None
    # The browser is redirected; its next session carries the cleared identity.
    after = app(at.user).run()
    assert "auth_token" not in after.session_state and after.title[0].value == "Sign in"


def test_deactivation_ends_an_sso_session_for_good(sso_app: Engine) -> None:
    at = app(fresh()).run()
    assert "auth_token" in at.session_state
    token = at.session_state["auth_token"]
    set_active(sso_app, "annotator", False)
    at.run()  # the page that was open re-checks on the server and refuses
    assert "do not have access" in at.error[0].value
    # The app itself, run again with the same browser session, does not sign them back in.
    again = app(fresh())
    again.session_state["auth_token"] = token
    again.run()
    assert "auth_token" not in again.session_state
    assert "deactivated" in again.error[0].value


def test_local_login_can_be_limited_to_break_glass_admins(
    sso_app: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LABELING_LOCAL_LOGIN_ROLES", "admin")
    get_settings.cache_clear()
    at = app().run()
    assert "admin only" in at.expander[0].label
    at.text_input(key="login_name").input("lead")
    at.text_input(key="login_password").input("pw-lead")
    at.button(key="FormSubmitter:login-Sign in").click().run()
    assert "auth_token" not in at.session_state
    assert "not allowed for lead" in at.error[0].value
    at.text_input(key="login_name").input("admin")
    at.text_input(key="login_password").input("pw-admin")
    at.button(key="FormSubmitter:login-Sign in").click().run()
    assert resolve_session(sso_app, at.session_state["auth_token"], idle_minutes=60).role == "admin"


# ---------------------------------------------------------------- the admin page's tab


def admin_page(sso_app: Engine) -> AppTest:
    """The admin page, signed in as the local admin."""
    at = app().run()
    at.text_input(key="login_name").input("admin")
    at.text_input(key="login_password").input("pw-admin")
    at.button(key="FormSubmitter:login-Sign in").click().run()
    at.switch_page("pages/admin.py").run()
    assert not at.exception
    return at


def test_admin_tab_adds_and_removes_mappings(sso_app: Engine) -> None:
    at = admin_page(sso_app)
    assert "provider `google`" in at.caption[0].value
    at.radio(key="sso_kind").set_value("Domain rule").run()
    at.text_input(key="sso_domain").input("lab.example.org")
    at.selectbox(key="sso_domain_role").select("exporter")
    at.button(key="FormSubmitter:sso_add-Add mapping").click().run()
    assert any("domain lab.example.org" in shown(s.value) for s in at.success), at.error
    at.radio(key="sso_kind").set_value("Issuer and subject").run()
    at.text_input(key="sso_issuer").input(KEYCLOAK)
    at.text_input(key="sso_subject").input("abc")
    at.selectbox(key="sso_user").select("lead")
    at.button(key="FormSubmitter:sso_add-Add mapping").click().run()
    kinds = {(m.kind, m.value, m.user, m.role) for m in sso_mappings.list_mappings(sso_app)}
    assert kinds == {("email", "ann@example.org", "annotator", "annotator"),
                     ("domain", "lab.example.org", None, "exporter"),
                     ("subject", "abc", "lead", "lead")}  # fmt: skip
    made_by = {m.created_by for m in sso_mappings.list_mappings(sso_app) if m.kind != "email"}
    assert made_by == {"admin"}
    frame = at.dataframe[-1].value
    assert set(frame["value"]) == {"ann@example.org", "lab.example.org", "abc"}
    # A duplicate is refused with the reason.
    at.radio(key="sso_kind").set_value("E-mail").run()
    at.text_input(key="sso_email").input("ANN@example.org")
    at.selectbox(key="sso_user").select("lead")
    at.button(key="FormSubmitter:sso_add-Add mapping").click().run()
    assert any("already mapped" in shown(e.value) for e in at.error)
    # Remove the e-mail mapping: the list shown no longer has it.
    email_id = next(m.id for m in sso_mappings.list_mappings(sso_app) if m.kind == "email")
    at.selectbox(key="sso_remove_id").select(email_id)
    at.button(key="sso_remove").click().run()
    assert any("Removed" in shown(s.value) for s in at.success)
    assert "ann@example.org" not in set(at.dataframe[-1].value["value"])
    assert email_id not in {m.id for m in sso_mappings.list_mappings(sso_app)}


# ---------------------------------------------------------------- the real redirect (slow)


class _FakeProvider:
    """A minimal OpenID Connect provider on localhost: metadata, authorize, token, keys."""

    def __init__(self, client_id: str, identity: dict[str, Any]) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from urllib.parse import parse_qs, urlencode, urlparse

        from joserfc import jwt
        from joserfc.jwk import RSAKey

        key = RSAKey.generate_key(2048, parameters={"kid": "k1", "use": "sig"})
        nonces: dict[str, str] = {}
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _json(self, data: Any) -> None:
                body = json.dumps(data).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                url = urlparse(self.path)
                q = {k: v[0] for k, v in parse_qs(url.query).items()}
                if url.path == "/.well-known/openid-configuration":
                    self._json({
                        "issuer": provider.issuer,
                        "authorization_endpoint": provider.issuer + "/authorize",
                        "token_endpoint": provider.issuer + "/token",
                        "jwks_uri": provider.issuer + "/jwks",
                        "response_types_supported": ["code"],
                        "subject_types_supported": ["public"],
                        "id_token_signing_alg_values_supported": ["RS256"],
                    })  # fmt: skip
                elif url.path == "/jwks":
                    self._json({"keys": [key.as_dict(private=False)]})
                elif url.path == "/authorize":
                    nonces["code-1"] = q.get("nonce", "")
                    target = (
                        q["redirect_uri"] + "?" + urlencode({"code": "code-1", "state": q["state"]})
                    )
                    self.send_response(302)
                    self.send_header("Location", target)
                    self.end_headers()
                else:
                    self.send_error(404)

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                now = int(utcnow().timestamp())
                claims = {
                    "iss": provider.issuer,
                    "aud": client_id,
                    "iat": now,
                    "exp": now + 300,
                    "nonce": nonces.get(form.get("code", ""), ""),
                    **identity,
                }
                token = jwt.encode({"alg": "RS256", "kid": "k1"}, claims, key)
                self._json(
                    {
                        "access_token": "at",
                        "token_type": "Bearer",
                        "expires_in": 300,
                        "id_token": token,
                    }
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


async def _run_over_websocket(ws: Any, widgets: list[str] | None = None) -> dict[str, Any]:
    """One script run: widget ids by label, page paths, and an auth redirect if one came."""
    import asyncio

    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    msg = BackMsg()
    msg.rerun_script.query_string = ""
    for wid in widgets or []:
        state = msg.rerun_script.widget_states.widgets.add()
        state.id = wid
        state.trigger_value = True
    await ws.send(msg.SerializeToString())
    out: dict[str, Any] = {"ids": {}, "pages": [], "redirect": None, "text": []}
    while True:
        fwd = ForwardMsg()
        fwd.ParseFromString(await asyncio.wait_for(ws.recv(), 30))
        kind = fwd.WhichOneof("type")
        if kind == "navigation":
            # Titles, not paths: the landing page's path is "" (an annotator lands on Label).
            out["pages"] = [p.page_name for p in fwd.navigation.app_pages]
        elif kind == "auth_redirect":
            out["redirect"] = fwd.auth_redirect.url
        elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
            element = fwd.delta.new_element
            sub = getattr(element, element.WhichOneof("type"))
            if getattr(sub, "id", "") and getattr(sub, "label", ""):
                out["ids"][sub.label] = sub.id
            out["text"].append(str(getattr(sub, "body", "")))
        elif kind == "script_finished" and fwd.script_finished != 2:
            return out


@pytest.mark.slow
def test_real_oidc_redirect_signs_the_mapped_user_in(sqlite_url: str, tmp_path: Any) -> None:
    """A real `streamlit run` server, st.login against a local fake provider, then the app."""
    pytest.importorskip("authlib")
    import asyncio
    import os
    import subprocess
    import sys

    import httpx
    import websockets

    from tests.servers import ROOT, free_port, wait_healthy

    eng = make_engine(sqlite_url)
    add_user(eng, "ann", "annotator")
    sso_mappings.map_email(eng, "ann@example.org", "ann")
    idp = _FakeProvider("lab-client", {"sub": "u-1", "email": "ann@example.org",
                                       "email_verified": True, "name": "Ann"})  # fmt: skip
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(
        f'[auth]\nredirect_uri = "{base}/oauth2callback"\ncookie_secret = "{"s" * 40}"\n'
        f'[auth.fake]\nclient_id = "lab-client"\nclient_secret = "shh"\n'
        f'server_metadata_url = "{idp.issuer}/.well-known/openid-configuration"\n'
    )
    env = dict(os.environ, LABELING_DB_URL=sqlite_url, LABELING_OPENALEX_OFFLINE="true",
               LABELING_SSO_PROVIDER="fake", LABELING_SSO_LABEL="Fake IdP")  # fmt: skip
    log = tmp_path / "server.log"
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
           "--server.address", "127.0.0.1", "--server.port", str(port),
           "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
           "--secrets.files", str(secrets)]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    ws_url = base.replace("http://", "ws://") + "/_stcore/stream"

    async def flow() -> tuple[dict[str, Any], dict[str, Any]]:
        async with websockets.connect(ws_url, subprotocols=["streamlit"], max_size=None) as ws:
            first = await _run_over_websocket(ws)
            assert "Label" not in first["pages"] and "Sign in with Fake IdP" in first["ids"]
            clicked = await _run_over_websocket(ws, [first["ids"]["Sign in with Fake IdP"]])
        assert clicked["redirect"], clicked
        # The browser's part: follow the redirects through the provider and back.
        with httpx.Client(base_url=base, follow_redirects=True, timeout=30) as browser:
            landing = browser.get(clicked["redirect"])
            assert landing.status_code == 200
            browser.get("/_stcore/health")  # as the page does first: sets the XSRF cookie
            cookie = "; ".join(f"{k}={v}" for k, v in browser.cookies.items())
            xsrf = browser.cookies.get("_streamlit_xsrf")
        assert "_streamlit_user" in cookie and xsrf, log.read_text()[-2000:]
        # What the browser's page sends: its cookies, its origin (Streamlit checks the identity
        # cookie's origin) and the XSRF token as the second websocket subprotocol.
        async with websockets.connect(
            ws_url,
            subprotocols=["streamlit", xsrf],
            max_size=None,
            origin=base,
            additional_headers={"Cookie": cookie},
        ) as ws:
            signed_in = await _run_over_websocket(ws)
            logout_id = signed_in["ids"].get("Sign out")
            left = await _run_over_websocket(ws, [logout_id]) if logout_id else {}
        return signed_in, left

    try:
        wait_healthy(base, proc, log)
        signed_in, left = asyncio.run(flow())
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        idp.close()
    assert "Label" in signed_in["pages"], (signed_in["text"], log.read_text()[-3000:])
    assert any("Signed in as **ann** (annotator) via Fake IdP" in t for t in signed_in["text"])
    assert left.get("redirect", "").endswith("/auth/logout")  # Sign out also calls st.logout()
    with read_session(eng) as s:  # the session it opened was ended by Sign out
        assert s.scalar(select(func.count()).select_from(AuthSession)) == 0
        row = s.scalars(select(SSOIdentity).where(SSOIdentity.kind == "email")).one()
        assert row.last_used_at is not None
    eng.dispose()


@pytest.mark.parametrize("name", ["bad\x00name", "line\nbreak", "rlo\u202ename", " "])
def test_mapping_refuses_names_no_user_may_have(engine: Engine, name: str) -> None:
    with pytest.raises(sso.SSOError):
        sso_mappings.map_email(engine, "x@example.org", name, role="annotator")
    assert sso_mappings.list_mappings(engine) == []
