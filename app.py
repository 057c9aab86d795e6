"""Entry point: login, then the pages the user's role may open (st.navigation)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from labeling.auth import access, sso
from labeling.auth.login_sessions import create_session, end_session, purge_sessions, resume_session
from labeling.auth.users import AuthError, UserInfo, authenticate
from labeling.settings import Settings, get_settings
from pages._errors import error_text, show_error
from pages._guard import checked, current_user, engine, through_app
from pages._heap import freeze_loaded
from pages._ui import escape_markdown as esc
from ui.components import session_cookie

# An emoji favicon is drawn from a data: URL; a :material/...: one is fetched from a Google
# host, which fails offline (and should not be asked at all).
st.set_page_config(page_title="Labeling", page_icon="🏷️", layout="wide")
freeze_loaded()

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
# The page each role lands on after signing in (Home stays in the navigation).
MAIN_PAGE = {"annotator": "label", "lead": "monitor", "exporter": "export", "admin": "admin"}
S = st.session_state


# Streamlit serves the default page of st.navigation at "/" only: its own url_path is
# reserved but answers "Page not found". So no real page is the default; a hidden root page
# is, and it sends a signed-in user on to their role's main page at that page's own address,
# so that every address bar shows a URL that opens the same page again when typed.
ROOT = "start"


def page(name: str) -> st.Page:
    """The st.Page of one screen (its file is pages/<name>.py), at /<name>."""
    title, icon = PAGES[name]
    return st.Page(f"pages/{name}.py", title=title, icon=icon, url_path=name)


def elsewhere() -> None:
    """The hidden pages that app.py leaves before they run (the root, pages not open)."""


def hidden(url_path: str, run: Any = elsewhere, *, default: bool = False) -> st.Page:
    """A page outside the navigation menu that answers at /<url_path> (or "/" as default)."""
    title = "Sign in" if run is not elsewhere else "Labeling"
    return st.Page(run, title=title, url_path=url_path, default=default, visibility="hidden")


def begin(token: str, via: str) -> None:
    """Keep a new login's token in this browser session; drop expired logins (cheap, rare)."""
    purge_sessions(engine(), idle_minutes=get_settings().session_idle_minutes)
    S["auth_token"], S["auth_via"] = token, via
    S.pop("cookie_clear", None)


def cookie_sign_in() -> UserInfo | None:
    """Resume a local sign-in from the browser's cookie (a reload, a typed URL, a new tab).

    Tried once per browser session: st.context.cookies are those of the page's first request.
    Anything but a valid token gives the sign-in page (and the cookie is deleted), never an
    error; the token itself is never logged or shown.
    """
    if S.get("cookie_tried"):
        return None
    S["cookie_tried"] = True
    value = session_cookie.browser_token()
    if value is None:
        return None
    settings = get_settings()
    live = resume_session(engine(), value, idle_minutes=settings.session_idle_minutes,
                          roles=settings.local_login_role_set)  # fmt: skip
    if live is None:
        S["cookie_clear"] = None  # a stale cookie: deleted; unsaved answers stay
        return None
    S["auth_token"], S["auth_via"] = live.token, "local"
    S["auth_seen"] = live.last_seen.isoformat(timespec="seconds")
    return live.user


def provider_claims() -> dict[str, Any] | None:
    """st.user's claims when SSO is on and the person is signed in at the provider."""
    if not get_settings().sso_enabled:
        return None
    claims = st.user.to_dict()
    return dict(claims) if claims.get("is_logged_in") is True else None


def sso_problems() -> list[str]:
    """What keeps the configured provider from working (empty when nothing)."""
    try:
        auth = st.secrets.get("auth")
    except Exception:  # no secrets.toml at all
        auth = None
    return sso.check_auth_config(auth, get_settings().sso_provider)


def sso_sign_in() -> UserInfo | None:
    """Open a login session for the provider's identity, or remember why it was refused."""
    claims = provider_claims()
    if claims is None:
        return None
    settings = get_settings()
    try:
        user, token = sso.start_session(
            engine(), claims, idle_minutes=settings.session_idle_minutes,
            provider=settings.sso_provider,
            assume_email_verified=settings.sso_assume_email_verified,
        )  # fmt: skip
    except sso.SSORefused as exc:
        st.session_state["sso_refusal"] = (error_text(exc), isinstance(exc, sso.SSOStale))
        return None
    st.session_state.pop("sso_refusal", None)
    begin(token, "sso")
    return user


def sso_block() -> None:
    """The 'Sign in with <provider>' button, and why the last attempt was refused."""
    settings = get_settings()
    label = settings.sso_button_label
    refusal = st.session_state.get("sso_refusal") if provider_claims() else None
    if refusal:
        message, stale = refusal
        (st.info if stale else st.error)(message)
    problems = sso_problems()
    if problems:
        st.error(f"Sign-in with {label} is not available: " + "; ".join(problems) + ".")
    elif st.button(f"Sign in with {label}", key="sso_login", type="primary"):
        st.login(settings.sso_provider)
    if refusal and not refusal[1]:
        if st.button(f"Sign out of {label} (use another account)", key="sso_logout"):
            st.session_state.pop("sso_refusal", None)
            st.logout()


# Puts the cursor in the Name field when the sign-in form appears, unless something else
# already has focus: Streamlit's text_input has no autofocus, and without it the field is four
# Tabs away. A constant script (no data of anyone's in it), run in the page by st.html.
FOCUS_NAME = """<script>
(() => {
  let tries = 0;
  const focus = () => {
    const field = document.querySelector('input[aria-label="Name"]');
    if (!field || !field.offsetParent) { if (++tries < 40) setTimeout(focus, 50); return; }
    const now = document.activeElement;
    if (!now || now === document.body) field.focus();
  };
  focus();
})();
</script>"""


def local_form() -> None:
    """The name and password form of local accounts."""
    with st.form("login"):
        name = st.text_input("Name", key="login_name", autocomplete="username")
        password = st.text_input(
            "Password", type="password", key="login_password", autocomplete="current-password"
        )
        submitted = st.form_submit_button("Sign in", type="primary")
    st.html(FOCUS_NAME, unsafe_allow_javascript=True)
    if submitted:
        try:
            user = authenticate(engine(), name, password)
        except AuthError as exc:
            show_error(exc)
            return
        settings = get_settings()
        if not sso.local_login_allowed(user.role, settings.local_login_role_set):
            via = f"Sign in with {settings.sso_button_label}" if settings.sso_enabled else "SSO"
            st.error(f"Local sign-in is not allowed for {user.role} accounts; use {via}.")
            return
        begin(create_session(engine(), user.id), "local")
        st.rerun()


def login_page() -> None:
    """Single sign-on (when configured) and the local login form."""
    st.markdown("**Human validation** · machine-classified works, labelled by people")
    st.title("Sign in")
    settings = get_settings()
    if not settings.sso_enabled:
        local_form()
    else:
        sso_and_local(settings)
    if "cookie_clear" in S:  # signed out, or a stale cookie
        session_cookie.forget(S["cookie_clear"])


def sso_and_local(settings: Settings) -> None:
    """The provider's button, then the local form (folded unless every role may use it)."""
    sso_block()
    everyone = set(sso.ROLES) <= settings.local_login_role_set
    if everyone:
        st.caption("or with a local account:")
        local_form()
    else:
        with st.expander("Local account (" + ", ".join(sorted(settings.local_login_role_set))
                         + " only)"):  # fmt: skip
            local_form()


def logout(user_id: int) -> None:
    """End the login in the database, this browser session, the cookie and at the provider."""
    end_session(engine(), st.session_state.pop("auth_token", None))
    via = st.session_state.pop("auth_via", None)
    st.session_state.pop("sso_refusal", None)
    S["cookie_clear"] = user_id  # the login page deletes the cookie and the user's drafts
    # Also when a local account signs out while a provider identity is present: otherwise
    # the next run would sign that identity straight back in.
    if via == "sso" or provider_claims() is not None:
        st.logout()


through_app()  # the server's first run can come here under Streamlit's pages/ folder mode
user = current_user()
if user is None:
    user = cookie_sign_in()
if user is None and get_settings().sso_enabled:
    user = sso_sign_in()
if user is None:
    # The sign-in form answers at "/" and at each page's address, so that a bookmark or a
    # typed URL (/adjudicate) signs in and then opens that page when the role may.
    nav = st.navigation(
        [hidden(ROOT, login_page, default=True)]
        + [hidden(path, login_page) for path in ("login", *PAGES)],
        position="hidden",
    )
else:
    names = [n for n in access.pages_for(user.role) if (HERE / "pages" / f"{n}.py").exists()]
    main = MAIN_PAGE.get(user.role, "home")
    landing = page(main if main in names else "home")
    shown = [landing if name == landing.url_path else page(name) for name in names]
    # Every other known address stays a page too (hidden): "/", "/login", and the pages the
    # role may not open, which lead to the role's main page, saying why.
    others = [hidden(path) for path in ("login", *PAGES) if path not in names]
    nav = st.navigation([hidden(ROOT, default=True), *shown, *others])
    if nav.url_path in PAGES and nav.url_path not in names:
        S["not_open"] = PAGES[nav.url_path][0]
    if nav.url_path not in names:
        st.switch_page(landing)
    if "not_open" in S:
        st.toast(f"{S.pop('not_open')} is not open to the {user.role} role.")
    with st.sidebar:
        via = st.session_state.get("auth_via")
        how = f" via {get_settings().sso_button_label}" if via == "sso" else ""
        st.caption(f"Signed in as **{esc(user.name)}** ({user.role}){esc(how)}")
        st.button("Sign out", key="logout", on_click=logout, args=(user.id,))
        if via == "local":  # last: the component draws nothing but takes a row's gap
            session_cookie.keep(
                S["auth_token"],
                stamp=str(S.get("auth_seen")),
                max_age=get_settings().session_idle_minutes * 60,
            )
checked(user)
nav.run()
