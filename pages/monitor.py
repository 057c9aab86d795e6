"""Monitor (leads): progress, annotators, agreement, humans vs machines and frame estimates."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from labeling import monitoring as mon
from labeling.agreement import MIN_PAIR_N
from labeling.campaigns import campaign_progress, list_campaigns
from labeling.card import escape_markdown as esc
from labeling.evaluation import frame_estimates, machine_report
from labeling.report_tables import (
    agreement_table,
    brier_table,
    confusion_tables,
    estimate_table,
    machine_table,
    pairs_table,
    reliability_table,
    with_ci,
)
from labeling.reports import agreement_for
from pages._guard import engine, require, schema

user = require("monitor")
S = st.session_state


def table(df: pd.DataFrame, empty: str) -> None:
    """A table, or a plain sentence when it has no rows."""
    if df.empty:
        st.caption(empty)
    else:
        st.dataframe(df, hide_index=True)


@st.fragment(run_every=30)
def live(campaign_id: int) -> None:
    """The parts that change while annotators work: progress, annotators, reasons, drift."""
    p = campaign_progress(engine(), campaign_id)
    st.markdown(
        f"**Progress:** {p['done']} of {p['items']} works done ({p['fraction_done']:.0%}) · "
        f"{p['labels']} labels counted · {p['skips']} skips · {p['in_progress']} leased now · "
        f"{p['annotators']} annotators · {p['gold_items']} gold items")
    labels = mon.load_labels(engine(), campaign_id)
    finals = mon.load_finals(engine(), campaign_id)
    events = mon.load_events(engine(), campaign_id)
    progress = mon.progress_table(labels, events, "D")
    st.markdown("#### Progress over time")
    st.caption("Cumulative per day: labels and skips submitted (first versions), works that "
               "became validated or disputed.")
    if progress.empty:
        st.caption("No labels or status changes yet in this campaign.")
    else:
        st.altair_chart(
            alt.Chart(mon.progress_long(progress)).mark_line(point=True).encode(
                x=alt.X("period:T", title="day"), y=alt.Y("works:Q", title="works"),
                color="measure:N", tooltip=["period:T", "measure:N", "works:Q"]),
            width="stretch")
        table(progress, "")
    st.markdown("#### Annotators")
    st.caption("Agreement with the validated answer: share of an annotator's answers (per "
               "question) equal to the final answer on validated non-gold works, 95% Wilson "
               "interval, n = answers compared. Gold: the same on gold checks. Throughput: "
               "labels and skips per clock hour with at least one submission.")
    stats = mon.annotator_table(labels, finals)
    if not stats.empty:
        stats = with_ci(stats, "agreement [95% CI]", "agree", "agree_lo", "agree_hi")
        stats = with_ci(stats, "gold accuracy [95% CI]", "gold", "gold_lo", "gold_hi")
    table(stats, "No labels yet.")
    matches = mon.answer_matches(labels, finals)
    st.markdown("#### Agreement with the validated answer, per question")
    per_q = mon.agreement_by(matches[~matches["gold_item"]], ["annotator", "question"])
    table(with_ci(per_q, "agreement [95% CI]", "share", "lo", "hi"),
          "No validated works with labels yet.")
    st.markdown("#### Drift: agreement with the validated answer by week")
    drift = mon.drift_table(matches, "W")
    if drift.empty:
        st.caption("No validated works with labels yet.")
    else:
        st.altair_chart(
            alt.Chart(drift).mark_line(point=True).encode(
                x=alt.X("period:T", title="week"),
                y=alt.Y("share:Q", title="agreement", scale=alt.Scale(domain=[0, 1])),
                color="annotator:N", tooltip=["period:T", "annotator:N", "share:Q", "lo:Q",
                                              "hi:Q", "n:Q"]),
            width="stretch")
        table(with_ci(drift, "agreement [95% CI]", "share", "lo", "hi"), "")
    st.markdown("#### Skip and flag reasons")
    table(mon.reasons_table(labels), "No skips or flags.")


def agreement(campaign_id: int) -> None:
    """Inter-annotator agreement per question and label, and Cohen's kappa per pair."""
    report = agreement_for(engine(), schema(), campaign_id)
    st.markdown("#### Inter-annotator agreement per question and label")
    st.caption("Krippendorff's alpha and Fleiss' kappa with 95% bootstrap intervals (over "
               "works), Gwet's AC1, percent agreement; n_works and n_labels are what each row "
               "rests on. Empty cells: the measure is undefined (e.g. no variation).")
    rows = agreement_table(report)
    rows = rows[rows["n_labels"].fillna(0) > 0]
    if not rows.empty:
        rows = with_ci(rows, "alpha [95% CI]", "alpha", "alpha_lo", "alpha_hi")
        rows = with_ci(rows, "fleiss kappa [95% CI]", "fleiss_kappa", "kappa_lo", "kappa_hi")
    table(rows, "No labels yet.")
    st.markdown("#### Pairwise agreement (Cohen's kappa)")
    pairs = pairs_table(report)
    if pairs.empty:
        st.caption(f"No pair of annotators has a defined kappa on {MIN_PAIR_N} or more works in "
                   "common yet.")
        return
    st.caption("Mean over questions weighted by n; n = works in common × questions.")
    base = alt.Chart(pairs).encode(x=alt.X("a:N", title=None), y=alt.Y("b:N", title=None))
    heat = base.mark_rect().encode(
        color=alt.Color("kappa:Q", scale=alt.Scale(domain=[-1, 1], scheme="redblue")),
        tooltip=["a:N", "b:N", alt.Tooltip("kappa:Q", format=".2f"), "n:Q"])
    text = base.mark_text().encode(text=alt.Text("label:N")).transform_calculate(
        label="format(datum.kappa, '.2f') + ' (n=' + datum.n + ')'")
    st.altair_chart(heat + text, width="stretch")
    table(pairs, "")


def machines(campaign_id: int) -> None:
    """Each teacher, the candidate and the consensus against the validated answers."""
    report = machine_report(engine(), schema(), campaign_id)
    st.markdown("#### Humans vs machines")
    st.caption(f"Against {report['n_works']} validated works. Precision and recall with 95% "
               "Wilson intervals; each n is the count the number rests on.")
    rows = machine_table(report)
    if not rows.empty:
        rows = with_ci(rows, "precision [95% CI]", "precision", "precision_lo", "precision_hi")
        rows = with_ci(rows, "recall [95% CI]", "recall", "recall_lo", "recall_hi")
    table(rows, "No validated works yet.")
    st.markdown("**Calibration of the teachers' scores (Brier score, lower is better)**")
    table(brier_table(report), "No validated works yet.")
    bins = reliability_table(report)
    if not bins.empty:
        st.markdown("**Reliability: does a score of 0.8 mean 80%?** (pooled over each "
                    "question's labels; bars are 95% Wilson intervals, n per bin in the tooltip)")
        base = alt.Chart().encode(
            x=alt.X("mean_score:Q", title="mean score in bin", scale=alt.Scale(domain=[0, 1])),
            color="teacher:N")
        points = base.mark_line(point=True).encode(
            y=alt.Y("observed:Q", title="human rate", scale=alt.Scale(domain=[0, 1])),
            tooltip=["question:N", "teacher:N", "n:Q", alt.Tooltip("observed:Q", format=".2f")])
        bars = base.mark_rule().encode(y="lo:Q", y2="hi:Q")
        # Perfect calibration: the human rate equals the mean score.
        ideal = base.mark_line(strokeDash=[4, 4], color="gray").encode(y="mean_score:Q")
        st.altair_chart(alt.layer(ideal, bars, points, data=bins).facet(column="question:N"))
    for (question, system), matrix in confusion_tables(report).items():
        with st.expander(f"Confusion matrix: {question}, {system} (rows human, columns machine)"):
            st.dataframe(matrix, width="stretch")


def estimates(campaign_id: int) -> None:
    """Frame prevalence per label from a probability sample, or the plain refusal."""
    st.markdown("#### Estimates for the whole frame")
    est = frame_estimates(engine(), schema(), campaign_id)
    if not est["estimable"]:
        st.warning(esc(est["reason"]), icon=":material/block:")
        return
    st.caption(f"{est['n_validated']} validated of {est['n_sampled']} sampled works, frame of "
               f"{est['population']} works; {esc(est['assumption'])}.")
    table(pd.DataFrame(est["strata"]), "")
    rows = estimate_table(est)
    if not rows.empty:
        rows = with_ci(rows, "prevalence [95% CI]", "prevalence", "lo", "hi")
    table(rows, "No validated sampled works yet.")


# ------------------------------------------------------------------ the page
st.title("Monitor")
campaigns = {c.id: c for c in list_campaigns(engine())}
if not campaigns:
    st.info("No campaign yet. A lead creates campaigns on the Campaigns page.")
    st.stop()
if S.get("mon_campaign") not in campaigns:
    # The busiest campaign first (most works done; the newest on a tie).
    S["mon_campaign"] = max(campaigns.values(), key=lambda c: (c.n_done, c.id)).id
st.selectbox("Campaign", list(campaigns), key="mon_campaign",
             format_func=lambda c: campaigns[c].name)
camp = campaigns[S["mon_campaign"]]
st.caption(f"Strategy {esc(camp.strategy)} · rule {esc(camp.rule)}, k={camp.overlap} · "
           f"gold rate {camp.gold_rate:.0%} · {camp.n_items} works queued")
live(camp.id)
agreement(camp.id)
machines(camp.id)
estimates(camp.id)
