"""Label: the work card and a keyboard-first label form for one annotator at a time."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from labeling import session as flow
from labeling.abstracts import Prefetcher
from labeling.card import PREDICTION_NOTICE, SCORES_RANK, fmt_score, score_table_markdown
from labeling.card import escape_markdown as esc
from pages._guard import engine, require, schema

user = require("label")
S = st.session_state
K = flow.ACTION_KEYS
CSS = """<style>
.st-key-work_title [data-testid="stText"] {font-size: 1.55rem; font-weight: 600;
  line-height: 1.3; font-family: inherit;}
.st-key-abstract_box [data-testid="stText"] {font-family: inherit; line-height: 1.55;}
.st-key-qactive {border-left: 4px solid #ff4b4b;}
div[class*="st-key-opt_"] button {min-height: 2rem; padding: .1rem .65rem;}
div[class*="st-key-goto_"] button {min-height: 1.6rem; padding: 0; text-align: left;
  font-weight: 600;}
</style>"""


@st.cache_resource(show_spinner=False)
def _prefetcher(url: str) -> Prefetcher:
    """One background abstract prefetcher per process and database."""
    return Prefetcher(engine())


def _shown() -> tuple[flow.ItemView | None, flow.Draft | None]:
    """The item on screen: a previous label being edited, else the queue's item."""
    if S.get("lbl_edit"):
        return S["lbl_edit"]
    return S.get("lbl_item"), S.get("lbl_draft")


def _flash(kind: str, message: str) -> None:
    if message:
        S["lbl_flash"] = (kind, message)


# ------------------------------------------------------------------ callbacks (run before the body)
def _switch() -> None:
    flow.release(engine(), S.get("lbl_item"))
    for key in ("lbl_item", "lbl_draft", "lbl_edit", "lbl_feedback"):
        S.pop(key, None)


def _on_draft(change: Callable[[flow.ItemView, flow.Draft], None]) -> Callable[[], None]:
    """A callback that changes the shown draft (a late click on a gone item does nothing)."""
    def callback() -> None:
        item, draft = _shown()
        if item is not None and draft is not None:
            change(item, draft)
    return callback


def _choose(index: int, label: str) -> None:
    _on_draft(lambda item, draft: draft.choose(item.questions, index, label))()


def _goto(index: int) -> None:
    _on_draft(lambda item, draft: setattr(draft, "active", index))()


def _move(step: int) -> None:
    _on_draft(lambda item, draft: draft.move(item.questions, step))()


def _confidence(value: int) -> None:
    _on_draft(lambda item, draft: setattr(
        draft, "confidence", None if draft.confidence == value else value))()


def _flag() -> None:
    _on_draft(lambda item, draft: setattr(draft, "flagged", not draft.flagged))()


def _toggle_codebook() -> None:
    S["lbl_codebook"] = not S.get("lbl_codebook", False)


def _submit(skip_reason: str | None = None) -> None:
    item, draft = _shown()
    if item is None or draft is None:
        return
    draft.note = S.get(f"note_{item.token}", draft.note) or ""
    out = flow.save(engine(), item, draft, user_id=user.id, schema=schema(),
                    skip_reason=skip_reason)
    if not out.advance:
        _flash("error", out.message)
        return
    fresh = out.saved and out.result is not None and out.result.created
    _flash("success" if fresh else "warning", out.message)
    if item.blind and item.editing is None and out.saved:
        S["lbl_feedback"] = (item, dict(draft.answers), skip_reason)
    if item.editing is not None:
        S["lbl_edit"] = None
    else:
        S["lbl_item"] = None


def _back() -> None:
    current = S.get("lbl_edit")
    back = (current[0].back if current else 0) + 1
    found = flow.previous_item(engine(), S["lbl_campaign"], user.id, schema(), back)
    if found is None:
        _flash("info", "No earlier label of yours in this campaign.")
    else:
        S["lbl_edit"] = found


def _resume() -> None:
    S["lbl_edit"] = None


def _retry_abstract() -> None:
    if S.get("lbl_edit"):
        item, draft = S["lbl_edit"]
        S["lbl_edit"] = (flow.refresh_abstract(engine(), item), draft)
    elif S.get("lbl_item"):
        S["lbl_item"] = flow.refresh_abstract(engine(), S["lbl_item"])


# ------------------------------------------------------------------ rendering
# Few elements on purpose: every element is one message the browser renders after a submit.
def render_card(item: flow.ItemView) -> None:
    """Bibliographic card and abstract; record text is plain text or escaped Markdown."""
    card = item.card
    with st.container(key="work_title"):
        st.text(card.title)
    facts = [str(card.year) if card.year else None, card.type, card.venue, card.lang,
             card.field, card.topic, f"cited by {card.cited_by}" if card.cited_by else None]
    lines = [":gray[" + " · ".join(esc(f) for f in facts if f) + "]"]
    links = [f"[OpenAlex {esc(card.work_id)}]({card.openalex_url})"] if card.openalex_url else []
    if card.doi_url:
        links.append(f"[DOI {esc(card.doi)}]({card.doi_url})")
    lines.append(" · ".join(links) + ("" if card.is_retracted else
                                      f" · :gray[{esc(card.retraction_state)}]"))
    if card.routes:
        lines.append("Routes: " + " ".join(
            f":{'green' if on else 'gray'}-badge[{'✓' if on else '✗'} {esc(name)}]"
            for name, on in card.routes))
    for what, values in (("Institutions", card.institutions), ("Funders", card.funders),
                         ("Keywords", card.keywords)):
        if values:
            lines.append(f"**{what}:** " + " · ".join(esc(v) for v in values))
    st.markdown("  \n".join(lines))
    if card.is_retracted:
        st.error(esc(card.retraction_state), icon=":material/block:")
    with st.container(key="abstract_box"):
        abstract = item.abstract
        if abstract is not None and abstract.state == "ok":
            st.markdown(f"**Abstract** · :gray[{esc(card.work_id)}, fetched from OpenAlex and "
                        "de-inverted; abstracts are not stored in the frame]")
            st.text(abstract.text)
            return
        state = abstract.state if abstract else "pending"
        unknown = "" if card.has_abstract is not None else " The record does not say if it has one."
        st.markdown(f"**Abstract** · :gray[{esc(card.work_id)}]")
        st.warning(esc((abstract.message if abstract else "No abstract state.") + unknown),
                   icon=":material/cloud_off:" if state != "absent" else ":material/notes:")
        if state in ("error", "offline", "pending"):
            st.button("Try the abstract again", key="retry_abs", shortcut=K["abstract"],
                      on_click=_retry_abstract)


AGREEMENT = {"agree": ":green[✔ teachers agree]", "disagree": ":orange[⚠ teachers disagree]"}


def render_scores(item: flow.ItemView, heading: str = "Machine view") -> None:
    """Teacher scores per question, machine scores and their provisional status."""
    card, ms = item.card, item.card.machine
    head = [f"#### {heading}", f":gray[{esc(card.prediction_status or 'status unknown')} · "
            f"model {esc(card.model_version or '?')} · {esc(PREDICTION_NOTICE)}]"]
    if ms is not None:
        head.append(
            f"**Machine scores** ({esc(', '.join(ms.flags) or 'no flags')}): score\\_opus "
            f"**{fmt_score(ms.score_opus)}** · score\\_gpt **{fmt_score(ms.score_gpt)}** · "
            f"spread {fmt_score(ms.score_spread)} · teacher disagreement "
            f"{fmt_score(card.teacher_disagreement)} · threshold uncertainty "
            f"{fmt_score(card.threshold_uncertainty)}  \n:gray[{esc(SCORES_RANK)}"
            + (f" {esc(ms.note)}" if ms.note else "") + "]  \nValidation status, verbatim:")
    st.markdown("\n\n".join(head))
    if ms is not None:
        st.code(ms.validation_status or "(none)", language=None)
    for qs in card.questions:
        notes = "".join(f"  \n:orange[Inconsistent record: {esc(n)}]" for n in qs.notes)
        st.markdown(
            f"**{esc(qs.name)}** {AGREEMENT.get(qs.agreement, ':gray[? agreement unknown]')}"
            f"{notes}\n\n{score_table_markdown(qs)}")


def render_question(item: flow.ItemView, draft: flow.Draft, qi: int, key: str | None) -> None:
    """One question; only the active one shows its option buttons (with their keys)."""
    q = item.questions[qi]
    active = qi == draft.active
    value = draft.answers.get(q.name)
    chosen = value if isinstance(value, list) else [value]
    with st.container(border=True, key="qactive" if active else f"q_{qi}"):
        st.button(f"{'▶ ' if active else ''}{esc(q.prompt or q.name)}", key=f"goto_{qi}",
                  type="tertiary", shortcut=key, on_click=_goto, args=(qi,), wrap=True,
                  help=esc(q.definition) or None)
        if active and S.get("lbl_codebook"):
            st.info(codebook_markdown([q]))
        if item.scores_visible and item.card is not None:
            qs = item.card.questions[qi]
            st.caption(f"{AGREEMENT.get(qs.agreement, ':gray[? agreement unknown]')} · "
                       f"{esc(qs.reading)}")
        if not active:
            st.markdown(":small[" + " · ".join(
                f"**:primary[✔ {esc(lab)}]**" if lab in chosen else f":gray[{esc(lab)}]"
                for lab in q.labels) + "]")
            return
        with st.container(horizontal=True, gap="small"):
            for li, lab in enumerate(q.labels):
                st.button(esc(lab), key=f"opt_{qi}_{li}", on_click=_choose, args=(qi, lab),
                          type="primary" if lab in chosen else "secondary",
                          shortcut=flow.option_key(li), help=esc(q.definition_of(lab)) or None)


def codebook_markdown(questions: list) -> str:
    """The codebook of some questions as one Markdown text (definitions escaped)."""
    parts = []
    for q in questions:
        parts.append(f"**{esc(q.name)}**: {esc(q.definition) or '_no definition_'}")
        parts += [f"- *{esc(lab)}*: {esc(q.definition_of(lab))}" for lab in q.labels
                  if q.definition_of(lab)]
    return "\n\n".join(parts)


def render_actions(item: flow.ItemView, draft: flow.Draft) -> None:
    """Confidence, flag, note, submit, skip, back, codebook: every one with its key."""
    with st.container(horizontal=True, gap="small"):
        st.button("Previous question", key="prev_q", shortcut=K["prev"], on_click=_move,
                  args=(-1,))
        st.button("Next question", key="next_q", shortcut=K["next"], on_click=_move, args=(1,))
        for value, name in flow.CONFIDENCE:
            st.button(f"Confidence {name}", key=f"conf_{value}", shortcut=K[f"conf_{value}"],
                      type="primary" if draft.confidence == value else "secondary",
                      on_click=_confidence, args=(value,))
        st.button("Flagged for lead" if draft.flagged else "Flag for lead", key="flag",
                  shortcut=K["flag"], type="primary" if draft.flagged else "secondary",
                  on_click=_flag, icon=":material/flag:")
        st.button("Definitions", key="codebook", shortcut=K["codebook"],
                  on_click=_toggle_codebook, help="Show the active question's codebook")
        with st.popover("Codebook", icon=":material/menu_book:", key="codebook_all"):
            st.markdown(codebook_markdown(list(item.questions)))
    st.text_input("Note (Tab to reach it, Enter to keep it)", value=draft.note,
                  key=f"note_{item.token}")
    label = "Save new version" if item.editing else "Submit label"
    st.button(label, key="submit", shortcut=K["submit"], type="primary", on_click=_submit,
              icon=":material/check:", width="stretch")
    with st.container(horizontal=True, gap="small"):
        for reason, text in flow.SKIP_LABELS.items():
            st.button(f"Skip: {text}", key=f"skip_{reason}", shortcut=K[f"skip_{reason}"],
                      on_click=_submit, args=(reason,))
        st.button("Edit previous label", key="back", shortcut=K["back"], on_click=_back,
                  icon=":material/undo:")
        if item.editing is not None:
            st.button("Back to the queue", key="resume", shortcut=K["resume"], on_click=_resume)


def render_feedback() -> None:
    """Blind campaigns: the last submitted work's machine view, shown after the label."""
    fb = S.get("lbl_feedback")
    if not fb:
        return
    item, answers, skip = fb
    with st.expander(f"Feedback on your last label: {esc(item.work_id)}", expanded=True):
        mine = f"skipped ({skip})" if skip else "; ".join(
            f"{k}: {', '.join(v) if isinstance(v, list) else v}" for k, v in answers.items())
        st.text(f"{item.card.title}\nYour answers: {mine}")
        render_scores(item, heading="Machine view (shown after your label)")


# ------------------------------------------------------------------ the page
st.html(CSS)
if "lbl_campaigns" not in S or S.get("lbl_item") is None:
    S["lbl_campaigns"] = flow.open_campaigns(engine())
campaigns = {c.id: c for c in S["lbl_campaigns"]}
if not campaigns:
    st.info("No campaign is open. A lead creates campaigns on the Campaigns page.")
    st.stop()
if S.get("lbl_campaign") not in campaigns:
    S["lbl_campaign"] = next(iter(campaigns))
if S.get("lbl_item") is not None and S["lbl_item"].campaign_id != S["lbl_campaign"]:
    _switch()  # the campaign was closed meanwhile
st.selectbox("Campaign", list(campaigns), key="lbl_campaign", on_change=_switch,
             format_func=lambda c: campaigns[c].name + (" (blind)" if campaigns[c].blind else ""))
if S.get("lbl_item") is None:
    S["lbl_item"] = flow.next_item(engine(), S["lbl_campaign"], user.id, schema(),
                                   prefetcher=_prefetcher(engine().url.render_as_string()))
    S["lbl_draft"] = flow.Draft.fresh(S["lbl_item"].questions)
else:
    S["lbl_item"] = flow.keep_lease(engine(), S["lbl_item"], user.id)
item, draft = _shown()
p = item.progress
st.progress(p.fraction, text=(
    f"Campaign {esc(item.campaign_name)}: {p.done} of {p.items} works done, {p.remaining} to go"
    f" · You: {p.mine_labelled} labelled, {p.mine_skipped} skipped"))
if S.get("lbl_flash"):
    kind, message = S.pop("lbl_flash")
    if kind == "success":
        st.toast(esc(message), icon=":material/check_circle:")
    else:
        getattr(st, kind)(esc(message))
if item.editing is not None:
    st.warning(f"Editing your label on {esc(item.work_id)} (version {item.editing.version}); "
               "saving writes a new version. N returns to the queue.", icon=":material/edit:")
if item.work_id is None and item.notice:
    st.warning(esc(item.notice))
    st.button("Try again", key="again", on_click=_switch)
    st.stop()
if item.work_id is None:
    st.success("Nothing left for you in this campaign: every work has its labels or you have "
               "seen it. Thank you!")
    st.button("Check again", key="again", on_click=_switch)
    st.button("Edit previous label", key="back", shortcut=K["back"], on_click=_back)
    render_feedback()
    st.stop()
keys = flow.question_keys(item.questions)
st.caption(
    "Keys: " + " ".join(k for k in keys if k) + " or ↑/↓ pick a question · 1–9, 0 "
    "(Shift+1… from the 11th) choose · L/M/H confidence · F flag · Enter submit · Alt+1–4 skip"
    " · B edit previous · D definitions")
left, right = st.columns([3, 2], gap="large")
with left:
    render_card(item)
    if item.scores_visible:
        render_scores(item)
    else:
        st.info("Blind campaign: machine scores stay hidden until you submit your label.",
                icon=":material/visibility_off:")
    render_feedback()
with right:
    for qi in range(len(item.questions)):
        render_question(item, draft, qi, keys[qi])
    render_actions(item, draft)
