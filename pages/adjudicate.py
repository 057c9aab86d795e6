"""Adjudicate (leads): disputed works by keyboard in one component; reopen and gold below."""

from __future__ import annotations

import streamlit as st

from labeling.review import disputes
from labeling.review.adjudication import DisputeScreen, apply_dispute_action
from labeling.review.validation import ValidationError, reopen
from labeling.vocabulary import STATUS_VALIDATED
from pages._errors import error_flash
from pages._guard import engine, require, schema, settings
from pages._ui import escape_markdown as esc
from ui.components import adjudicate_form

user = require("adjudicate")
S = st.session_state


def _flash(kind: str, message: str) -> None:
    """Keep a message to show at the top of the next run."""
    S["adj_flash"] = (kind, message)


def _on_action() -> None:
    """The trigger's rerun; the action itself is read and applied below, after the role check."""


def _reopen() -> None:
    """Reopen callback: take a validated work back to review, with a reason."""
    wid = (S.get("reopen_id") or "").strip().upper()
    reason = (S.get("reopen_reason") or "").strip()
    if not wid or not reason:
        _flash("error", "Give the work id and a reason to reopen it.")
        return
    status = disputes.work_status(engine(), wid)
    if status != STATUS_VALIDATED:
        _flash(
            "error",
            f"{wid} is {status or 'not a known work'}: only validated works can be reopened.",
        )
        return
    try:
        verdict = reopen(engine(), wid, user.id, reason, schema=schema())
    except ValidationError as exc:
        _flash(*error_flash(exc))
        return
    _flash("success", f"{wid} reopened: now {verdict.status}.")


def _gold(mark: bool) -> None:
    """Gold callback: mark (or unmark) the typed work ids, all or none."""
    ids = disputes.parse_work_ids(S.get("gold_ids") or "")
    try:
        fn = disputes.mark_gold if mark else disputes.unmark_gold
        n = fn(engine(), ids, user.id)
    except ValidationError as exc:
        _flash(*error_flash(exc))
        return
    _flash("success", f"{n} work(s) {'marked as' if mark else 'no longer'} gold.")


# ------------------------------------------------------------------ the page
st.title("Adjudicate")
screen = S.get("adj_screen")
if not isinstance(screen, DisputeScreen) or screen.user_id != user.id:
    screen = S["adj_screen"] = DisputeScreen(user_id=user.id)
apply_dispute_action(
    engine(), screen, adjudicate_form.action(S), schema=schema(), settings=settings()
)
data = adjudicate_form.form_data(screen, schema())
screen.message = None  # said once
adjudicate_form.mount(data, on_action=_on_action)
if S.get("adj_flash"):
    kind, message = S.pop("adj_flash")
    getattr(st, kind)(esc(message))
chosen = screen.campaign or None

st.divider()
st.markdown("#### Validated works")
col_reopen, col_gold = st.columns(2, gap="large")
with col_reopen, st.container(border=True):
    st.markdown("**Reopen** a validated work (its labels and history are kept)")
    st.text_input("Work id", key="reopen_id")
    st.text_input("Reason", key="reopen_reason")
    st.button("Reopen", key="reopen", on_click=_reopen, icon=":material/undo:")
with col_gold, st.container(border=True):
    st.markdown("**Gold checks**: validated works mixed into annotators' queues")
    st.text_area("Work ids (commas, spaces or lines between them)", key="gold_ids", height=80)
    with st.container(horizontal=True, gap="small"):
        st.button(
            "Mark as gold", key="mark_gold", on_click=_gold, args=(True,), icon=":material/star:"
        )
        st.button("Unmark gold", key="unmark_gold", on_click=_gold, args=(False,))
recent = disputes.validated_works(engine(), chosen)
st.caption(f"{len(recent)} most recently validated works shown")
st.dataframe(recent, hide_index=True)
