"""The app shell: login, logout, and navigation built from the user's role."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from labeling.auth import access
from labeling.database import dispose_all
from labeling.settings import get_settings

APP = Path(__file__).resolve().parents[2] / "app.py"


@pytest.fixture
def app_env(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Point the app at a fresh database with one user per role."""
    monkeypatch.setenv("LABELING_DB_URL", sqlite_url)
    monkeypatch.setenv("LABELING_OPENALEX_OFFLINE", "true")
    get_settings.cache_clear()
    st.cache_resource.clear()
    from labeling.auth.users import add_user
    from labeling.database import get_engine

    engine = get_engine(sqlite_url)
    for role in ("annotator", "lead", "exporter", "admin"):
        add_user(engine, role, role, "pw-" + role)
    yield sqlite_url
    st.cache_resource.clear()
    get_settings.cache_clear()
    dispose_all()


def login(name: str, password: str) -> AppTest:
    """Run the app and submit the login form."""
    at = AppTest.from_file(str(APP), default_timeout=30).run()
    at.text_input(key="login_name").input(name)
    at.text_input(key="login_password").input(password)
    at.button[0].click().run()
    return at


def test_anonymous_user_sees_only_the_login_form(app_env: str) -> None:
    at = AppTest.from_file(str(APP), default_timeout=30).run()
    assert not at.exception
    assert at.title[0].value == "Sign in"


def test_wrong_password_is_refused(app_env: str) -> None:
    at = login("lead", "nope")
    assert not at.exception
    assert at.error and "invalid" in at.error[0].value.lower()
    assert "auth_token" not in at.session_state


@pytest.mark.parametrize("role", ["annotator", "lead", "exporter", "admin"])
def test_login_shows_the_role_and_logout_ends_the_session(app_env: str, role: str) -> None:
    at = login(role, "pw-" + role)
    assert not at.exception
    assert "auth_token" in at.session_state
    assert any(f"({role})" in c.value for c in at.sidebar.caption)
    assert access.pages_for(role)[0] == "home"
    token = at.session_state["auth_token"]
    at.button(key="logout").click().run()
    assert "auth_token" not in at.session_state
    # The page that was open re-checks the role on the server and now refuses.
    assert at.error and "do not have access" in at.error[0].value
    from labeling.auth.login_sessions import resolve_session
    from labeling.database import get_engine

    assert resolve_session(get_engine(app_env), token, idle_minutes=60) is None


@pytest.mark.parametrize(
    ("role", "page", "allowed"),
    [
        ("annotator", "label", True),
        ("annotator", "campaigns", False),
        ("annotator", "monitor", False),
        ("annotator", "export", False),
        ("annotator", "admin", False),
        ("lead", "adjudicate", True),
        ("exporter", "export", True),
        ("exporter", "label", False),
        ("admin", "admin", True),
        ("admin", "label", False),
        (None, "home", False),
    ],
)
def test_access_table(role: str | None, page: str, allowed: bool) -> None:
    assert access.can_open(role, page) is allowed
    if not allowed:
        with pytest.raises(access.AccessDenied):
            access.check(role, page)


@pytest.mark.parametrize(
    ("role", "lands_on"),
    [
        ("annotator", "label"),
        ("lead", "monitor"),
        ("exporter", "export"),
        ("admin", "admin"),
    ],
)
def test_each_role_lands_on_its_main_page(app_env: str, role: str, lands_on: str) -> None:
    """After signing in, an annotator is on Label (not a near-empty Home), and so on."""
    at = login(role, "pw-" + role)
    assert not at.exception, at.exception
    if lands_on == "label":
        assert [e.proto.component_name for e in at.main.get("bidi_component")] == [
            "labeling.label_form"
        ]
    else:
        assert at.title[0].value == lands_on.capitalize()
    assert not any(t.value == "Human validation" for t in at.title)
