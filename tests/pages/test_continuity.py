"""The app shell keeps a local sign-in across a reload: the cookie is written after sign-in,
a new browser session resumes from it, and anything but a valid token gives the sign-in page.

AppTest cannot send cookies: `session_cookie.browser_token` (what st.context.cookies holds
in a browser) is replaced; the real cookie is exercised in tests/e2e/test_e2e_continuity.py.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from labeling.auth.login_sessions import COOKIE_NAME, create_session, new_token, resolve_session
from labeling.auth.users import get_user, set_active, set_role
from labeling.database import get_engine
from tests.pages.test_app_shell import APP, login
from tests.pages.test_app_shell import app_env as _app_env
from ui.components import session_cookie

app_db = pytest.fixture(_app_env.__wrapped__, name="app_db")  # one user per role


def cookie(at: AppTest) -> dict[str, Any] | None:
    """What the login cookie component was told in the last run (None: not mounted)."""
    found = [
        e for e in at.get("bidi_component") if e.proto.component_name == "labeling.session_cookie"
    ]
    return json.loads(found[-1].proto.json) if found else None


def new_page(monkeypatch: pytest.MonkeyPatch, value: str | None) -> AppTest:
    """A new browser session (a reload) whose page request carried this login cookie."""
    monkeypatch.setattr(session_cookie, "browser_token", lambda: value)
    return AppTest.from_file(str(APP), default_timeout=30).run()


def signed_in_as(at: AppTest) -> str | None:
    """The sidebar's "Signed in as" caption, or None on the sign-in page."""
    found = [c.value for c in at.sidebar.caption if c.value.startswith("Signed in as")]
    return found[0] if found else None


def test_local_sign_in_writes_the_token_into_the_cookie(app_db: str) -> None:
    at = login("annotator", "pw-annotator")
    data = cookie(at)
    assert data == {
        "op": "set",
        "name": COOKIE_NAME,
        "value": at.session_state["auth_token"],
        "max_age": 120 * 60,
        "stamp": at.session_state["auth_seen"],
    }
    assert cookie(AppTest.from_file(str(APP), default_timeout=30).run()) is None


def test_a_reload_resumes_from_the_cookie_with_a_new_token(
    app_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = login("annotator", "pw-annotator")
    token = first.session_state["auth_token"]
    again = new_page(monkeypatch, token)
    assert not again.exception, again.exception
    assert "**annotator** (annotator)" in signed_in_as(again)
    mine = again.session_state["auth_token"]
    assert mine != token and cookie(again)["value"] == mine  # rotated, and written back
    assert [e.proto.component_name for e in again.main.get("bidi_component")] == [
        "labeling.label_form"
    ]  # landed on the label page
    # The first tab keeps working; at its next run it takes a token of its own. (AppTest
    # shows no sidebar on a plain rerun after a page switch: the label form proves the run.)
    first.run()
    assert not first.exception and first.main.get("bidi_component")
    assert first.session_state["auth_token"] not in (token, mine)
    assert (
        resolve_session(
            get_engine(app_db), first.session_state["auth_token"], idle_minutes=120
        ).name
        == "annotator"
    )


def _long_ago() -> Any:
    """Longer ago than the default idle limit (120 minutes)."""
    from db.models import utcnow

    return utcnow() - timedelta(minutes=121)


@pytest.mark.parametrize(
    "kind", ["random", "malformed", "expired", "deactivated", "role changed", "signed out"]
)
def test_anything_but_a_valid_cookie_gives_the_sign_in_page(
    app_db: str, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    engine = get_engine(app_db)
    uid = get_user(engine, "annotator").id
    value = create_session(engine, uid, now=_long_ago() if kind == "expired" else None)
    if kind == "random":
        value = new_token()
    elif kind == "malformed":
        value = "<script>alert(1)</script>"
    elif kind == "deactivated":
        set_active(engine, "annotator", False)
    elif kind == "role changed":
        set_role(engine, "annotator", "lead")
    elif kind == "signed out":
        from labeling.auth.login_sessions import end_session

        end_session(engine, value)
    at = new_page(monkeypatch, value)
    assert not at.exception and not at.error
    assert at.title[0].value == "Sign in" and signed_in_as(at) is None
    assert "auth_token" not in at.session_state
    assert cookie(at) == {"op": "clear", "name": COOKIE_NAME, "drafts_of": None}


def test_a_cookie_of_a_role_not_allowed_to_sign_in_locally_is_refused(
    app_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from labeling.settings import get_settings

    token = login("admin", "pw-admin").session_state["auth_token"]
    monkeypatch.setenv("LABELING_LOCAL_LOGIN_ROLES", "annotator")
    get_settings.cache_clear()
    at = new_page(monkeypatch, token)
    assert at.title[0].value == "Sign in" and signed_in_as(at) is None


def test_an_annotator_cookie_opens_no_lead_page(
    app_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = login("annotator", "pw-annotator").session_state["auth_token"]
    at = new_page(monkeypatch, token)
    assert "(annotator)" in signed_in_as(at)
    with pytest.raises(ValueError, match="Could not find a navigation page"):
        at.switch_page("pages/monitor.py")  # not in an annotator's navigation at all
    # And the page itself, opened with the resumed session, checks the role on the server.
    page = AppTest.from_file(str(APP.parent / "pages" / "monitor.py"), default_timeout=30)
    page.session_state["auth_token"] = at.session_state["auth_token"]
    page.run()
    assert page.error and "do not have access" in page.error[0].value
    assert not [t for t in page.title if t.value == "Monitor"]


def test_sign_out_ends_the_login_and_clears_the_cookie_and_drafts(
    app_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = get_engine(app_db)
    at = login("annotator", "pw-annotator")
    token = at.session_state["auth_token"]
    other_tab = new_page(monkeypatch, token)
    at.button(key="logout").click().run()
    assert at.session_state["cookie_clear"] == get_user(engine, "annotator").id
    assert resolve_session(engine, token, idle_minutes=120) is None
    other_tab.run()  # the whole login ended: the other tab is signed out too
    assert signed_in_as(other_tab) is None
    # The sign-in page tells the browser to delete the cookie and this user's drafts.
    monkeypatch.setattr(session_cookie, "browser_token", lambda: None)
    fresh = AppTest.from_file(str(APP), default_timeout=30)
    fresh.session_state["cookie_clear"] = 7
    fresh.run()
    assert cookie(fresh) == {"op": "clear", "name": COOKIE_NAME, "drafts_of": 7}


def test_signing_in_purges_idle_sessions(app_db: str) -> None:
    from sqlalchemy import func, select

    from db.engine import read_session
    from db.models import AuthSession

    engine = get_engine(app_db)
    for name in ("lead", "exporter"):
        create_session(engine, get_user(engine, name).id, now=_long_ago())
    live = create_session(engine, get_user(engine, "admin").id)
    login("annotator", "pw-annotator")
    with read_session(engine) as session:
        assert session.scalar(select(func.count()).select_from(AuthSession)) == 2
    assert resolve_session(engine, live, idle_minutes=120).name == "admin"
