"""Home: what the signed-in user can do here."""

from __future__ import annotations

import streamlit as st

from labeling.auth import access
from pages._guard import require

user = require("home")
st.title("Human validation")
st.write(
    "Machine-classified works become validated ground truth here: annotators label works in "
    "a queue ordered by machine scores, leads settle disputes and watch agreement, exporters "
    "produce gold sets."
)
st.write("Your pages: " + ", ".join(p for p in access.pages_for(user.role) if p != "home"))
