"""Numbers for the lead's monitoring page: progress, annotators, reasons, drift.

Pure functions reshape DataFrames (each number next to the n it rests on, proportions with
Wilson intervals); the loaders at the end are thin SQL. Agreement "with the validated answer"
compares an annotator's current answer per question with the work's final answer: on works
validated by the rule that annotator's label helped make the answer, so the share is an upper
bound there; gold items (mixed into the queue, validated elsewhere) are counted separately.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from sqlalchemy import Engine, select

from db.engine import read_session
from db.models import CampaignItem, Label, StatusEvent, User, Work
from labeling.stats.estimates import wilson
from labeling.stats.machine_arrays import wilson_many
from labeling.vocabulary import STATUS_DISPUTED, STATUS_VALIDATED

ALL_ANNOTATORS = "all annotators"
LABEL_COLUMNS = [
    "label_id",
    "work_id",
    "user_id",
    "annotator",
    "version",
    "answers",
    "skipped",
    "skip_reason",
    "flagged",
    "note",
    "time_on_item_ms",
    "created_at",
    "gold_item",
]
EVENT_COLUMNS = ["work_id", "from_status", "to_status", "created_at"]
PROGRESS_COLUMNS = ["period", "labelled", "skipped", "validated", "disputed"]
MATCH_COLUMNS = ["annotator", "work_id", "question", "created_at", "gold_item", "match"]


def _periods(stamps: pd.Series, freq: str) -> pd.Series:
    """The start (naive UTC) of the period of each timestamp."""
    ts = pd.to_datetime(stamps, utc=True).dt.tz_convert(None)
    return ts.dt.to_period(freq).dt.start_time


def _same(a: Any, b: Any) -> bool:
    """Whether two answers are equal (multi-label lists compared as sets)."""
    if isinstance(a, list | tuple | set) and isinstance(b, list | tuple | set):
        return set(a) == set(b)
    return a == b


CURRENT = "current_only"  # attrs flag: the rows are already each annotator's current label


def latest_only(labels: pd.DataFrame) -> pd.DataFrame:
    """Each annotator's current (highest) version per work."""
    if labels.empty or labels.attrs.get(CURRENT):
        return labels  # the Monitor's label_rows hold current versions only: no regrouping
    top = labels.groupby(["work_id", "user_id"])["version"].transform("max")
    return labels[labels["version"] == top]


def progress_table(labels: pd.DataFrame, events: pd.DataFrame, freq: str = "D") -> pd.DataFrame:
    """Per period: works labelled and skipped (first submissions), validated and disputed.

    Args:
        labels: label versions (LABEL_COLUMNS; only version and skipped and created_at used).
        events: status events (EVENT_COLUMNS); validated/disputed count entries into that
            status (a re-adjudication of a validated work is not counted again).
        freq: a pandas period alias ("D" days, "W" weeks, "h" hours).

    Returns:
        PROGRESS_COLUMNS plus cumulative "<column>_total" columns, one row per period with
        any activity, oldest first.
    """
    parts = []
    if not labels.empty:
        first = labels[labels["version"] == 1]
        kind = first["skipped"].map({True: "skipped", False: "labelled"})
        parts.append(pd.DataFrame({"period": _periods(first["created_at"], freq), "kind": kind}))
    if not events.empty:
        ev = events[
            (events["to_status"] != events["from_status"])
            & events["to_status"].isin([STATUS_VALIDATED, STATUS_DISPUTED])
        ]
        kind = ev["to_status"].map({STATUS_VALIDATED: "validated", STATUS_DISPUTED: "disputed"})
        parts.append(pd.DataFrame({"period": _periods(ev["created_at"], freq), "kind": kind}))
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame(columns=PROGRESS_COLUMNS + [f"{c}_total" for c in PROGRESS_COLUMNS[1:]])
    both = pd.concat(parts, ignore_index=True)
    table = (
        both.groupby(["period", "kind"])
        .size()
        .unstack("kind")
        .reindex(columns=PROGRESS_COLUMNS[1:])
        .fillna(0)
        .astype(int)
        .sort_index()
        .reset_index()
    )
    table.columns.name = None
    for col in PROGRESS_COLUMNS[1:]:
        table[f"{col}_total"] = table[col].cumsum()
    return table


def progress_long(table: pd.DataFrame, cumulative: bool = True) -> pd.DataFrame:
    """The progress table in long form (period, measure, works) for a line chart."""
    cols = [f"{c}_total" for c in PROGRESS_COLUMNS[1:]] if cumulative else PROGRESS_COLUMNS[1:]
    if table.empty:
        return pd.DataFrame(columns=["period", "measure", "works"])
    long = table.melt(id_vars="period", value_vars=cols, var_name="measure", value_name="works")
    long["measure"] = long["measure"].str.removesuffix("_total")
    return long


def answer_matches(
    labels: pd.DataFrame,
    finals: Mapping[str, Mapping[str, Any]],
    questions: Sequence[str] | None = None,
) -> pd.DataFrame:
    """One row per (current label, question) on a validated work: does it equal the final answer.

    Args:
        labels: label versions (LABEL_COLUMNS); skipped and superseded versions are ignored.
        finals: work id -> final answers of the validated works.
        questions: the questions to compare (None = every question in the final answers).
    """
    rows = []
    current = latest_only(labels)
    if not current.empty:
        current = current[~current["skipped"] & current["work_id"].isin(list(finals))]
    for r in current.itertuples(index=False):
        final = finals[r.work_id]
        for q, truth in final.items():
            if (questions is not None and q not in questions) or truth is None:
                continue
            given = (r.answers or {}).get(q)
            if given is None:
                continue
            rows.append(
                (r.annotator, r.work_id, q, r.created_at, bool(r.gold_item), _same(given, truth))
            )
    return pd.DataFrame(rows, columns=MATCH_COLUMNS).astype({"gold_item": bool, "match": bool})


def share(matches: pd.Series) -> dict[str, Any]:
    """Share of True with its Wilson 95% interval and n."""
    n = int(len(matches))
    k = int(matches.sum()) if n else 0
    lo, hi = wilson(k, n)
    return {"share": k / n if n else None, "lo": lo, "hi": hi, "n": n}


def agreement_by(matches: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Share of answers equal to the validated answer per group, with Wilson interval and n.

    Args:
        matches: rows of answer_matches.
        by: the grouping columns (e.g. ["annotator"], ["annotator", "question"]).
    """
    cols = [*by, "share", "lo", "hi", "n"]
    if matches.empty:
        return pd.DataFrame(columns=cols)
    # One count per group and one interval call for all of them (a loop over the groups
    # cost 0.1 s of the large Monitor bench): the numbers of share() per group.
    counts = (
        matches["match"]
        .astype(bool)
        .groupby([matches[c] for c in by], sort=True)
        .agg(["sum", "size"])
    )
    k, n = counts["sum"].to_numpy(dtype=int), counts["size"].to_numpy(dtype=int)
    intervals = wilson_many(k, n)
    out = counts.index.to_frame(index=False)
    out.columns = list(by)
    out["share"] = [int(a) / int(b) for a, b in zip(k, n, strict=True)]
    out["lo"] = [lo for lo, _ in intervals]
    out["hi"] = [hi for _, hi in intervals]
    out["n"] = n.astype(int)
    return out[cols]


def annotator_table(
    labels: pd.DataFrame,
    finals: Mapping[str, Mapping[str, Any]],
    questions: Sequence[str] | None = None,
    *,
    matches: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per annotator: volume, time, throughput, agreement with the validated answer, gold accuracy.

    Args:
        labels: label versions (LABEL_COLUMNS).
        finals: work id -> final answers of the validated works.
        questions: the questions compared (None = all).
        matches: answer_matches rows already computed (e.g. by the database); then finals
            and questions are not used.

    Returns:
        annotator, labels, skips, flags, median_seconds (+ time_n: labels with a time),
        active_hours (distinct clock hours with a submission), per_hour (labels and skips per
        active hour), agree/agree_lo/agree_hi/agree_n (answers equal to the validated one on
        non-gold works; n counts question answers), gold/gold_lo/gold_hi/gold_n, gold_works.
    """
    cols = [
        "annotator",
        "labels",
        "skips",
        "flags",
        "median_seconds",
        "time_n",
        "active_hours",
        "per_hour",
        "agree",
        "agree_lo",
        "agree_hi",
        "agree_n",
        "gold",
        "gold_lo",
        "gold_hi",
        "gold_n",
        "gold_works",
    ]
    if labels.empty:
        return pd.DataFrame(columns=cols)
    current = latest_only(labels)
    if matches is None:
        matches = answer_matches(labels, finals, questions)
    hours = pd.to_datetime(labels["created_at"], utc=True).dt.floor("h")
    # Grouped once: a mask per annotator over every label and match costs more with many.
    active_hours = hours.groupby(labels["annotator"].to_numpy()).nunique()
    by_who = {who: m for who, m in matches.groupby("annotator", sort=False)}
    no_match = matches.iloc[0:0]
    rows = []
    for who, mine in current.groupby("annotator", sort=True):
        times = mine["time_on_item_ms"].dropna()
        active = int(active_hours.get(who, 0))
        m = by_who.get(who, no_match)
        plain = share(m.loc[~m["gold_item"], "match"])
        gold_rows = m[m["gold_item"]]
        gold = share(gold_rows["match"])
        rows.append(
            {
                "annotator": who,
                "labels": int((~mine["skipped"]).sum()),
                "skips": int(mine["skipped"].sum()),
                "flags": int(mine["flagged"].sum()),
                "median_seconds": float(times.median()) / 1000 if len(times) else None,
                "time_n": int(len(times)),
                "active_hours": active,
                "per_hour": len(mine) / active if active else None,
                "agree": plain["share"],
                "agree_lo": plain["lo"],
                "agree_hi": plain["hi"],
                "agree_n": plain["n"],
                "gold": gold["share"],
                "gold_lo": gold["lo"],
                "gold_hi": gold["hi"],
                "gold_n": gold["n"],
                "gold_works": int(gold_rows["work_id"].nunique()),
            }
        )
    return pd.DataFrame(rows, columns=cols)


def reasons_table(labels: pd.DataFrame) -> pd.DataFrame:
    """Skip reasons and flag notes of the current labels: kind, reason, n, of (all labels), share.

    Args:
        labels: label versions (LABEL_COLUMNS); only each annotator's current version counts.
    """
    cols = ["kind", "reason", "n", "of", "share"]
    current = latest_only(labels)
    if current.empty:
        return pd.DataFrame(columns=cols)
    total = len(current)
    skips = current[current["skipped"]]["skip_reason"].fillna("(no reason)")
    flags = current[current["flagged"]]["note"].fillna("").str.strip().replace("", "(no note)")
    rows = [("skip", reason, n) for reason, n in skips.value_counts().items()]
    rows += [("flag", note, n) for note, n in flags.value_counts().items()]
    out = pd.DataFrame(rows, columns=["kind", "reason", "n"])
    out["n"] = out["n"].astype(int)
    out["of"] = total
    out["share"] = out["n"] / total
    return out.sort_values(
        ["kind", "n", "reason"], ascending=[False, False, True], ignore_index=True
    )


def drift_table(matches: pd.DataFrame, freq: str = "W") -> pd.DataFrame:
    """Agreement with the validated answer per period, for everyone and per annotator.

    Args:
        matches: rows of answer_matches (gold items are left out).
        freq: a pandas period alias ("W" weeks, "D" days).

    Returns:
        period, annotator (ALL_ANNOTATORS for the pooled row), share, lo, hi, n.
    """
    cols = ["period", "annotator", "share", "lo", "hi", "n"]
    if matches.empty:
        return pd.DataFrame(columns=cols)
    m = matches[~matches["gold_item"]].copy()
    if m.empty:
        return pd.DataFrame(columns=cols)
    m["period"] = _periods(m["created_at"], freq)
    pooled = agreement_by(m, ["period"]).assign(annotator=ALL_ANNOTATORS)
    each = agreement_by(m, ["period", "annotator"])
    return pd.concat([pooled[cols], each[cols]], ignore_index=True)


# ------------------------------------------------------------------ loaders (thin)


def load_labels(engine: Engine, campaign_id: int) -> pd.DataFrame:
    """Every label version of a campaign with annotator names and the gold flag of its item.

    Args:
        engine: the database.
        campaign_id: the campaign.
    """
    query = (
        select(
            Label.id,
            Label.work_id,
            Label.user_id,
            User.name,
            Label.version,
            Label.answers,
            Label.skipped,
            Label.skip_reason,
            Label.flagged,
            Label.note,
            Label.time_on_item_ms,
            Label.created_at,
            CampaignItem.is_gold,
        )
        .join(User, User.id == Label.user_id)
        .outerjoin(
            CampaignItem,
            (CampaignItem.campaign_id == Label.campaign_id)
            & (CampaignItem.work_id == Label.work_id),
        )
        .where(Label.campaign_id == campaign_id)
        .order_by(Label.id)
    )
    with read_session(engine) as session:
        rows = session.execute(query).all()
    df = pd.DataFrame(rows, columns=LABEL_COLUMNS)
    df["gold_item"] = df["gold_item"].fillna(False).astype(bool)
    df["time_on_item_ms"] = pd.to_numeric(df["time_on_item_ms"], errors="coerce")
    return df


def load_events(engine: Engine, campaign_id: int) -> pd.DataFrame:
    """The status events recorded under a campaign.

    Args:
        engine: the database.
        campaign_id: the campaign.
    """
    query = (
        select(
            StatusEvent.work_id,
            StatusEvent.from_status,
            StatusEvent.to_status,
            StatusEvent.created_at,
        )
        .where(StatusEvent.campaign_id == campaign_id)
        .order_by(StatusEvent.id)
    )
    with read_session(engine) as session:
        return pd.DataFrame(session.execute(query).all(), columns=EVENT_COLUMNS)


def load_finals(engine: Engine, campaign_id: int) -> dict[str, dict[str, Any]]:
    """Final answers of the validated works queued in a campaign (gold items included).

    Args:
        engine: the database.
        campaign_id: the campaign.
    """
    query = (
        select(Work.id, Work.final_answers)
        .join(CampaignItem, CampaignItem.work_id == Work.id)
        .where(CampaignItem.campaign_id == campaign_id, Work.status == STATUS_VALIDATED)
    )
    with read_session(engine) as session:
        return {wid: dict(fa) for wid, fa in session.execute(query) if fa}


def progress_over_time(engine: Engine, campaign_id: int, freq: str = "D") -> pd.DataFrame:
    """Works labelled, skipped, validated and disputed per period in a campaign (progress_table).

    Args:
        engine: the database.
        campaign_id: the campaign.
        freq: a pandas period alias ("D" days, "W" weeks).
    """
    return progress_table(load_labels(engine, campaign_id), load_events(engine, campaign_id), freq)


def annotator_stats(engine: Engine, campaign_id: int) -> pd.DataFrame:
    """Per-annotator volume, time, throughput, agreement and gold accuracy (annotator_table).

    Args:
        engine: the database.
        campaign_id: the campaign.
    """
    return annotator_table(load_labels(engine, campaign_id), load_finals(engine, campaign_id))


def skip_and_flag_reasons(engine: Engine, campaign_id: int) -> pd.DataFrame:
    """Skip reasons and flag notes with counts (reasons_table).

    Args:
        engine: the database.
        campaign_id: the campaign.
    """
    return reasons_table(load_labels(engine, campaign_id))


def drift(engine: Engine, campaign_id: int, freq: str = "W") -> pd.DataFrame:
    """Agreement with the validated answer by period (drift_table).

    Args:
        engine: the database.
        campaign_id: the campaign.
        freq: a pandas period alias ("W" weeks, "D" days).
    """
    labels = load_labels(engine, campaign_id)
    return drift_table(answer_matches(labels, load_finals(engine, campaign_id)), freq)
