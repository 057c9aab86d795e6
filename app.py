"""Entry point: login, then the pages the user's role may open (st.navigation)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from labeling import access
from labeling.users import AuthError, authenticate, create_session, end_session
from pages._guard import current_user, engine

st.set_page_config(page_title="Labeling", page_icon=":material/fact_check:", layout="wide")

HERE = Path(__file__).parent
PAGES = {
    "home": ("Home", ":material/home:"),
    "label": ("Label", ":material/edit_note:"),
    "campaigns": ("Campaigns", ":material/list:"),
    "adjudicate": ("Adjudicate", ":material/gavel:"),
    "monitor": ("Monitor", ":material/monitoring:"),
    "export": ("Export", ":material/download:"),
    "admin": ("Admin", ":material/settings:"),
}


def page(name: str) -> st.Page:
    """The st.Page of one screen (its file is pages/<name>.py)."""
    title, icon = PAGES[name]
    return st.Page(f"pages/{name}.py", title=title, icon=icon, url_path=name,
                   default=name == "home")


def login_page() -> None:
    """The login form; on success the session token goes into session_state."""
    st.title("Sign in")
    with st.form("login"):
        name = st.text_input("Name", key="login_name")
        password = st.text_input("Password", type="password", key="login_password")
        submitted = st.form_submit_button("Sign in", type="primary")
    if submitted:
        try:
            user = authenticate(engine(), name, password)
        except AuthError as exc:
            st.error(str(exc))
            return
        st.session_state["auth_token"] = create_session(engine(), user.id)
        st.rerun()


def logout() -> None:
    """End the login session in the database and in this browser session."""
    end_session(engine(), st.session_state.pop("auth_token", None))


user = current_user()
if user is None:
    nav = st.navigation([st.Page(login_page, title="Sign in", url_path="login")])
else:
    available = [
        page(name) for name in access.pages_for(user.role)
        if (HERE / "pages" / f"{name}.py").exists()
    ]
    nav = st.navigation(available)
    with st.sidebar:
        st.caption(f"Signed in as **{user.name}** ({user.role})")
        st.button("Sign out", key="logout", on_click=logout)
nav.run()
