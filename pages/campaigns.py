"""Campaigns: leads create labelling campaigns and watch their progress."""

from __future__ import annotations

from typing import Any

import streamlit as st

from labeling.review.campaigns import (
    SCORE_STRATEGIES,
    STRATEGIES,
    CampaignError,
    campaign_progress,
    create_campaign,
    list_campaigns,
    set_active,
)
from labeling.review.sampling import ALLOCATIONS
from labeling.review.validation import RULES
from labeling.vocabulary import STATUSES
from pages._errors import error_flash
from pages._guard import engine, require, schema
from pages._ui import escape_markdown as esc

user = require("campaigns")
S = st.session_state
LIVE_SECONDS = 10  # the progress counts re-read the database this often
STRATEGY_HELP = {
    "score_opus": "score_opus, highest first",
    "score_gpt": "score_gpt, highest first",
    "score_max": "larger of the two heads, highest first",
    "score_spread": "spread, largest first",
    "teacher_disagreement": "teacher disagreement, largest first",
    "threshold_uncertainty": "threshold uncertainty, largest first",
    "random": "simple random sample of n (probability sample)",
    "stratified": "stratified by score_max bins (probability sample)",
    "manual": "empty queue; works are added later (label imports)",
}


def _numbers(text: str) -> list[float] | None:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    return [float(p) for p in parts] if parts else None


def _routes(text: str) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        if value.strip().lower() not in ("true", "false"):
            raise CampaignError(f"route '{part}': write name=true or name=false")
        out[name.strip()] = value.strip().lower() == "true"
    return out


def _filter(v: dict[str, Any]) -> dict[str, Any]:
    """The campaign filter from the form's widgets (create_campaign validates it)."""
    out: dict[str, Any] = {}
    if v["status"]:
        out["status"] = v["status"]
    fields = [f.strip() for f in v["field"].split(",") if f.strip()]
    if fields:
        out["field"] = fields
    if v["year_min"]:
        out["year_min"] = int(v["year_min"])
    if v["year_max"]:
        out["year_max"] = int(v["year_max"])
    if v["routes"].strip():
        out["routes"] = _routes(v["routes"])
    if v["score_col"] != "(none)":
        out[v["score_col"]] = [v["score_lo"], v["score_hi"]]
    return out


def _create(v: dict[str, Any]) -> None:
    allocation: str | int = v["allocation"]
    if allocation == "n per stratum":
        allocation = int(v["per_stratum"])
    try:
        info = create_campaign(
            engine(),
            name=v["name"].strip(),
            description=v["description"].strip() or None,
            strategy=v["strategy"],
            filter=_filter(v),
            overlap=int(v["overlap"]),
            blind=v["blind"] or v["assist_rate"] <= 0,
            assist_rate=v["assist_rate"] if 0 < v["assist_rate"] < 1 and not v["blind"] else None,
            questions=v["questions"] or None,
            lease_seconds=int(v["lease_minutes"] * 60),
            sample_size=int(v["sample_size"]) or None,
            allocation=allocation,
            bins=_numbers(v["bins"]),
            seed=int(v["seed"]),
            rule=v["rule"],
            gold_rate=float(v["gold_rate"]),
            created_by=user.id,
            schema=schema(),
        )
    except (CampaignError, ValueError) as exc:
        S["camp_msg"] = error_flash(exc, "Not created: ")
        return
    kind = "a probability sample" if info.is_probability_sample else "not a probability sample"
    S["camp_msg"] = ("success", f"Created '{info.name}' with {info.n_items} works ({kind}).")
    S["camp_pick"] = info.id  # "Progress of" switches to the new campaign


def create_form() -> None:
    """The form a lead fills to create a campaign."""
    with st.form("new_campaign", clear_on_submit=False):
        v: dict[str, Any] = {}
        a, b = st.columns(2)
        v["name"] = a.text_input("Name", max_chars=128, key="new_name")
        v["description"] = b.text_input("Description")
        a, b, c = st.columns(3)
        v["strategy"] = a.selectbox(
            "Ordering",
            STRATEGIES,
            key="new_strategy",
            format_func=lambda s: f"{s}: {STRATEGY_HELP.get(s, '')}",
        )
        v["overlap"] = b.number_input("Labels per work (overlap k)", 1, 20, 1, key="new_overlap")
        v["rule"] = c.selectbox("Validation rule", RULES)
        a, b, c = st.columns(3)
        v["blind"] = a.checkbox(
            "Blind: hide machine scores until the label is submitted", key="new_blind"
        )
        v["lease_minutes"] = b.number_input("Lease time (minutes)", 1.0, 1440.0, 15.0, 1.0)
        v["gold_rate"] = c.number_input("Gold checks (share of items)", 0.0, 1.0, 0.0, 0.01)
        v["assist_rate"] = st.number_input(
            "Scores shown before submit (share of work x annotator assignments, drawn at "
            "random with the seed; 1: always, 0: never) - below 1 measures anchoring",
            0.0, 1.0, 1.0, 0.05, key="new_assist_rate",
        )  # fmt: skip
        v["questions"] = st.multiselect(
            "Questions (empty: all)", schema().names, key="new_questions"
        )
        st.markdown("**Sample** (random and stratified; for score orders n keeps the top n)")
        a, b, c, d, e = st.columns(5)
        v["sample_size"] = a.number_input("Sample size n (0: all)", 0, 10_000_000, 0, key="new_n")
        v["allocation"] = b.selectbox("Allocation", [*ALLOCATIONS, "n per stratum"])
        v["per_stratum"] = c.number_input("n per stratum", 1, 1_000_000, 10)
        v["bins"] = d.text_input("score_max bins", "0, 0.1, 0.3, 0.5, 0.7, 0.9, 1")
        v["seed"] = e.number_input("Seed", 0, 2**31 - 1, 0, key="new_seed")
        st.markdown("**Filter over works** (empty fields: no condition)")
        a, b, c, d = st.columns(4)
        v["status"] = a.multiselect("Status", STATUSES)
        v["field"] = b.text_input("Field(s), comma-separated")
        v["year_min"] = c.number_input("Year from (0: any)", 0, 3000, 0)
        v["year_max"] = d.number_input("Year to (0: any)", 0, 3000, 0)
        a, b, c, d = st.columns(4)
        v["routes"] = a.text_input(
            "Routes", placeholder="ca_aff=true, about_ca=false", key="new_routes"
        )
        v["score_col"] = b.selectbox("Score range on", ["(none)", *SCORE_STRATEGIES])
        v["score_lo"] = c.number_input("from", 0.0, 1.0, 0.0, 0.01)
        v["score_hi"] = d.number_input("to", 0.0, 1.0, 1.0, 0.01)
        if st.form_submit_button("Create campaign", type="primary", key="create_campaign"):
            _create(v)
            st.rerun()


@st.fragment(run_every=LIVE_SECONDS)
def live_counts(info: Any) -> None:
    """The counts, read from the database on every run and every few seconds (never cached)."""
    p = campaign_progress(engine(), info.id)
    st.progress(
        p["fraction_done"],
        text=f"{p['done']} of {p['items']} works have all their "
        f"labels ({p['fraction_done']:.0%}); {p['remaining']} to go",
    )
    cols = st.columns(5)
    cols[0].metric("Labels counted", p["labels"], help=f"overlap k = {info.overlap}")
    cols[1].metric("Skips", p["skips"])
    cols[2].metric("Leased now", p["in_progress"])
    cols[3].metric("Annotators", p["annotators"])
    cols[4].metric("Gold items", p["gold_items"])


def progress_view(info: Any) -> None:
    """One campaign's counts, sample design and open/closed switch."""
    live_counts(info)
    kind = "probability sample" if info.is_probability_sample else "not a probability sample"
    st.caption(
        f"{esc(info.strategy)} · {kind} · rule {esc(info.rule)} · overlap {info.overlap}"
        f" · {'blind' if info.blind else 'scores shown'} · lease {info.lease_seconds} s"
        f" · questions: {esc(', '.join(info.questions or ['all']))}"
        f" · filter: {esc(info.filter or 'none')}"
    )
    if info.sample and info.sample.get("strata"):
        st.dataframe(info.sample["strata"], hide_index=True)
    elif info.sample:
        st.caption(f"Design: {esc(info.sample)}")
    label = "Close campaign" if info.active else "Reopen campaign"
    if st.button(label, key=f"toggle_{info.id}"):
        set_active(engine(), info.id, not info.active)
        st.rerun()


st.title("Campaigns")
if S.get("camp_msg"):
    kind, message = S.pop("camp_msg")
    getattr(st, kind)(esc(message))
with st.expander("New campaign", expanded=False):
    create_form()
campaigns = list_campaigns(engine())
if not campaigns:
    st.info("No campaign yet: create one above (or with `labeling campaigns create`).")
    st.stop()
st.dataframe(
    [
        {
            "id": c.id,
            "name": c.name,
            "active": c.active,
            "strategy": c.strategy,
            "probability sample": c.is_probability_sample,
            "overlap": c.overlap,
            "blind": c.blind,
            "rule": c.rule,
            "works": c.n_items,
            "done": c.n_done,
        }
        for c in campaigns
    ],
    hide_index=True,
)
by_id = {c.id: c for c in campaigns}
if S.get("camp_pick") not in by_id:
    S["camp_pick"] = campaigns[0].id  # the newest
# Options are ids, not CampaignInfo objects: their counts change, their id does not.
chosen = st.selectbox(
    "Progress of", list(by_id), format_func=lambda c: by_id[c].name, key="camp_pick"
)
progress_view(by_id[chosen])
