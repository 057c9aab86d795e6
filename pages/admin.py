"""Admin: users (add, change role, deactivate), single sign-on mappings, frame import."""

from __future__ import annotations

import streamlit as st

from labeling.auth import access, sso, sso_mappings
from labeling.auth.users import UserError, add_user, list_users, set_active, set_role
from labeling.frames.upload import import_uploaded_frame, next_step, outcomes
from labeling.settings import get_settings
from pages._errors import error_flash, show_error
from pages._guard import current_user, engine, require, schema
from pages._ui import escape_markdown as esc

user = require("admin")
ROLES = ["annotator", "lead", "exporter", "admin"]

st.title("Admin")
users_tab, sso_tab, import_tab = st.tabs(["Users", "Single sign-on", "Import a frame"])

with users_tab:
    with st.form("add_user", clear_on_submit=True):
        st.subheader("Add a user")
        name = st.text_input("Name", key="new_name")
        role = st.selectbox("Role", ROLES, key="new_role")
        password = st.text_input("Password", type="password", key="new_password")
        if st.form_submit_button("Add user"):
            try:
                made = add_user(engine(), name, role, password or None)
                st.success(esc(f"Added {made.name} ({made.role})"))
            except UserError as exc:
                show_error(exc, escape=esc)
    # Listed after the form so a user added in this run is already there.
    people = list_users(engine())
    st.dataframe(
        [{"name": u.name, "role": u.role, "active": u.active} for u in people],
        hide_index=True, width="stretch",
    )  # fmt: skip
    st.subheader("Change a user")
    names = [u.name for u in people]
    if names:
        who = st.selectbox("User", names, key="edit_user")
        c1, c2 = st.columns(2)
        new_role = c1.selectbox("New role", ROLES, key="edit_role")
        if c1.button("Change role", key="change_role"):
            try:
                set_role(engine(), who, new_role)
                st.success(esc(f"{who} is now {new_role}"))
            except UserError as exc:
                show_error(exc, escape=esc)
        active = next(u.active for u in people if u.name == who)
        label = "Deactivate (labels are kept)" if active else "Reactivate"
        if c2.button(label, key="toggle_active"):
            try:
                set_active(engine(), who, not active)
                st.success(esc(f"{who} {'deactivated' if active else 'reactivated'}"))
            except UserError as exc:
                show_error(exc, escape=esc)


def remove_mapping(mapping_id: int, label: str) -> None:
    """Remove a mapping before the tab renders, so the list shown is already without it."""
    who = current_user()  # a callback runs before the page's own check: check again
    if who is None or not access.can_open(who.role, "admin"):
        return
    try:
        sso_mappings.unmap(engine(), mapping_id)
        st.session_state["sso_flash"] = ("success", f"Removed {label}")
    except sso.SSOError as exc:
        st.session_state["sso_flash"] = error_flash(exc)


with sso_tab:
    flash = st.session_state.pop("sso_flash", None)
    if flash:
        (st.success if flash[0] == "success" else st.error)(esc(flash[1]))
    settings = get_settings()
    if settings.sso_enabled:
        st.caption(
            f"Single sign-on is on: provider `{settings.sso_provider}`; local passwords "
            f"for: {', '.join(sorted(settings.local_login_role_set)) or 'nobody'}."
        )
    else:
        st.caption(
            "Single sign-on is off (set LABELING_SSO_PROVIDER, see docs/sso.md). "
            "Mappings can be prepared now."
        )
    st.write(
        "An identity signs in as the user of the first rule that matches: its issuer and "
        "subject, then its verified e-mail, then a domain rule (which creates the user on "
        "first sign-in). Unmatched identities are refused."
    )
    user_names = [u.name for u in list_users(engine())]
    kind = st.radio(
        "Add", ["E-mail", "Issuer and subject", "Domain rule"], horizontal=True, key="sso_kind"
    )
    with st.form("sso_add", clear_on_submit=True):
        if kind == "E-mail":
            email = st.text_input("Verified e-mail address", key="sso_email")
        elif kind == "Issuer and subject":
            issuer = st.text_input(
                "Issuer (iss claim)", key="sso_issuer", placeholder="https://accounts.google.com"
            )
            subject = st.text_input("Subject (sub claim)", key="sso_subject")
        else:
            domain = st.text_input("Domain", key="sso_domain", placeholder="example.org")
            domain_role = st.selectbox(
                "Role of new users", list(sso.DOMAIN_ROLES), key="sso_domain_role"
            )
        if kind != "Domain rule":
            target = st.selectbox(
                "Signs in as user",
                user_names,
                key="sso_user",
                help="Add an account without a password on the Users tab "
                "for a person who only signs in with SSO.",
            )
        if st.form_submit_button("Add mapping"):
            try:
                if kind == "E-mail":
                    made = sso_mappings.map_email(
                        engine(), email, target or "", created_by=user.name
                    )
                elif kind == "Issuer and subject":
                    made = sso_mappings.map_subject(
                        engine(), issuer, subject, target or "", created_by=user.name
                    )
                else:
                    made = sso_mappings.map_domain(
                        engine(), domain, domain_role, created_by=user.name
                    )
                st.success(
                    esc(
                        f"Added [{made.id}] {made.kind} {made.value} -> "
                        f"{made.user or 'new users'} ({made.role})"
                    )
                )
            except sso.SSOError as exc:
                show_error(exc, escape=esc)
    mappings = sso_mappings.list_mappings(engine())
    if mappings:
        st.dataframe(
            [
                {
                    "id": m.id,
                    "kind": m.kind,
                    "issuer": m.issuer,
                    "value": m.value,
                    "user": m.user or "(created on first sign-in)",
                    "role": m.role,
                    "active": m.active,
                    "last used": m.last_used_at,
                    "by": m.created_by,
                }
                for m in mappings
            ],
            hide_index=True,
            width="stretch",
        )
        labels = {m.id: f"[{m.id}] {m.kind} {m.value} -> {m.user or m.role}" for m in mappings}
        gone = st.selectbox("Mapping", list(labels), format_func=labels.get, key="sso_remove_id")
        st.button(
            "Remove mapping (the user and their labels stay)",
            key="sso_remove",
            on_click=remove_mapping,
            args=(gone, labels[gone]),
        )
    else:
        st.info("No single sign-on mappings yet.")

with import_tab:
    st.write("Import a frame (JSON Lines, plain or .gz). Large frames: use "
             "`labeling import-frame PATH` on the server instead.")  # fmt: skip
    upload = st.file_uploader("Frame file", type=["jsonl", "gz", "json"], key="frame_upload")
    strict = st.checkbox("Strict: abort on the first bad line, write nothing", key="strict")
    if upload is not None and st.button("Import", key="do_import", type="primary"):
        result = import_uploaded_frame(engine(), schema(), upload.name, upload.getvalue(),
                                       strict=strict,
                                       batch_size=get_settings().import_batch_size)  # fmt: skip
        st.caption(esc(result.headline))
        # Each outcome in its colour: stored green, rejected lines a warning with their list.
        for part in outcomes(result):
            getattr(st, part.level)(esc(part.text))
            if part.rows:
                st.dataframe(part.rows, hide_index=True, width="stretch")
        step = next_step(result)
        if step:
            st.markdown(esc(step))
            st.page_link("pages/campaigns.py", label="Create a campaign", icon=":material/list:")
