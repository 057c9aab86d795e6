"""Admin: users (add, change role, deactivate) and frame import."""

from __future__ import annotations

import streamlit as st

from labeling.admin import import_uploaded_frame
from labeling.users import UserError, add_user, list_users, set_active, set_role
from pages._guard import engine, require, schema

user = require("admin")
ROLES = ["annotator", "lead", "exporter", "admin"]

st.title("Admin")
users_tab, import_tab = st.tabs(["Users", "Import a frame"])

with users_tab:
    with st.form("add_user", clear_on_submit=True):
        st.subheader("Add a user")
        name = st.text_input("Name", key="new_name")
        role = st.selectbox("Role", ROLES, key="new_role")
        password = st.text_input("Password", type="password", key="new_password")
        if st.form_submit_button("Add user"):
            try:
                made = add_user(engine(), name, role, password or None)
                st.success(f"Added {made.name} ({made.role})")
            except UserError as exc:
                st.error(str(exc))
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
                st.success(f"{who} is now {new_role}")
            except UserError as exc:
                st.error(str(exc))
        active = next(u.active for u in people if u.name == who)
        label = "Deactivate (labels are kept)" if active else "Reactivate"
        if c2.button(label, key="toggle_active"):
            try:
                set_active(engine(), who, not active)
                st.success(f"{who} {'deactivated' if active else 'reactivated'}")
            except UserError as exc:
                st.error(str(exc))

with import_tab:
    st.write("Import a frame (JSON Lines, plain or .gz). Large frames: use "
             "`labeling import-frame PATH` on the server instead.")  # fmt: skip
    upload = st.file_uploader("Frame file", type=["jsonl", "gz", "json"], key="frame_upload")
    strict = st.checkbox("Strict: abort on the first bad line, write nothing", key="strict")
    if upload is not None and st.button("Import", key="do_import", type="primary"):
        result = import_uploaded_frame(engine(), schema(), upload.name, upload.getvalue(),
                                       strict=strict)  # fmt: skip
        (st.error if result.exit_code else st.success)(result.headline)
        if result.problems:
            st.dataframe(result.problems, hide_index=True, width="stretch")
