"""Adjudicate (leads): disputed works side by side, a final answer with a reason, reopen, gold."""

from __future__ import annotations

import streamlit as st

from db.models import STATUS_VALIDATED
from labeling import disputes
from labeling.campaigns import list_campaigns
from labeling.card import build_card, score_table_markdown
from labeling.card import escape_markdown as esc
from labeling.disputes import DisputeView
from labeling.schema import Question
from labeling.validation import AnswerError, ValidationError, adjudicate, campaign_questions, reopen
from pages._guard import engine, require, schema

user = require("adjudicate")
S = st.session_state
ALL = 0  # the campaign picker's "every campaign"


def _flash(kind: str, message: str) -> None:
    """Keep a message to show at the top of the next run."""
    S["adj_flash"] = (kind, message)


def _move(step: int, total: int) -> None:
    """Go to the next (step 1) or previous (step -1) disputed work, wrapping around."""
    S["adj_index"] = (S.get("adj_index", 0) + step) % max(total, 1)


def _questions(view: DisputeView) -> list[Question]:
    """The questions of the work's campaign (all of the schema's when unknown)."""
    camp = campaigns.get(view.campaign_id) if view.campaign_id else None
    return campaign_questions(camp, schema()) if camp else list(schema().questions)


def _widget(q: Question, key: str, prefill: object) -> None:
    """The input of one question, prefilled with the majority answer."""
    label = f"{q.name}: {q.prompt}" if q.prompt else q.name
    if q.kind == "multi":
        st.pills(label, list(q.labels), selection_mode="multi", key=key,
                 default=list(prefill or []))
    elif q.kind == "binary":
        st.segmented_control(label, ["yes", "no"], key=key, default=prefill)
    else:
        st.radio(label, list(q.labels), key=key, horizontal=True,
                 index=list(q.labels).index(prefill) if prefill in q.labels else None)


def _resolve(view: DisputeView, questions: list[Question]) -> None:
    """Form callback: one call to adjudicate with the form's answers and reason."""
    reason = (S.get(f"adj_reason_{view.work_id}") or "").strip()
    if not reason:
        _flash("error", "A reason is required to adjudicate.")
        return
    answers = {}
    for q in questions:
        value = S.get(f"adj_{view.work_id}_{q.name}")
        answers[q.name] = list(value or []) if q.kind == "multi" else value
    missing = disputes.unanswered(answers, questions)
    if missing:
        _flash("error", f"Answer every question before adjudicating: {', '.join(missing)}.")
        return
    try:
        adjudicate(engine(), view.work_id, answers, reason, user.id, view.campaign_id,
                   schema=schema())
    except (AnswerError, ValidationError) as exc:
        _flash("error", str(exc))
        return
    _flash("success", f"{view.work_id} validated by adjudication.")


def _reopen() -> None:
    """Reopen callback: take a validated work back to review, with a reason."""
    wid = (S.get("reopen_id") or "").strip().upper()
    reason = (S.get("reopen_reason") or "").strip()
    if not wid or not reason:
        _flash("error", "Give the work id and a reason to reopen it.")
        return
    status = disputes.work_status(engine(), wid)
    if status != STATUS_VALIDATED:
        _flash("error", f"{wid} is {status or 'not a known work'}: only validated works can be "
               "reopened.")
        return
    try:
        verdict = reopen(engine(), wid, user.id, reason, schema=schema())
    except ValidationError as exc:
        _flash("error", str(exc))
        return
    _flash("success", f"{wid} reopened: now {verdict.status}.")


def _gold(mark: bool) -> None:
    """Gold callback: mark (or unmark) the typed work ids, all or none."""
    ids = disputes.parse_work_ids(S.get("gold_ids") or "")
    try:
        fn = disputes.mark_gold if mark else disputes.unmark_gold
        n = fn(engine(), ids, user.id)
    except ValidationError as exc:
        _flash("error", str(exc))
        return
    _flash("success", f"{n} work(s) {'marked as' if mark else 'no longer'} gold.")


def render_dispute(view: DisputeView, index: int, total: int) -> None:
    """One disputed work: title, answers side by side, teachers' scores, the final answer form."""
    questions = _questions(view)
    st.markdown(f"**Disputed work {index + 1} of {total}** · {esc(view.work_id)} · "
                f"{view.n_labels} labels" + (f" · skipped by {esc(', '.join(view.skipped))}"
                                             if view.skipped else ""))
    with st.container(key="adj_title"):
        st.text(view.title)
    with st.container(horizontal=True, gap="small"):
        st.button("Previous", key="adj_prev", shortcut="K", on_click=_move, args=(-1, total),
                  icon=":material/arrow_back:")
        st.button("Next", key="adj_next", shortcut="J", on_click=_move, args=(1, total),
                  icon=":material/arrow_forward:")
    left, right = st.columns([3, 2], gap="large")
    with left:
        st.markdown("#### Answers side by side")
        st.dataframe(disputes.dispute_table(view, questions), hide_index=True)
        st.markdown("#### Teachers' scores")
        card = build_card(view.record, schema(), questions)
        for qs in card.questions:
            with st.expander(f"{qs.name} · {qs.summary}"):
                st.markdown(score_table_markdown(qs))
    with right:
        prefill = disputes.majority_answers(view.answers.values(), questions)
        with st.form(f"adj_form_{view.work_id}", border=True):
            st.markdown("#### Final answer")
            st.caption("Prefilled with the majority answer where there is one.")
            for q in questions:
                _widget(q, f"adj_{view.work_id}_{q.name}", prefill.get(q.name))
            st.text_input("Reason (required)", key=f"adj_reason_{view.work_id}")
            st.form_submit_button("Adjudicate", key="adj_submit", type="primary",
                                  shortcut="Enter", on_click=_resolve, args=(view, questions),
                                  icon=":material/gavel:")


# ------------------------------------------------------------------ the page
st.html("""<style>.st-key-adj_title [data-testid="stText"] {font-size: 1.45rem;
  font-weight: 600; line-height: 1.3; font-family: inherit;}</style>""")
st.title("Adjudicate")
campaigns = {c.id: c for c in list_campaigns(engine())}
options = [ALL, *campaigns]
if S.get("adj_campaign") not in options:
    S["adj_campaign"] = ALL
st.selectbox("Campaign", options, key="adj_campaign",
             format_func=lambda c: "Every campaign" if c == ALL else campaigns[c].name)
if S.get("adj_flash"):
    kind, message = S.pop("adj_flash")
    getattr(st, kind)(esc(message))
chosen = S["adj_campaign"] or None
queue = disputes.disputed_works(engine(), chosen)
if not queue:
    st.success("No disputed work to adjudicate here.")
else:
    S["adj_index"] = min(S.get("adj_index", 0), len(queue) - 1)
    st.caption(f"{len(queue)} disputed works · J next · K previous · Enter adjudicates")
    render_dispute(queue[S["adj_index"]], S["adj_index"], len(queue))

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
        st.button("Mark as gold", key="mark_gold", on_click=_gold, args=(True,),
                  icon=":material/star:")
        st.button("Unmark gold", key="unmark_gold", on_click=_gold, args=(False,))
recent = disputes.validated_works(engine(), chosen)
st.caption(f"{len(recent)} most recently validated works shown")
st.dataframe(recent, hide_index=True)
