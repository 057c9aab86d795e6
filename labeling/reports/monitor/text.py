"""The Monitor's sentences: each answer, and each empty state, as one plain sentence."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from labeling.reports.monitor.summary import ALPHA_RELIABLE, ALPHA_TENTATIVE, RATE_WINDOW


def fmt_hours(hours: float | None) -> str:
    """A duration in words: minutes, hours or days ("unbounded" for None)."""
    if hours is None or pd.isna(hours):
        return "unbounded"
    if hours < 1:
        return f"{max(hours * 60, 0):.0f} min"
    if hours < 48:
        return f"{hours:.1f} h"
    return f"{hours / 24:.1f} days"


def progress_sentence(p: Mapping[str, Any]) -> str:
    """How far the campaign is: works done and started, labels, skips, leases."""
    if not p["items"]:
        return "This campaign has no works queued yet."
    return (
        f"{p['done']} of {p['items']} works have all {p['overlap']} label(s) "
        f"({p['fraction_done']:.0%}); {p['started']} have at least one. "
        f"{p['labels']} labels counted, {p['skips']} skips, {p['in_progress']} leased now, "
        f"{p['annotators']} annotator(s)."
    )


def rate_sentence(rate: Mapping[str, Any]) -> str:
    """Labels per hour with its interval and n, and the ETA at that rate."""
    if rate["remaining"] == 0 and rate["n"] == 0:
        return "No label is still wanted: every work has its labels."
    if rate["per_hour"] is None:
        return "No labels yet: no rate and no ETA."
    window = (
        fmt_hours(rate["hours"])
        if rate["hours"] < RATE_WINDOW.total_seconds() / 3600
        else f"{RATE_WINDOW.days} days"
    )
    head = (
        f"{rate['per_hour']:.1f} labels per hour [{rate['lo']:.1f}, {rate['hi']:.1f}] over "
        f"the last {window} (n = {rate['n']} labels)."
    )
    if rate["remaining"] == 0:
        return f"{head} Every work has its labels."
    if rate["n"] == 0:
        return f"{head} No label in that time: no ETA at the current rate."
    return (
        f"{head} ETA for the {rate['remaining']} labels still wanted: "
        f"{fmt_hours(rate['eta_hours'])} [{fmt_hours(rate['eta_lo'])}, "
        f"{fmt_hours(rate['eta_hi'])}] at this rate."
    )


def attention_sentence(annotators: pd.DataFrame, n_validated: int) -> str:
    """Why nobody is flagged: no labels, or no one stands out (and what was compared)."""
    del n_validated  # the references below do not need validated works
    if annotators.empty:
        return "No labels yet: nobody to look at."

    def compared(column: str) -> bool:
        """Whether any answer was held against this reference."""
        return column in annotators and bool(annotators[column].fillna(0).sum() > 0)

    refs = [
        words
        for column, words in (
            ("others_n", "the others' answers on the same works"),
            ("adjudicated_n", "adjudicated answers"),
            ("gold_n", "gold checks"),
        )
        if compared(column)
    ]
    if not refs:
        return (
            "Nobody stands out on time per work; no answer could be compared yet (no work "
            "with two annotators' answers, no adjudication, no gold check)."
        )
    return f"Nobody stands out on agreement with {', '.join(refs)}, or on time per work."


def reliability_sentence(reliability: pd.DataFrame) -> str:
    """How many questions fall below each alpha threshold."""
    if reliability.empty:
        return "No labels yet: there is no agreement to measure."
    bad = int((reliability["level"] == "unreliable").sum())
    shaky = int((reliability["level"] == "tentative").sum())
    undefined = int((reliability["level"] == "undefined").sum())
    text = (
        f"{bad} of {len(reliability)} question(s) below alpha {ALPHA_TENTATIVE} "
        f"(unreliable), {shaky} between {ALPHA_TENTATIVE} and {ALPHA_RELIABLE} (tentative)"
    )
    if undefined:
        text += f", {undefined} undefined (too few works labelled twice, or no variation)"
    return text + "."


def no_validated_sentence(n_validated: int, n_items: int) -> str:
    """The empty state of every humans-vs-machines table."""
    return f"No validated works yet: {n_validated} of {n_items} works in this campaign."


def teachers_sentence(n_validated: int, n_items: int) -> str:
    """What the teachers' numbers rest on."""
    if n_validated == 0:
        return no_validated_sentence(n_validated, n_items)
    return (
        f"Precision and recall against {n_validated} validated works of {n_items}, "
        "with 95% Wilson intervals; each n is what the number rests on."
    )


def pairs_sentence(report: Mapping[str, Any]) -> str:
    """The empty state of the kappa matrix."""
    left = len(report.get("pairs_left_out") or [])
    if left:
        return (
            f"No pair of annotators has a defined kappa yet ({left} pair-question(s) share "
            f"fewer than {report.get('min_pair_n', 2)} works)."
        )
    return "No pair of annotators has labelled the same works yet."


def estimates_sentence(estimates: Mapping[str, Any]) -> str:
    """Why there is no frame estimate, or what the estimates rest on."""
    if not estimates.get("estimable"):
        return str(estimates.get("reason") or "No frame estimate for this campaign.")
    if not estimates.get("n_validated"):
        return (
            f"No validated sampled works yet: 0 of {estimates.get('n_sampled', 0)} sampled works."
        )
    return (
        f"{estimates['n_validated']} validated of {estimates['n_sampled']} sampled works, "
        f"frame of {estimates['population']} works; {estimates['assumption']}."
    )
