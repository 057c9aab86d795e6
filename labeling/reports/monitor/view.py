"""The Monitor page in one call: the live top, the four questions, and the tables behind them.

live_view is cheap (a few aggregate queries) and feeds the self-refreshing top of the page:
how far are we, at what rate, and when done. statistics_view holds the heavy numbers (who needs
attention, which questions are unreliable, how good the teachers are) and the tables and
charts' data. Every table comes as numbers (for CSV) and as shown (intervals as text), or as
one sentence when it is empty.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from db.models import utcnow
from labeling import collector
from labeling.reports import monitoring as mon
from labeling.reports.agreement import agreement_for
from labeling.reports.evaluation import validated_works
from labeling.reports.monitor import data as md
from labeling.reports.monitor import model_accuracy as mm
from labeling.reports.monitor import summary as ms
from labeling.reports.monitor import text as mt
from labeling.reports.monitor.clock import Clock
from labeling.reports.monitor.design import anchoring_rows
from labeling.reports.monitor.peers import adjudicated_works, peer_matches
from labeling.reports.monitor.status_parts import status_parts
from labeling.reports.tables import (
    agreement_table,
    brier_table,
    confusion_tables,
    estimate_table,
    machine_table,
    pairs_table,
    reliability_table,
    with_ci,
)
from labeling.review.campaigns import CampaignInfo, campaign_progress, get_campaign
from labeling.review.validation import campaign_questions
from labeling.schema import Schema


@dataclass
class Table:
    """A table as shown (intervals as text) and as downloaded (numbers), or its empty sentence."""

    key: str
    raw: pd.DataFrame
    shown: pd.DataFrame
    empty: str

    @property
    def is_empty(self) -> bool:
        """Whether there is nothing to show but the sentence."""
        return self.raw.empty


OUTSIDE = "interval left out: it does not contain the estimate"


def outside(raw: pd.DataFrame, est: str, lo: str, hi: str) -> np.ndarray:
    """Rows whose interval [lo, hi] is there but does not contain the estimate."""
    e, a, b = (pd.to_numeric(raw[c], errors="coerce").to_numpy(dtype=float) for c in (est, lo, hi))
    known = ~(np.isnan(e) | np.isnan(a) | np.isnan(b))
    with np.errstate(invalid="ignore"):
        return known & ((e < a - 1e-9) | (e > b + 1e-9))


def table(key: str, raw: pd.DataFrame, empty: str, *cis: tuple[str, str, str, str]) -> Table:
    """A Table whose shown copy writes each (name, est, lo, hi) as "est [lo, hi]".

    Every interval is checked against its estimate before it is shown: one that does not
    contain it (a bootstrap at small n can do that) is left out and the cell says so.
    """
    shown = raw
    if not raw.empty:
        for name, est, lo, hi in cis:
            bad = outside(raw, est, lo, hi)
            shown = with_ci(shown, name, est, lo, hi)
            if bad.any():
                cells = shown[name].to_numpy(dtype=object)
                cells[bad] = [f"{e:.2f} ({OUTSIDE})" for e in raw[est].to_numpy(dtype=float)[bad]]
                shown = shown.assign(**{name: cells})
    return Table(key, raw, shown, empty)


@dataclass
class LiveView:
    """The top of the page: counts, rate and ETA, the cumulative line."""

    campaign: CampaignInfo
    version: tuple[int, ...]
    progress: dict[str, Any]
    rate: dict[str, Any]
    cumulative: pd.DataFrame
    sentences: dict[str, str]


@dataclass
class Statistics:
    """The heavy part: the three other questions and every table and chart's data."""

    sentences: dict[str, str]
    tables: dict[str, Table] = field(default_factory=dict)
    annotators: pd.DataFrame | None = None
    drift: pd.DataFrame | None = None
    pairs: pd.DataFrame | None = None
    reliability_bins: pd.DataFrame | None = None
    confusion: dict[tuple[str, str], pd.DataFrame] = field(default_factory=dict)
    estimates: dict[str, Any] | None = None


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """The threads that compute the Monitor's independent parts (made on first use)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="monitor")
        return _POOL


def live_view(engine: Engine, campaign_id: int, now: datetime | None = None) -> LiveView:
    """Progress counts, labels per hour, ETA and the cumulative line of one campaign.

    Args:
        engine: the database.
        campaign_id: the campaign.
        now: the clock (default now).
    """
    info = get_campaign(engine, campaign_id)
    version = md.data_version(engine, campaign_id)
    p = campaign_progress(engine, campaign_id, now=now)
    remaining, started = md.remaining_labels(engine, info)
    clock = now or utcnow()
    span = md.label_span(engine, campaign_id, clock - ms.RATE_WINDOW)
    rate = ms.rate_and_eta(span["first_counted"], span["counted"], span["recent"], remaining, clock)
    # Count per minute only when the chart's bins are minutes: months of labels per day.
    act = md.activity(engine, campaign_id, ms.sql_grain(span["first"], span["last"]))
    progress = {**p, "started": started, "overlap": info.overlap}
    sentences = {"progress": mt.progress_sentence(progress), "rate": mt.rate_sentence(rate)}
    return LiveView(info, version, progress, rate, ms.cumulative_progress(act), sentences)


def _shares(matches: pd.DataFrame, name: str) -> pd.DataFrame:
    """Per annotator: the share of matches with its Wilson interval and n, named `name`_*."""
    out = mon.agreement_by(matches, ["annotator"])
    return out.rename(
        columns={"share": name, "lo": f"{name}_lo", "hi": f"{name}_hi", "n": f"{name}_n"}
    )


def _annotators(
    rows: pd.DataFrame, peers: pd.DataFrame, adjudicated: pd.DataFrame, gold: pd.DataFrame
) -> pd.DataFrame:
    """Per annotator: volume, throughput, agreement with the others, with adjudications and
    with gold checks (each a share, interval and n), median time with interval."""
    # Volume and time from annotator_table; the shares counted once per reference below (its
    # own loop over the annotators' matches cost 0.1-0.2 s on 600,000 of them).
    base = mon.annotator_table(rows, {}, matches=peers.iloc[0:0])
    if base.empty:
        return base
    base = base.drop(columns=[c for c in base.columns if c.startswith(("agree", "gold"))])
    for name, matches in (("others", peers), ("adjudicated", adjudicated), ("gold", gold)):
        base = base.merge(_shares(matches, name), on="annotator", how="left")
        base[f"{name}_n"] = base[f"{name}_n"].fillna(0).astype(int)
    works = gold.groupby("annotator")["work_id"].nunique().rename("gold_works")
    base = base.merge(works, left_on="annotator", right_index=True, how="left")
    base["gold_works"] = base["gold_works"].fillna(0).astype(int)
    times = rows[["annotator"]].assign(seconds=rows["time_on_item_ms"] / 1000).dropna()
    speed = ms.annotator_speed(times).drop(columns=["time_n"])
    out = base.drop(columns=["median_seconds"]).merge(speed, on="annotator", how="left")
    out.insert(out.columns.get_loc("labels"), "submitted", out["labels"] + out["skips"])
    return out


def _annotator_tables(
    rows: pd.DataFrame, n_validated: int, adjudicated: set[str]
) -> tuple[dict[str, Table], Any]:
    """The annotator, attention, per-question agreement, drift and reasons tables.

    Agreement is measured against references that the annotator's own label did not make:
    the others' majority on the same work (leave one out, non-gold works), the adjudicated
    answers, and the gold checks (peers.py says why not the rule-validated answers).
    """
    peers = peer_matches(rows)
    peers = peers[~peers["gold_item"].to_numpy(dtype=bool)]
    # Only gold checks and adjudicated works are held against their final answers.
    settled = rows["gold_item"].to_numpy(dtype=bool) | rows["work_id"].isin(adjudicated).to_numpy()
    kept = rows[settled]
    kept.attrs = rows.attrs
    truth = md.matches_of(kept)
    on_gold = truth["gold_item"].to_numpy(dtype=bool)
    stats = _annotators(rows, peers, truth[~on_gold], truth[on_gold])
    no_peers = "No work has answers from two annotators or more yet."
    tables = {
        "annotators": table(
            "annotators",
            stats,
            "No labels yet.",
            ("agreement with the others [95% CI]", "others", "others_lo", "others_hi"),
            ("adjudicated [95% CI]", "adjudicated", "adjudicated_lo", "adjudicated_hi"),
            ("gold accuracy [95% CI]", "gold", "gold_lo", "gold_hi"),
            ("median s [95% CI]", "median_seconds", "median_lo", "median_hi"),
        ),
        "attention": table(
            "attention",
            ms.attention(stats) if not stats.empty else pd.DataFrame(),
            mt.attention_sentence(stats, n_validated),
        ),
        "per_question": table(
            "agreement_with_the_others_by_annotator_and_question",
            mon.agreement_by(peers, ["annotator", "question"]),
            no_peers,
            ("agreement with the others [95% CI]", "share", "lo", "hi"),
        ),
        "reasons": table("skip_and_flag_reasons", mon.reasons_table(rows), "No skips or flags."),
    }
    drift = mon.drift_table(peers, "W")
    tables["drift"] = table(
        "drift_by_week",
        drift,
        no_peers,
        ("agreement with the others [95% CI]", "share", "lo", "hi"),
    )
    return tables, (stats, drift)


def with_reasons(rows: pd.DataFrame, report: dict[str, Any]) -> pd.DataFrame:
    """The agreement table with alpha_ci_reason and kappa_ci_reason: why there is no interval.

    The report gives an interval only from MIN_CI_WORKS works with two labels or more, and
    only one that contains its estimate (coefficients.checked_ci); the reason is shown, not
    a bare estimate that reads as if it were certain. No column when every interval is there.
    """
    keys = ("alpha_ci_reason", "kappa_ci_reason")
    why = [
        (q, label, *(e.get(k) or "" for k in keys))
        for q, entry in (report.get("questions") or {}).items()
        for label, e in [("", entry), *(entry.get("labels") or {}).items()]
    ]
    reasons = pd.DataFrame(why, columns=["question", "label", *keys])
    out = rows.merge(reasons, on=["question", "label"], how="left")
    for k in keys:
        out[k] = out[k].fillna("")
        if not (out[k] != "").any():
            out = out.drop(columns=[k])
    return out


def statistics(
    engine: Engine, schema: Schema, campaign: CampaignInfo, timings: dict[str, float] | None = None
) -> Statistics:
    """Who needs attention, which questions are unreliable, how good the teachers are, and more.

    Args:
        engine: the database.
        schema: the label schema.
        campaign: the campaign.
        timings: filled with the seconds of each step when given (bench/monitor.py).
    """
    # Hundreds of thousands of short-lived rows and answers: the cycle collector's passes over
    # them (and over the kept labels) cost about 0.5 s of the large bench's 3 s.
    with collector.paused():
        return _statistics(engine, schema, campaign, timings)


def _statistics(
    engine: Engine, schema: Schema, campaign: CampaignInfo, timings: dict[str, float] | None
) -> Statistics:
    """The body of statistics."""
    clock = Clock(timings)
    # Read once, used three times: the validated works for the labels' agreement with them,
    # for machines and for estimates.
    validated = clock("validated works", validated_works, engine, schema, campaign.id)
    rows = clock(
        "label rows", md.label_rows, engine, schema, campaign, truth=validated.final_texts()
    )
    # Humans vs machines, estimates and the plan: recomputed only when their inputs change.
    status = status_parts(engine, schema, campaign, validated, timings)
    machines, estimates = status.machines, status.estimates
    n_validated = int(machines["n_works"])
    # The annotator tables, the agreement report and the model's fit read the label rows (or
    # the long table made from them) and nothing mutable: they run side by side, on the
    # other cores (numpy and scipy release the GIL in their loops). On the large bench the
    # three took 1.6 s one after the other, 1.2-1.4 s side by side, at load 3 on 2 cores.
    pool = _pool()
    adjudicated = clock("adjudicated works", adjudicated_works, engine, campaign.id)
    annotators_job = pool.submit(
        clock, "annotator tables", _annotator_tables, rows, n_validated, adjudicated
    )
    long = clock("long table", md.agreement_labels, rows)
    agreement_job = pool.submit(
        clock, "agreement report", agreement_for, engine, schema, campaign.id, labels=long
    )
    warm = mm.warm_starts((str(engine.url), campaign.id, campaign.created_at))
    fit = clock("model accuracy", mm.model_fit, long, campaign_questions(campaign, schema), warm)
    tables, (stats, drift) = annotators_job.result()
    agreement = agreement_job.result()
    model, no_model = mm.with_gold(fit, stats)
    tables["model_accuracy"] = table(
        "model_accuracy", model, no_model, ("gold accuracy [95% CI]", "gold", "gold_lo", "gold_hi")
    )
    rows_agree = with_reasons(agreement_table(agreement), agreement)
    rows_agree = rows_agree[rows_agree["n_labels"].fillna(0) > 0].reset_index(drop=True)
    no_labels = "No labels yet: there is no agreement to measure."
    tables["reliability"] = table(
        "question_reliability",
        ms.question_reliability(rows_agree),
        no_labels,
        ("alpha [95% CI]", "alpha", "alpha_lo", "alpha_hi"),
    )
    tables["agreement"] = table(
        "agreement",
        rows_agree,
        no_labels,
        ("alpha [95% CI]", "alpha", "alpha_lo", "alpha_hi"),
        ("fleiss kappa [95% CI]", "fleiss_kappa", "kappa_lo", "kappa_hi"),
    )
    pairs = pairs_table(agreement)
    tables["pairs"] = table("pairs", pairs, mt.pairs_sentence(agreement))
    no_valid = mt.no_validated_sentence(n_validated, campaign.n_items)
    machine_rows = machine_table(machines) if n_validated else pd.DataFrame()
    cis = (
        ("precision [95% CI]", "precision", "precision_lo", "precision_hi"),
        ("recall [95% CI]", "recall", "recall_lo", "recall_hi"),
    )
    # At a glance: each teacher's precision and recall per label, with their n only.
    teachers = (
        machine_rows.loc[
            machine_rows["system"].isin(schema.teachers),
            [
                "question",
                "label",
                "system",
                "precision",
                "precision_lo",
                "precision_hi",
                "precision_n",
                "recall",
                "recall_lo",
                "recall_hi",
                "recall_n",
            ],
        ]
        if n_validated
        else machine_rows
    )
    tables["teachers"] = table("teachers", teachers.reset_index(drop=True), no_valid, *cis)
    tables["machines"] = table("humans_vs_machines", machine_rows, no_valid, *cis)
    tables["brier"] = table(
        "brier", brier_table(machines) if n_validated else pd.DataFrame(), no_valid
    )
    tables["estimates"] = table(
        "frame_estimates",
        estimate_table(estimates),
        mt.estimates_sentence(estimates),
        ("prevalence [95% CI]", "prevalence", "lo", "hi"),
    )
    tables["strata"] = table("strata", pd.DataFrame(estimates.get("strata") or []), "")
    arms, no_arms = clock("anchoring", anchoring_rows, engine, schema, campaign)
    tables["anchoring"] = table(
        "anchoring", arms, no_arms, ("difference [95% CI]", "difference", "lo", "hi")
    )
    sentences = {
        "attention": tables["attention"].empty,
        "reliability": mt.reliability_sentence(tables["reliability"].raw),
        "teachers": mt.teachers_sentence(n_validated, campaign.n_items),
        "estimates": mt.estimates_sentence(estimates),
        "plan": status.plan,
    }
    return Statistics(
        sentences,
        tables,
        stats,
        drift,
        pairs,
        reliability_table(machines) if n_validated else pd.DataFrame(),
        confusion_tables(machines) if n_validated else {},
        estimates,
    )


def monitor_view(
    engine: Engine, schema: Schema, campaign_id: int, now: datetime | None = None
) -> tuple[LiveView, Statistics]:
    """Everything the Monitor page shows for one campaign (live top and statistics)."""
    live = live_view(engine, campaign_id, now)
    return live, statistics(engine, schema, live.campaign)
