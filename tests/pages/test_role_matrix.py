"""Every page x every role, on the server: the page renders, or shows only the refusal.

The expected outcome is the table below, written by hand (not read from PAGE_ROLES), so a
wrong PAGE_ROLES fails here. Also: the navigation lists exactly the allowed pages, and an
annotator never reads another annotator's labels, whatever the URL's query parameters say.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import streamlit as st
from sqlalchemy import Engine, update
from streamlit.testing.v1 import AppTest

from db.engine import write_session
from db.models import User, utcnow
from labeling.auth.login_sessions import create_session
from labeling.auth.users import add_user, get_user
from labeling.database import dispose_all
from labeling.review.campaigns import get_campaign
from labeling.schema import Schema, load_schema
from labeling.settings import DEFAULT_SCHEMA, get_settings
from tests.factories import answers_for, label_next
from tests.label_page import Browser, form
from tests.pages.test_label_page import PASSWORD, build_label_db
from tests.pages.test_lead_pages import label_pair

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app.py"
DENIED = "You do not have access to this page."
ROLES = ("annotator", "lead", "exporter", "admin")
SECRET_NOTE = "private note of annotator2 zq7"

# The access table, by hand: Y = the role may open the page.
#                 annotator  lead  exporter  admin
EXPECTED = {
    "home":       ("Y",      "Y",  "Y",      "Y"),
    "label":      ("Y",      "Y",  "-",      "-"),
    "campaigns":  ("-",      "Y",  "-",      "Y"),
    "adjudicate": ("-",      "Y",  "-",      "-"),
    "monitor":    ("-",      "Y",  "-",      "-"),
    "export":     ("-",      "Y",  "Y",      "Y"),
    "admin":      ("-",      "-",  "-",      "Y"),
}  # fmt: skip
ALLOWED = {
    page: {r for r, mark in zip(ROLES, row, strict=True) if mark == "Y"}
    for page, row in EXPECTED.items()
}
# Identities with no valid session; each of them holds a role that could open the page.
NO_SESSION = ("not signed in", "forged token", "deactivated user", "expired session")
IDENTITIES = (*ROLES, *NO_SESSION)


def _marker(title: str) -> Callable[[AppTest], bool]:
    return lambda at: bool(at.title) and at.title[0].value == title


# What an allowed page shows: its own content, checked on the page tree.
CONTENT: dict[str, Callable[[AppTest], bool]] = {
    "home": _marker("Human validation"),
    "label": lambda at: (
        form(at)["state"] == "work" and form(at)["card"]["title"].startswith("Test work")
    ),
    "campaigns": lambda at: _marker("Campaigns")(at) and bool(at.dataframe),
    "adjudicate": lambda at: (
        _marker("Adjudicate")(at)
        and form(at, "adjudicate_form")["state"] == "work"
        and form(at, "adjudicate_form")["total"] >= 1
    ),
    "monitor": lambda at: _marker("Monitor")(at) and bool(at.dataframe),
    "export": _marker("Export"),
    "admin": lambda at: _marker("Admin")(at) and "annotator2" in set(at.dataframe[0].value["name"]),
}


def leaves(at: AppTest) -> list[Any]:
    """Every element (not container) in the main area and the sidebar."""
    return [n for area in (at.main, at.sidebar) for n in area if not hasattr(n, "children")]


def shown_text(at: AppTest) -> str:
    """Every value of every element on the page, as one string."""
    out = []
    for node in leaves(at):
        try:
            out.append(str(node.value))
        except Exception:  # noqa: BLE001 - some elements have no value; their proto says all
            out.append(str(node.proto))
    return "\n".join(out)


def assert_denied(at: AppTest, secrets: list[str]) -> None:
    """Exactly the refusal: one error element and nothing else, no data of anyone."""
    assert not at.exception, at.exception
    kinds = [n.type for n in leaves(at)]
    assert kinds == ["error"], kinds
    assert at.error[0].value == DENIED
    assert not at.dataframe and not at.text and not at.button and not at.text_input
    assert not at.get("bidi_component")
    text = shown_text(at)
    for secret in secrets:
        assert secret not in text, secret


def set_active(engine: Engine, name: str, active: bool) -> None:
    """Flip a user's active flag directly, keeping the user's login sessions in place."""
    with write_session(engine) as session:
        session.execute(update(User).where(User.name == name).values(active=active))


def label_as(
    engine: Engine, schema: Schema, name: str, campaign: str, variant: int, note: str | None = None
) -> str:
    """`name` claims and labels their next work of a campaign; returns the work id."""
    return label_next(
        engine,
        schema,
        campaign,
        name,
        answers_for(schema, variant),
        flagged=note is not None,
        note=note,
    )


@pytest.fixture(scope="module")
def matrix_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One database for the whole matrix: a user per role, disputes, flagged notes."""
    tmp = tmp_path_factory.mktemp("matrix")
    url = f"sqlite:///{tmp / 'matrix.db'}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LABELING_DB_URL", url)
        mp.setenv("LABELING_OPENALEX_OFFLINE", "true")
        get_settings.cache_clear()
        st.cache_resource.clear()
        engine = build_label_db(url, tmp, n=8)
        schema = load_schema(DEFAULT_SCHEMA)
        disputed = label_pair(engine, schema, "top", (0, 1), note=SECRET_NOTE)
        label_pair(engine, schema, "top", (0, 0))  # one validated work
        for role in ("lead", "admin", "exporter", "annotator"):
            add_user(engine, f"gone_{role}", role, PASSWORD)
        yield {
            "url": url,
            "engine": engine,
            "disputed": disputed,
            "secrets": ["annotator2", SECRET_NOTE, disputed, "Test work", "gone_"],
        }
        st.cache_resource.clear()
        get_settings.cache_clear()
        dispose_all()


def token_for(engine: Engine, identity: str, page: str) -> str | None:
    """A session token for an identity; for the no-session ones, a role the page allows."""
    role = sorted(ALLOWED[page])[0] if ALLOWED[page] else "admin"
    if identity in ROLES:
        return create_session(engine, get_user(engine, identity).id)
    if identity == "not signed in":
        return None
    if identity == "forged token":
        return "x" * 43
    if identity == "deactivated user":
        name = f"gone_{role}"
        set_active(engine, name, True)
        token = create_session(engine, get_user(engine, name).id)
        set_active(engine, name, False)  # deactivated after signing in; the session row stays
        return token
    idle = get_settings().session_idle_minutes
    old = utcnow() - timedelta(minutes=idle + 1)
    return create_session(engine, get_user(engine, role).id, now=old)


def run_page(page: str, token: str | None, **state: Any) -> AppTest:
    """Run pages/<page>.py directly (as a URL would) with a session token in session_state."""
    at = AppTest.from_file(str(ROOT / "pages" / f"{page}.py"), default_timeout=60)
    if token is not None:
        at.session_state["auth_token"] = token
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


@pytest.mark.parametrize("identity", IDENTITIES)
@pytest.mark.parametrize("page", list(EXPECTED))
def test_page_by_identity(matrix_db: dict[str, Any], page: str, identity: str) -> None:
    """The page's own content when the table says Y, else exactly the refusal."""
    engine = matrix_db["engine"]
    token = token_for(engine, identity, page)
    # Widget state a page would pick up (the lead pages' campaign pickers): no effect on denial.
    top = get_campaign(engine, "top").id
    at = run_page(page, token, mon_campaign=top, adj_campaign=top)
    if identity in ALLOWED[page]:
        assert not at.exception, at.exception
        assert DENIED not in [e.value for e in at.error]
        assert CONTENT[page](at), shown_text(at)[:2000]
    else:
        assert_denied(at, matrix_db["secrets"] + ([identity] if identity in ROLES else []))
        if identity in NO_SESSION[2:]:
            assert "auth_token" not in at.session_state  # the dead session is dropped


def test_the_table_matches_the_access_module() -> None:
    """PAGE_ROLES says the same as the table above (and names no other page)."""
    from labeling.auth import access

    assert set(access.PAGE_ROLES) == set(EXPECTED)
    for page, roles in ALLOWED.items():
        assert set(access.PAGE_ROLES[page]) == roles, page
        assert [r for r in ROLES if access.can_open(r, page)] == sorted(roles, key=ROLES.index)


def sign_in(name: str) -> AppTest:
    """Run app.py and sign in with the login form."""
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    at.text_input(key="login_name").input(name)
    at.text_input(key="login_password").input(PASSWORD)
    at.button[0].click().run()
    assert not at.exception, at.exception
    return at


def navigation(at: AppTest) -> list[str]:
    """The page files st.navigation registered in the last run of app.py (file stems).

    The hidden pages app.py adds for the other addresses ("/", pages not open) are functions
    that only lead elsewhere: they have no file.
    """
    paths = [str(info["script_path"]) for info in at._registered_pages.values()]
    return sorted(Path(path).stem for path in paths if path)


@pytest.mark.parametrize("role", ROLES)
def test_navigation_lists_exactly_the_allowed_pages(matrix_db: dict[str, Any], role: str) -> None:
    """Each allowed page opens from the navigation; every other page is not in it."""
    token = sign_in(role).session_state["auth_token"]

    def app() -> AppTest:
        at = AppTest.from_file(str(APP), default_timeout=60)
        at.session_state["auth_token"] = token
        return at.run()

    at = app()
    assert any(f"({role})" in c.value for c in at.sidebar.caption)
    assert navigation(at) == sorted(p for p in EXPECTED if role in ALLOWED[p])
    for page in EXPECTED:
        if role not in ALLOWED[page]:
            with pytest.raises(ValueError, match="Could not find a navigation page"):
                at.switch_page(f"pages/{page}.py")
    for page in EXPECTED:
        if role in ALLOWED[page]:
            # A fresh app run each time: AppTest forgets the navigation after a page switch.
            opened = app().switch_page(f"pages/{page}.py").run()
            assert not opened.exception, (page, opened.exception)
            assert CONTENT[page](opened), page


def test_navigation_without_a_session_is_the_login_form_only(matrix_db: dict[str, Any]) -> None:
    """Signed out, the app has one page: Sign in; no page of the tool can be switched to."""
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert [t.value for t in at.title] == ["Sign in"]
    for page in EXPECTED:
        with pytest.raises(ValueError, match="Could not find a navigation page"):
            at.switch_page(f"pages/{page}.py")
    # A deactivated user's open session counts as signed out on the next run.
    engine = matrix_db["engine"]
    token = token_for(engine, "deactivated user", "monitor")
    at.session_state["auth_token"] = token
    at.run()
    assert [t.value for t in at.title] == ["Sign in"]
    assert "auth_token" not in at.session_state


# ------------------------------------------------------------------ annotators' labels

# The query parameters the pages read (none today) plus every name a hostile link might try.
HOSTILE_PARAMS = (
    "work",
    "work_id",
    "user",
    "user_id",
    "annotator",
    "campaign",
    "campaign_id",
    "label",
    "label_id",
    "edit",
    "back",
    "token",
    "auth_token",
    "role",
    "page",
)


def query_params_read() -> set[str]:
    """The names the pages and app.py read from st.query_params (a source scan)."""
    names: set[str] = set()
    for path in [APP, *sorted((ROOT / "pages").glob("*.py"))]:
        src = path.read_text(encoding="utf-8")
        names |= set(re.findall(r"query_params(?:\.get\()?\[?\(?[\"']([^\"']+)[\"']", src))
        assert src.count("query_params") == len(
            re.findall(r"query_params[.\[]get|query_params\[", src)
        ), path
    return names


def test_every_query_parameter_read_is_tried() -> None:
    """A page that starts reading a query parameter must have it in HOSTILE_PARAMS."""
    assert query_params_read() <= set(HOSTILE_PARAMS)


@pytest.fixture
def two_annotators(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A fresh database where annotator2 labelled two works of "top" with a private note."""
    from labeling.review import flow as session

    monkeypatch.setattr(session, "MIN_DWELL", 0.0)
    url = f"sqlite:///{tmp_path / 'iso.db'}"
    monkeypatch.setenv("LABELING_DB_URL", url)
    monkeypatch.setenv("LABELING_OPENALEX_OFFLINE", "true")
    get_settings.cache_clear()
    st.cache_resource.clear()
    session.forget_progress()
    engine = build_label_db(url, tmp_path, n=6)
    schema = load_schema(DEFAULT_SCHEMA)
    theirs = [
        label_as(engine, schema, "annotator2", "top", 1, note=SECRET_NOTE),
        label_as(engine, schema, "annotator2", "top", 1, note=SECRET_NOTE),
    ]
    yield {
        "engine": engine,
        "theirs": theirs,
        "schema": schema,
        "other_id": get_user(engine, "annotator2").id,
        "top": get_campaign(engine, "top").id,
    }
    st.cache_resource.clear()
    get_settings.cache_clear()
    dispose_all()


def hostile_values(env: dict[str, Any]) -> list[dict[str, str | list[str]]]:
    """Query strings naming annotator2's works, user id and campaign, and junk."""
    wid, other, top = env["theirs"][0], str(env["other_id"]), str(env["top"])
    named = {
        "work": wid,
        "work_id": wid,
        "user": "annotator2",
        "user_id": other,
        "annotator": "annotator2",
        "campaign": top,
        "campaign_id": top,
        "label": "1",
        "label_id": "1",
        "edit": wid,
        "back": "1",
        "token": "x",
        "auth_token": "x",
        "role": "lead",
        "page": "adjudicate",
    }
    junk = {name: ["' OR 1=1 --", "-1", "../../etc/passwd", wid] for name in HOSTILE_PARAMS}
    return [named, junk]


def state(at: AppTest, key: str) -> Any:
    """A session_state value, None when the key is not set."""
    return at.session_state[key] if key in at.session_state else None


def assert_nothing_of_annotator2(at: AppTest, env: dict[str, Any]) -> None:
    """No label, note or answer of annotator2 is on the page or in the page's state."""
    assert not at.exception, at.exception
    assert SECRET_NOTE not in shown_text(at)
    screen = state(at, "lbl_screen")
    if screen is not None and screen.edit:
        item, draft = screen.edit
        assert item.editing.user_id == item.user_id
        assert item.user_id != env["other_id"] and draft.note != SECRET_NOTE


def test_edit_previous_never_opens_another_annotators_label(
    two_annotators: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With hostile query parameters, B (edit previous) opens only the annotator's own labels."""
    env = two_annotators
    engine = env["engine"]
    me = get_user(engine, "annotator").id
    browser = Browser(monkeypatch)
    for params in hostile_values(env):
        at = AppTest.from_file(str(ROOT / "pages" / "label.py"), default_timeout=60)
        at.session_state["auth_token"] = create_session(engine, me)
        at.query_params.update(params)
        at.run()
        assert_nothing_of_annotator2(at, env)
        assert state(at, "lbl_screen").user_id == me
        draft = form(at)["draft"]
        assert all(v is None or v == [] for v in draft["answers"].values())  # not prefilled
        browser.send(at, "back")  # nothing of mine yet: nothing opens
        assert_nothing_of_annotator2(at, env)
        assert form(at)["editing"] is None
        assert "No earlier label of yours" in form(at)["message"]["text"]
    # Label one work (annotator2's first, overlap 2), then walk back through the history.
    mine = form(at)["work_id"]
    assert mine == env["theirs"][0]
    browser.submit(at)
    at.query_params.update(hostile_values(env)[0])
    browser.send(at, "back")
    assert_nothing_of_annotator2(at, env)
    item, draft = state(at, "lbl_screen").edit
    assert (item.work_id, item.editing.user_id, item.editing.version) == (mine, me, 1)
    assert draft.answers == item.editing.answers
    assert draft.answers != answers_for(env["schema"], 1)  # annotator2's answers (variant 1)
    browser.send(at, "back")  # nothing older of mine; annotator2's are not offered
    assert_nothing_of_annotator2(at, env)
    assert form(at)["work_id"] == mine and form(at)["editing"] == {"version": 1}
    assert "No earlier label of yours" in form(at)["message"]["text"]


def test_previous_item_reads_only_the_users_own_labels(two_annotators: dict[str, Any]) -> None:
    """The domain call behind B: any back-count, own labels only, for every campaign id."""
    from labeling.review.flow import previous_item

    env = two_annotators
    engine = env["engine"]
    me = get_user(engine, "annotator").id
    for campaign in (env["top"], -1, 0, 10**9):
        for back in (-1, 0, 1, 2, 3, 10**6):
            try:
                found = previous_item(
                    engine, campaign, me, env["schema"], back, settings=get_settings()
                )
            except Exception as exc:  # noqa: BLE001 - an unknown campaign may refuse plainly
                assert campaign != env["top"], exc
                continue
            assert found is None, (campaign, back)
    # annotator2 sees their own label through the same call (the check is not vacuous).
    found = previous_item(
        engine, env["top"], env["other_id"], env["schema"], 1, settings=get_settings()
    )
    assert found is not None and found[0].editing.note == SECRET_NOTE
