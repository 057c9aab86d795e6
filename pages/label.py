"""Label: the work card and the label form, one client-side component; keys never rerun."""

from __future__ import annotations

import streamlit as st

from labeling.abstracts.cache import Prefetcher
from labeling.review.label_screen import Screen, apply_action
from pages._guard import engine, require, schema, settings
from ui.components import label_form

user = require("label")
S = st.session_state


@st.cache_resource(show_spinner=False)
def _prefetcher(url: str) -> Prefetcher:
    """One background abstract prefetcher per process and database."""
    return Prefetcher(engine(), settings=settings())


def _on_action() -> None:
    """The trigger's rerun; the action itself is read and applied below, after the role check."""


screen = S.get("lbl_screen")
if not isinstance(screen, Screen) or screen.user_id != user.id:
    screen = S["lbl_screen"] = Screen(user_id=user.id)
apply_action(
    engine(),
    screen,
    label_form.action(S),
    schema=schema(),
    settings=settings(),
    prefetcher=_prefetcher(engine().url.render_as_string()),
)
data = label_form.form_data(screen)
screen.message = None  # said once
label_form.mount(data, on_action=_on_action)
