"""Shared page plumbing: the engine, the signed-in user, and the server-side role check."""

from __future__ import annotations

import streamlit as st
from streamlit import config
from streamlit.runtime.pages_manager import PagesManager

from labeling.auth import access
from labeling.auth.login_sessions import check_session
from labeling.auth.users import UserInfo
from labeling.database import migrated_engine
from labeling.schema import Schema, load_schema
from labeling.settings import Settings, get_settings


def settings() -> Settings:
    """The app's settings (the environment's), passed on to the domain code that needs them."""
    return get_settings()


def engine():  # noqa: ANN201 - an Engine (pages never import db or SQLAlchemy types)
    """The process-wide engine for the configured database, migrated on first use.

    labeling.database holds the one engine per URL (the CLI's route too) and migrates it once.
    """
    return migrated_engine(get_settings())


@st.cache_resource(show_spinner=False)
def _schema_for(path: str) -> Schema:
    return load_schema(path)


def schema() -> Schema:
    """The configured label schema."""
    return _schema_for(str(get_settings().schema_path))


def current_user() -> UserInfo | None:
    """The user of this browser session, re-checked against the database on every run.

    The tab's token is rotated when due (login_sessions.check_session); the new one replaces
    it here, and app.py writes it into the cookie.
    """
    token = st.session_state.get("auth_token")
    if not token:
        return None
    live = check_session(engine(), token, idle_minutes=get_settings().session_idle_minutes)
    if live is None:  # expired, signed out elsewhere, deactivated or given another role
        st.session_state.pop("auth_token", None)
        st.session_state.pop("auth_via", None)
        return None
    st.session_state["auth_token"] = live.token
    st.session_state["auth_seen"] = live.last_seen.isoformat(timespec="seconds")
    return live.user


CHECKED = "_guard_checked_user"


def checked(user: UserInfo | None) -> None:
    """app.py hands the user it has just checked to this run's page (one check per run)."""
    if user is None:
        st.session_state.pop(CHECKED, None)
    else:
        st.session_state[CHECKED] = user


def through_app() -> None:
    """Rerun through app.py when Streamlit ran this page file on its own, from pages/.

    Until some session of the server process has called st.navigation, Streamlit still
    treats pages/ as a folder of pages (its first multipage design): the first visitor after
    a restart who opens a page's URL (a bookmark of /label) got that file run directly, with
    no sign-in form, a sidebar naming every module in pages/, and "You do not have access".
    Setting the flag that st.navigation sets, then rerunning, runs app.py at the same URL:
    the sign-in form, then the page itself if the role may open it. app.py calls this first
    too: at "/", that first run is app.py's own, under Streamlit's folder navigation. (Only an
    address with no file in pages/, /login, still gets "Page not found" as a fresh server's
    first request. Streamlit is pinned to 1.67; tests/e2e/test_e2e_typed_urls.py opens every
    page's address as a fresh server's first request.)
    """
    # AppTest sets the flag back before each of its runs and runs single pages on purpose.
    # (It patches config.get_option, not the st.get_option bound at import.)
    if PagesManager.uses_pages_directory and not config.get_option("global.appTest"):
        PagesManager.uses_pages_directory = False
        st.rerun()


def require(page: str) -> UserInfo:
    """Stop the script unless the signed-in user's role may open `page`."""
    through_app()
    # app.py checked the token earlier in this same run; taken once, so a later run checks
    # again unless app.py has just done so. A page run on its own (AppTest) checks here.
    user = st.session_state.pop(CHECKED, None) or current_user()
    if user is None or not access.can_open(user.role, page):
        st.error("You do not have access to this page.")
        st.stop()
    return user
