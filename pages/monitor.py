"""Monitor (leads): four answers at a glance, then progress, annotators, agreement, machines."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from labeling.reports.monitor.data import data_version
from labeling.reports.monitor.text import fmt_hours
from labeling.reports.monitor.view import LiveView, Statistics, Table, live_view, statistics
from labeling.review.campaigns import get_campaign, list_campaigns
from labeling.review.flags import flagged_table
from labeling.settings import get_settings
from pages._guard import engine, require, schema
from pages._ui import escape_markdown as esc

if TYPE_CHECKING:
    import altair as alt

user = require("monitor")
S = st.session_state
LIVE_SECONDS = 10  # the top re-reads the counts this often; the statistics when labels change


@st.cache_data(show_spinner="Computing the campaign's statistics...", max_entries=16)
def _statistics(url: str, campaign_id: int, version: tuple[int, ...]) -> Statistics:
    """The statistics of a campaign, cached on the database and its label version (not time)."""
    del url, version  # the cache key: a new label, status or queue change recomputes
    return statistics(engine(), schema(), get_campaign(engine(), campaign_id))


@st.cache_data(show_spinner=False, max_entries=32, ttl=60)
def _live(url: str, campaign_id: int, version: tuple[int, ...]) -> LiveView:
    """The live top, cached on the label version; a minute at most, for the rate's window."""
    del url, version
    return live_view(engine(), campaign_id)


def charts() -> ModuleType:
    """The chart module, imported when the first chart is drawn: Altair takes 0.2-0.4 s to
    import, which the four cards at the top should not wait for (bench/monitor_first_view.py)."""
    from labeling.reports.monitor import charts as module

    return module


def download(label: str, data: Callable[[], bytes | str], name: str, mime: str) -> None:
    """A download button whose file is made only when clicked."""
    st.download_button(
        label,
        data=data,
        file_name=name,
        mime=mime,
        key=f"dl_{name}",
        on_click="ignore",
        icon=":material/download:",
        type="tertiary",
    )


def show_table(t: Table, prefix: str, height: int | str = "auto") -> None:
    """A table with its CSV download, or its one-sentence empty state."""
    if t.is_empty:
        st.caption(esc(t.empty))
        return
    st.dataframe(t.shown, hide_index=True, height=height)
    download("CSV", lambda: t.raw.to_csv(index=False), f"{prefix}_{t.key}.csv", "text/csv")


def show_chart(
    chart: alt.TopLevelMixin | None, name: str, prefix: str, empty: str, stretch: bool = True
) -> None:
    """An Altair chart with PNG and SVG downloads, or its one-sentence empty state."""
    if chart is None:
        st.caption(esc(empty))
        return
    st.altair_chart(chart, width="stretch" if stretch else "content")
    # Side by side, each as wide as its label: fixed column shares cut "PNG" to "P…" when the
    # chart sits in a half-width column.
    with st.container(horizontal=True, gap="small"):
        download(
            "PNG", lambda: charts().chart_bytes(chart, "png"), f"{prefix}_{name}.png", "image/png"
        )
        download(
            "SVG",
            lambda: charts().chart_bytes(chart, "svg"),
            f"{prefix}_{name}.svg",
            "image/svg+xml",
        )


def how_far(live: LiveView) -> None:
    """Question 1: done / total, labels per hour and ETA, each with its n and interval."""
    p, r = live.progress, live.rate
    st.markdown("##### How far are we?")
    st.progress(p["fraction_done"], text=f"{p['done']} of {p['items']} works done")
    a, b = st.columns(2)
    a.metric(
        "Labels per hour",
        "—" if r["per_hour"] is None else f"{r['per_hour']:.1f}",
        help="Labels that count towards the overlap, over the last 7 days (or since the "
        "first label), with the exact Poisson 95% interval.",
    )
    b.metric("ETA at this rate", "—" if r["eta_hours"] is None else fmt_hours(r["eta_hours"]))
    st.caption(esc(live.sentences["progress"]))
    st.caption(esc(live.sentences["rate"]))


@st.fragment(run_every=LIVE_SECONDS)
def live_top(campaign_id: int, shown_version: tuple[int, ...]) -> None:
    """The self-refreshing first answer; offers a refresh when the statistics are behind."""
    live = _live(get_settings().database_url, campaign_id, data_version(engine(), campaign_id))
    how_far(live)
    if live.version != shown_version:
        st.info("New labels since the numbers below were computed.", icon=":material/update:")
        if st.button("Refresh the statistics", key="mon_refresh"):
            st.rerun(scope="app")


def attention(stats: Statistics, prefix: str) -> None:
    """Question 2: annotators far from the others, adjudications or gold checks, or fast or slow."""
    t = stats.tables
    st.markdown("##### Who needs attention?")
    st.caption(
        "Annotators clearly below everyone else (95% Wilson upper bound under the others' "
        "rate) on one of three references their own label did not make: the answer most of "
        "the other annotators gave on the same works (leave one out), the answers a lead "
        "adjudicated, the gold checks; or unusually fast or slow (median time's 95% interval "
        "beyond half or twice the others' median). Not the validated answers: under the "
        "unanimous rule everyone agrees with those by construction."
    )
    show_table(t["attention"], prefix)


def reliability(stats: Statistics, prefix: str) -> None:
    """Question 3: Krippendorff's alpha per question, flagged below 0.667 and 0.8."""
    st.markdown("##### Which questions are unreliable?")
    st.caption(esc(stats.sentences["reliability"]))
    if not stats.tables["reliability"].is_empty:  # its empty state is the sentence above
        show_table(stats.tables["reliability"], prefix)


def teachers(stats: Statistics, prefix: str) -> None:
    """Question 4: each teacher's precision and recall per label, once works are validated."""
    st.markdown("##### How good are the teachers?")
    st.caption(esc(stats.sentences["teachers"]))
    if not stats.tables["teachers"].is_empty:
        show_table(stats.tables["teachers"], prefix, height=280)


def progress_tab(live: LiveView, prefix: str) -> None:
    """Cumulative labels, skips, validated and disputed works, binned to fit the span."""
    step = live.cumulative["step"].iloc[0] if not live.cumulative.empty else ""
    st.caption(
        f"Cumulative counts, one point per {step} (UTC): first labels and skips, works "
        "that became validated or disputed."
        if step
        else ""
    )
    show_chart(
        charts().progress_chart(live.cumulative),
        "progress",
        prefix,
        "No labels or status changes yet in this campaign.",
    )


def annotators_tab(stats: Statistics, prefix: str) -> None:
    """Throughput, time per work, the annotator table, per-question agreement and drift."""
    t, rows = stats.tables, stats.annotators
    a, b = st.columns(2)
    with a:
        st.markdown("**Throughput** (labels and skips per active clock hour)")
        show_chart(charts().throughput_chart(rows), "throughput", prefix, "No labels yet.")
    with b:
        st.markdown("**Time per work** (median seconds, 95% interval)")
        show_chart(
            charts().time_chart(rows),
            "time_per_work",
            prefix,
            "No labels with a recorded time yet.",
        )
    st.caption(
        "Agreement with the others: share of an annotator's answers equal to the answer "
        "strictly more than half of the other annotators gave on the same non-gold work "
        "(works without such a majority are not compared). Adjudicated: the same against "
        "the answers a lead adjudicated. Gold: the same on gold checks. 95% Wilson "
        "intervals; each n counts the answers compared."
    )
    show_table(t["annotators"], prefix)
    st.markdown("**Accuracy estimated by a model, beside accuracy on gold checks**")
    st.caption(
        "Model: under Dawid-Skene (each annotator's confusion matrix learnt from every "
        "label of the campaign, no gold needed; the numbers of `labeling aggregate`), "
        "the mean probability that an annotator's answer is the true one; model_n = "
        "answers. Gold: share right on gold checks, 95% Wilson interval, gold_n answers."
    )
    show_table(t["model_accuracy"], prefix)
    st.markdown("**Agreement with the others, per question** (leave one out)")
    show_table(t["per_question"], prefix)
    st.markdown("**Drift: agreement with the others by week**")
    show_chart(charts().drift_chart(stats.drift), "drift", prefix, t["drift"].empty)
    if not t["drift"].is_empty:
        show_table(t["drift"], prefix)


def agreement_tab(stats: Statistics, prefix: str) -> None:
    """Agreement per question and label, and the pairwise kappa matrix."""
    st.caption(
        "Krippendorff's alpha and Fleiss' kappa with 95% bootstrap intervals (over works, "
        "200 replicates, seed 0: the numbers of `labeling agreement`), Gwet's AC1, "
        "percent agreement; n_works and n_labels are what each row rests on."
    )
    show_table(stats.tables["agreement"], prefix)
    st.markdown(
        "**Cohen's kappa per pair of annotators** (mean over questions weighted by n; "
        "n in each cell's tooltip)"
    )
    show_chart(
        charts().kappa_matrix(stats.pairs),
        "kappa_matrix",
        prefix,
        stats.tables["pairs"].empty,
        stretch=False,
    )
    if not stats.tables["pairs"].is_empty:
        show_table(stats.tables["pairs"], prefix)


def anchoring(stats: Statistics, prefix: str) -> None:
    """Randomised arms: agreement with the teachers when their scores were shown or hidden."""
    st.markdown(
        "**Anchoring: do annotators shown the teachers' scores agree with them more?** "
        "(first answers, per randomised arm; difference shown - hidden with its 95% interval)"
    )
    show_table(stats.tables["anchoring"], prefix)


def machines_tab(stats: Statistics, prefix: str) -> None:
    """Every machine system against the validated answers, calibration and confusion."""
    t = stats.tables
    anchoring(stats, prefix)
    if t["machines"].is_empty:
        st.caption(esc(t["machines"].empty))
        return
    st.markdown(
        "**Precision, recall and F1 of each machine system per label** (against the validated "
        "answers, 95% Wilson intervals; n = works each rests on)"
    )
    show_table(t["machines"], prefix)
    st.markdown("**Calibration of the teachers' scores** (Brier score, lower is better)")
    show_table(t["brier"], prefix)
    st.markdown(
        "**Reliability: does a score of 0.8 mean 80%?** (pooled over each question's "
        "labels; bars are 95% Wilson intervals, n per bin in the tooltip)"
    )
    show_chart(
        charts().reliability_chart(stats.reliability_bins),
        "reliability",
        prefix,
        "No scores to bin.",
        stretch=False,
    )
    for (question, system), matrix in stats.confusion.items():
        with st.expander(f"Confusion matrix: {question}, {system} (rows human, columns machine)"):
            st.dataframe(matrix)
            download(
                "CSV",
                lambda m=matrix: m.to_csv(),
                f"{prefix}_confusion_{question}_{system}.csv",
                "text/csv",
            )


def estimates_tab(stats: Statistics, prefix: str) -> None:
    """Frame prevalence per label from a probability sample, or the plain refusal."""
    est = stats.estimates or {}
    if stats.sentences.get("plan"):  # before the estimates too: planning starts at 0 labels
        st.info(esc(stats.sentences["plan"]), icon=":material/calculate:")
    if not est.get("estimable"):
        st.warning(esc(stats.sentences["estimates"]), icon=":material/block:")
        return
    st.caption(esc(stats.sentences["estimates"]))
    show_table(stats.tables["strata"], prefix)
    show_table(stats.tables["estimates"], prefix)


@st.cache_data(show_spinner=False, max_entries=16)
def _flagged(url: str, campaign_id: int, version: tuple[int, ...]) -> pd.DataFrame:
    """A campaign's flagged works, cached on the database and its label version."""
    del url, version
    return flagged_table(engine(), campaign_id)


def flags_section(campaign_id: int, version: tuple[int, ...], prefix: str) -> None:
    """The flagged works, one row per flag on a current label, newest first."""
    st.markdown("**Flagged works** (open them on Adjudicate: Show, Flagged works, or F)")
    flagged = _flagged(get_settings().database_url, campaign_id, version)
    if flagged.empty:
        st.caption("No work is flagged in this campaign.")
        return
    st.dataframe(flagged, hide_index=True)
    download("CSV", lambda: flagged.to_csv(index=False), f"{prefix}_flagged_works.csv", "text/csv")


# ------------------------------------------------------------------ the page
st.title("Monitor")
campaigns = {c.id: c for c in list_campaigns(engine())}
if not campaigns:
    st.info("No campaign yet. A lead creates campaigns on the Campaigns page.")
    st.stop()
if S.get("mon_campaign") not in campaigns:
    # The busiest campaign first (most works done; the newest on a tie).
    S["mon_campaign"] = max(campaigns.values(), key=lambda c: (c.n_done, c.id)).id
st.selectbox(
    "Campaign", list(campaigns), key="mon_campaign", format_func=lambda c: campaigns[c].name
)
camp = campaigns[S["mon_campaign"]]
st.caption(
    f"Strategy {esc(camp.strategy)} · rule {esc(camp.rule)}, k={camp.overlap} · "
    f"gold rate {camp.gold_rate:.0%} · {camp.n_items} works queued"
)
version = data_version(engine(), camp.id)
stats = _statistics(get_settings().database_url, camp.id, version)
prefix = f"campaign{camp.id}"
# The four answers one under another, each the page's full width: in half-width cards their
# tables scrolled sideways and hid columns (tests/e2e/test_e2e_monitor.py checks at 1366x768).
with st.container(border=True, key="mon_card_progress"):
    live_top(camp.id, version)
with st.container(border=True, key="mon_card_attention"):
    attention(stats, prefix)
with st.container(border=True, key="mon_card_reliability"):
    reliability(stats, prefix)
with st.container(border=True, key="mon_card_teachers"):
    teachers(stats, prefix)
tabs = st.tabs(
    ["Progress", "Annotators", "Agreement", "Humans vs machines", "Estimates", "Skips and flags"]
)
with tabs[0]:
    progress_tab(_live(get_settings().database_url, camp.id, version), prefix)
with tabs[1]:
    annotators_tab(stats, prefix)
with tabs[2]:
    agreement_tab(stats, prefix)
with tabs[3]:
    machines_tab(stats, prefix)
with tabs[4]:
    estimates_tab(stats, prefix)
with tabs[5]:
    show_table(stats.tables["reasons"], prefix)
    flags_section(camp.id, version, prefix)
