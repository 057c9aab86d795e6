"""The login cookie: written and cleared in the browser by a tiny component, read back with
st.context.cookies when a new Streamlit session starts (a reload, a typed URL, a new tab).

Streamlit 1.67 sets no cookie from a script run (`st.context.cookies` is read-only, the
cookies of the page's first request); assets/session_cookie.js writes `document.cookie`.
The token goes to the browser as component data over the app's websocket: never in a URL.
"""

from __future__ import annotations

import streamlit as st

from labeling.auth.login_sessions import COOKIE_NAME
from ui.components import component

KEY = "session_cookie"
_mount = component("session_cookie")


def browser_token() -> str | None:
    """The login cookie's value as the browser sent it when this session's page was opened."""
    value = st.context.cookies.get(COOKIE_NAME)
    return value if isinstance(value, str) and value else None


def keep(token: str, *, max_age: int, stamp: str) -> None:
    """Write the token into the cookie (again when `stamp` changes: renews its Max-Age)."""
    _mount(
        key=KEY,
        data={"op": "set", "name": COOKIE_NAME, "value": token, "max_age": max_age, "stamp": stamp},
    )


def forget(drafts_of: int | None) -> None:
    """Delete the cookie, and the unsaved answers of user `drafts_of` (None: keep them)."""
    _mount(key=KEY, data={"op": "clear", "name": COOKIE_NAME, "drafts_of": drafts_of})
