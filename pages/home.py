"""Home: what the signed-in user can do here, page by page (the navigation links them)."""

from __future__ import annotations

import streamlit as st

from labeling.auth import access
from pages._guard import require

# What each page is for, in the words of the README's Pages and roles table.
WHAT = {
    "label": ("Label", "label works, one after another"),
    "campaigns": ("Campaigns", "create campaigns and watch their progress"),
    "adjudicate": ("Adjudicate", "settle the works annotators disagree on"),
    "monitor": ("Monitor", "progress, agreement, annotators and the machines' quality"),
    "export": ("Export", "preview and download gold sets"),
    "admin": ("Admin", "users, single sign-on and frame upload"),
}

user = require("home")
st.title("Human validation")
st.write(
    "Machine-classified works become validated ground truth here: annotators label works in "
    "a queue ordered by machine scores, leads settle disputes and watch agreement, exporters "
    "produce gold sets."
)
mine = [WHAT[name] for name in access.pages_for(user.role) if name in WHAT]
lines = "".join(f"\n- **{title}**: {what}" for title, what in mine)
st.markdown("Your pages, in the menu on the left:\n" + lines)
