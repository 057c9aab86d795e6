"""Report tables: agreement, humans-vs-machines and estimate reports as DataFrames; CI text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd


def agreement_table(report: Mapping[str, Any]) -> pd.DataFrame:
    """Agreement per question (label "") and per label of multi questions, one row each.

    Args:
        report: an agreement report (labeling.reports.agreement.agreement_for).
    """
    rows = []
    for q, entry in (report.get("questions") or {}).items():
        for label, e in [("", entry), *(entry.get("labels") or {}).items()]:
            a_ci = e.get("alpha_ci") or [None, None]
            k_ci = e.get("kappa_ci") or [None, None]
            rows.append(
                {
                    "question": q,
                    "label": label,
                    "alpha": e.get("krippendorff_alpha"),
                    "alpha_lo": a_ci[0],
                    "alpha_hi": a_ci[1],
                    "fleiss_kappa": e.get("fleiss_kappa"),
                    "kappa_lo": k_ci[0],
                    "kappa_hi": k_ci[1],
                    "gwet_ac1": e.get("gwet_ac1"),
                    "percent_agreement": e.get("percent_agreement"),
                    "n_works": e.get("n_works"),
                    "n_labels": e.get("n_labels"),
                }
            )
    cols = [
        "question",
        "label",
        "alpha",
        "alpha_lo",
        "alpha_hi",
        "fleiss_kappa",
        "kappa_lo",
        "kappa_hi",
        "gwet_ac1",
        "percent_agreement",
        "n_works",
        "n_labels",
    ]
    return pd.DataFrame(rows, columns=cols)


def pairs_table(report: Mapping[str, Any], question: str | None = None) -> pd.DataFrame:
    """Cohen's kappa per annotator pair, both ways round (for a heatmap): a, b, kappa, n.

    Args:
        report: an agreement report with "pairs".
        question: one question; None averages a pair's kappas over questions, weighted by n.
    """
    cols = ["a", "b", "kappa", "n"]
    pairs = pd.DataFrame(
        report.get("pairs") or [], columns=["a", "b", "question", "n", "cohen_kappa"]
    )
    if question is not None:
        pairs = pairs[pairs["question"] == question]
    pairs = pairs.dropna(subset=["cohen_kappa"])
    if pairs.empty:
        return pd.DataFrame(columns=cols)
    pairs = pairs.assign(w=pairs["cohen_kappa"] * pairs["n"])
    grouped = pairs.groupby(["a", "b"], as_index=False).agg(w=("w", "sum"), n=("n", "sum"))
    grouped["kappa"] = grouped["w"] / grouped["n"]
    both = pd.concat([grouped, grouped.rename(columns={"a": "b", "b": "a"})], ignore_index=True)
    return both[cols].sort_values(["a", "b"], ignore_index=True)


def machine_table(report: Mapping[str, Any]) -> pd.DataFrame:
    """Precision, recall (Wilson intervals, n) and F1 per question, system and label.

    Args:
        report: a humans-vs-machines report (labeling.reports.evaluation.machine_report).
    """
    rows = []
    for q, entry in (report.get("questions") or {}).items():
        for system, s in (entry.get("systems") or {}).items():
            for label, m in (s.get("labels") or {}).items():
                p, r = m.get("precision") or {}, m.get("recall") or {}
                rows.append(
                    {
                        "question": q,
                        "system": system,
                        "label": label,
                        "n": m.get("n"),
                        "precision": p.get("estimate"),
                        "precision_lo": p.get("lo"),
                        "precision_hi": p.get("hi"),
                        "precision_n": p.get("n"),
                        "recall": r.get("estimate"),
                        "recall_lo": r.get("lo"),
                        "recall_hi": r.get("hi"),
                        "recall_n": r.get("n"),
                        "f1": m.get("f1"),
                        "f1_n": m.get("f1_n"),
                    }
                )
    cols = [
        "question",
        "system",
        "label",
        "n",
        "precision",
        "precision_lo",
        "precision_hi",
        "precision_n",
        "recall",
        "recall_lo",
        "recall_hi",
        "recall_n",
        "f1",
        "f1_n",
    ]
    return pd.DataFrame(rows, columns=cols)


def brier_table(report: Mapping[str, Any]) -> pd.DataFrame:
    """Brier score of each teacher's scores per question (pooled over labels) and label, with n.

    Args:
        report: a humans-vs-machines report (labeling.reports.evaluation.machine_report).
    """
    rows = []
    for q, entry in (report.get("questions") or {}).items():
        for teacher, cal in (entry.get("calibration") or {}).items():
            items = [("(all labels)", cal.get("pooled") or {}), *(cal.get("labels") or {}).items()]
            for label, rel in items:
                rows.append(
                    {
                        "question": q,
                        "teacher": teacher,
                        "label": label,
                        "brier": rel.get("brier"),
                        "n": rel.get("n"),
                        "positives": rel.get("positives"),
                    }
                )
    return pd.DataFrame(rows, columns=["question", "teacher", "label", "brier", "n", "positives"])


def reliability_table(report: Mapping[str, Any]) -> pd.DataFrame:
    """Reliability bins of each teacher's scores per question (pooled over labels), with n.

    Args:
        report: a humans-vs-machines report (labeling.reports.evaluation.machine_report).
    """
    rows = []
    for q, entry in (report.get("questions") or {}).items():
        for teacher, cal in (entry.get("calibration") or {}).items():
            for b in (cal.get("pooled") or {}).get("bins") or []:
                rows.append({"question": q, "teacher": teacher, **b})
    cols = ["question", "teacher", "bin_lo", "bin_hi", "n", "mean_score", "observed", "lo", "hi"]
    return pd.DataFrame(rows, columns=cols)


def confusion_tables(report: Mapping[str, Any]) -> dict[tuple[str, str], pd.DataFrame]:
    """Confusion matrices (rows human, columns machine call) of single-choice questions.

    Args:
        report: a humans-vs-machines report (labeling.reports.evaluation.machine_report).
    """
    out: dict[tuple[str, str], pd.DataFrame] = {}
    for q, entry in (report.get("questions") or {}).items():
        for system, s in (entry.get("systems") or {}).items():
            conf = s.get("confusion")
            if conf and conf.get("n"):
                out[(q, system)] = pd.DataFrame(
                    conf["matrix"], index=conf["rows"], columns=conf["columns"]
                )
    return out


def estimate_table(estimates: Mapping[str, Any]) -> pd.DataFrame:
    """Frame prevalence per question and label with its interval and n (empty when refused).

    Args:
        estimates: a frame estimates report (labeling.reports.evaluation.frame_estimates).
    """
    rows = []
    for q, entry in (estimates.get("questions") or {}).items():
        for label, e in (entry.get("labels") or {}).items():
            o = e.get("overall") or {}
            rows.append(
                {
                    "question": q,
                    "label": label,
                    "prevalence": o.get("estimate"),
                    "lo": o.get("lo"),
                    "hi": o.get("hi"),
                    "n": o.get("n"),
                    "method": o.get("method"),
                }
            )
    return pd.DataFrame(
        rows, columns=["question", "label", "prevalence", "lo", "hi", "n", "method"]
    )


def fmt_ci(estimate: float | None, lo: float | None, hi: float | None, digits: int = 2) -> str:
    """An estimate with its interval as text ("0.82 [0.70, 0.90]"); a dash when undefined."""
    if estimate is None or pd.isna(estimate):
        return "—"
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return f"{estimate:.{digits}f}"
    return f"{estimate:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def with_ci(df: pd.DataFrame, name: str, est: str, lo: str, hi: str) -> pd.DataFrame:
    """A copy of df with a text column `name` holding est [lo, hi] and the three columns dropped.

    Args:
        df: a table with estimate and interval columns.
        name: the new column's name.
        est: the estimate column.
        lo: the lower bound column.
        hi: the upper bound column.
    """
    out = df.copy()
    position = list(out.columns).index(est)
    text = [fmt_ci(e, a, b) for e, a, b in zip(out[est], out[lo], out[hi], strict=True)]
    out = out.drop(columns=[est, lo, hi])
    out.insert(min(position, len(out.columns)), name, text)
    return out
