"""Everything the Monitor page shows for one campaign: SQL that aggregates, then pure shaping.

The page calls monitor_view (or live_view for the self-refreshing top) and renders what comes
back. The reads here do in SQL what used to load every label into Python: counts per minute
for the progress line, and each current label's agreement with the validated answer computed
by the database (answers are stored normalised, multi-label lists in schema order, so equal
JSON text is equal answers; tests check this against monitoring.answer_matches).
Agreement and humans-vs-machines are the CLI's own reports (labeling agreement / machines),
so the page and the CLI give the same numbers.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np
import orjson
import pandas as pd
from sqlalchemy import Engine, Text, case, cast, func, select

from db.engine import read_session
from db.models import CampaignItem, Label, StatusEvent, User, Work
from labeling.reports import monitoring as mon
from labeling.reports.agreement import coded_long_answers
from labeling.reports.monitor.label_cache import campaign_labels
from labeling.review.campaigns import CampaignInfo
from labeling.review.validation import campaign_questions
from labeling.schema import Schema
from labeling.vocabulary import STATUS_DISPUTED, STATUS_VALIDATED

ROW_COLUMNS = [
    "work_id",
    "user_id",
    "annotator",
    "version",
    "minute",
    "skipped",
    "skip_reason",
    "flagged",
    "note",
    "time_on_item_ms",
    "gold_item",
]


GRAINS = {
    "minute": (16, "YYYY-MM-DD HH24:MI", "%Y-%m-%d %H:%M"),
    "hour": (13, "YYYY-MM-DD HH24", "%Y-%m-%d %H"),
    "day": (10, "YYYY-MM-DD", "%Y-%m-%d"),
}


def _truncated(column: Any, dialect: str, grain: str = "minute") -> Any:
    """A timestamp column as UTC text cut to the minute, hour or day, in SQL."""
    length, pg_format, _ = GRAINS[grain]
    if dialect == "postgresql":
        return func.to_char(func.timezone("UTC", column), pg_format)
    return func.substr(column, 1, length)  # SQLite keeps naive UTC text, ISO ordered


def _minute(column: Any, dialect: str) -> Any:
    """A timestamp column as "YYYY-MM-DD HH:MM" text in UTC, in SQL."""
    return _truncated(column, dialect, "minute")


def _at(texts: pd.Series, grain: str = "minute") -> pd.Series:
    """Truncated timestamp texts back to UTC timestamps."""
    return pd.to_datetime(texts, format=GRAINS[grain][2], utc=True)


def data_version(engine: Engine, campaign_id: int) -> tuple[int, ...]:
    """What the Monitor's numbers depend on: label count, newest label and status change, items.

    A cache keyed on this changes as soon as a label, a status or the queue does, and never
    on time alone.
    """
    with read_session(engine) as session:
        labels, newest = session.execute(
            select(func.count(), func.coalesce(func.max(Label.id), 0)).where(
                Label.campaign_id == campaign_id
            )
        ).one()
        event = session.execute(select(func.coalesce(func.max(StatusEvent.id), 0))).scalar_one()
        items = session.execute(
            select(func.count())
            .select_from(CampaignItem)
            .where(CampaignItem.campaign_id == campaign_id)
        ).scalar_one()
    return int(labels), int(newest), int(event), int(items)


def label_span(engine: Engine, campaign_id: int, since: datetime) -> dict[str, Any]:
    """First and last submission (first versions), the first counted label, labels counted,
    and those counted since `since`, in one pass over the campaign's labels."""
    counted = Label.skipped.is_(False)
    with read_session(engine) as session:
        first, last, first_counted, n, recent = session.execute(
            select(
                func.min(Label.created_at),
                func.max(Label.created_at),
                func.min(Label.created_at).filter(counted),
                func.count().filter(counted),
                func.count().filter(counted, Label.created_at >= since),
            ).where(Label.campaign_id == campaign_id, Label.version == 1)
        ).one()
    return {
        "first": first,
        "last": last,
        "first_counted": first_counted,
        "counted": int(n or 0),
        "recent": int(recent or 0),
    }


def activity(engine: Engine, campaign_id: int, grain: str = "minute") -> pd.DataFrame:
    """Counts per minute, hour or day: first labels and skips, works entering validated and
    disputed (the coarsest grain that the chart's bins still need: monitor_summary.sql_grain).

    Returns:
        at (UTC timestamp), kind (monitor_summary.MEASURES), n.
    """
    dialect = engine.dialect.name
    lm = _truncated(Label.created_at, dialect, grain).label("m")
    em = _truncated(StatusEvent.created_at, dialect, grain).label("m")
    labels = (
        select(lm, Label.skipped, func.count())
        .where(Label.campaign_id == campaign_id, Label.version == 1)
        .group_by(lm, Label.skipped)
    )
    events = (
        select(em, StatusEvent.to_status, func.count())
        .where(
            StatusEvent.campaign_id == campaign_id,
            StatusEvent.to_status.in_([STATUS_VALIDATED, STATUS_DISPUTED]),
            func.coalesce(StatusEvent.from_status, "") != StatusEvent.to_status,
        )
        .group_by(em, StatusEvent.to_status)
    )
    with read_session(engine) as session:
        rows = [(m, "skipped" if s else "labelled", n) for m, s, n in session.execute(labels)]
        rows += [
            (m, "validated" if t == STATUS_VALIDATED else "disputed", n)
            for m, t, n in session.execute(events)
        ]
    out = pd.DataFrame(rows, columns=["at", "kind", "n"])
    out["at"] = _at(out["at"], grain)
    return out


def remaining_labels(engine: Engine, campaign: CampaignInfo) -> tuple[int, int]:
    """Labels still wanted (overlap minus labels, over unfinished works) and works started."""
    wanted = campaign.overlap - CampaignItem.n_labels
    with read_session(engine) as session:
        remaining, started = session.execute(
            select(
                func.coalesce(func.sum(case((wanted > 0, wanted), else_=0)), 0),
                func.count().filter(CampaignItem.n_labels > 0),
            ).where(CampaignItem.campaign_id == campaign.id)
        ).one()
    return int(remaining), int(started)


def _same(a: Any, b: Any) -> bool:
    """Whether two answers are equal (multi-label lists compared as sets)."""
    if isinstance(a, list) and isinstance(b, list):
        return set(a) == set(b)
    return a == b


def _match_rows(questions: list[str], given: list[Any], truth: list[Any]) -> np.ndarray:
    """Per label and question: 1 equal to the validated answer, 0 not, NaN not compared.

    Answers come as JSON text. Stored answers are normalised (schema order), so equal texts
    are equal answers and need no parsing; a work's validated answer is parsed once.
    """
    out = np.full((len(given), len(questions)), np.nan)
    parsed: dict[str, dict[str, Any]] = {}
    present: dict[str, np.ndarray] = {}
    for i, (g, t) in enumerate(zip(given, truth, strict=True)):
        if t is None or g is None:
            continue
        if t not in parsed:
            parsed[t] = orjson.loads(t) or {}
            present[t] = np.array(
                [1.0 if parsed[t].get(q) is not None else np.nan for q in questions]
            )
        if g == t:
            out[i] = present[t]
            continue
        mine, final = orjson.loads(g) or {}, parsed[t]
        for j, q in enumerate(questions):
            a, b = mine.get(q), final.get(q)
            if a is not None and b is not None:
                out[i, j] = 1.0 if _same(a, b) else 0.0
    return out


def label_rows(
    engine: Engine,
    schema: Schema,
    campaign: CampaignInfo,
    truth: dict[str, str | None] | None = None,
) -> pd.DataFrame:
    """Each annotator's current label per work, with its match to the validated answer.

    Four plain reads (the campaign's labels, only the new ones when read before; users; gold
    items; validated answers through the works' covering index) joined in memory: a join per
    label in SQL costs more.
    truth: the validated works' final answers as JSON text when already read
    (evaluation.Validated.final_texts): then they are not read again.

    Returns:
        ROW_COLUMNS, created_at, answers (JSON text), and one column per question asked: 1
        (equal to the validated answer), 0 (different) or NaN (not validated, skipped, or
        either answer absent).
    """
    names = [q.name for q in campaign_questions(campaign, schema)]
    items = select(CampaignItem.work_id).where(CampaignItem.campaign_id == campaign.id)
    finals = select(Work.id, cast(Work.final_answers, Text)).where(
        Work.status == STATUS_VALIDATED, Work.id.in_(items)
    )
    with read_session(engine) as session:
        conn = session.connection()
        # The labels read before are kept (label_cache): only new ids are read.
        kept = campaign_labels(
            conn,
            str(engine.url),
            campaign.id,
            campaign.created_at,
            _minute(Label.created_at, engine.dialect.name),
        )
        users = dict(conn.execute(select(User.id, User.name)).all())
        gold = set(conn.execute(items.where(CampaignItem.is_gold)).scalars())
        if truth is None:
            truth = dict(conn.execute(finals).all()) if len(kept) else {}
    df = kept.drop(columns=["id"])  # a new frame: what is kept stays as it is
    # Each annotator's current version only (labels are only ever added); with no edit at all
    # every row is current (one row per work, annotator and version in a campaign).
    if (df["version"] > 1).any():
        df = (
            df.sort_values("version", kind="stable")
            .drop_duplicates(["work_id", "user_id"], keep="last")
            .sort_index()
        )
    df["annotator"] = df["user_id"].map(users).astype(object)
    df["gold_item"] = df["work_id"].isin(gold).astype(bool)
    for c in ("skipped", "flagged"):
        df[c] = df[c].astype(bool)
    df["created_at"] = _at(df["minute"])
    matches = _match_rows(names, list(df["answers"]), [truth.get(w) for w in df["work_id"]])
    df = df[[*ROW_COLUMNS, "created_at", "answers"]].reset_index(drop=True)
    for j, name in enumerate(names):
        df[name] = matches[:, j]
    df.attrs["questions"] = names
    df.attrs[mon.CURRENT] = True
    return df


def agreement_labels(rows: pd.DataFrame) -> pd.DataFrame:
    """label_rows as the agreement report's long table (reports.long_answers), without reading
    the labels again: current, not skipped, ordered by work and annotator like the CLI."""
    names = rows.attrs.get("questions", [])
    keep = ~rows["skipped"].to_numpy(dtype=bool)
    plain_works = rows["work_id"].to_numpy(dtype=object)[keep]
    plain_who = rows["annotator"].to_numpy(dtype=object)[keep]
    works, who = _coded(plain_works), _coded(plain_who)
    # Ordered by work, then annotator (missing names last), stable: a lexsort of each value's
    # rank, which orders like sort_values on the two text columns at a fraction of its cost.
    order = np.lexsort((_ranks(who), _ranks(works)))
    # Equal answers are common (a few thousand texts for 100,000 labels): parse each once.
    codes, texts = pd.factorize(rows["answers"].to_numpy(dtype=object)[keep][order])
    # The categoricals go on as they are (coded once), unless a name is missing.
    return coded_long_answers(
        works[order],
        who[order] if (who.codes >= 0).all() else plain_who[order],
        codes,
        [orjson.loads(t) or {} for t in texts],
        names,
    )


def _coded(values: np.ndarray) -> pd.Categorical:
    """Values as a categorical with sorted categories (-1 codes where missing)."""
    codes, uniques = pd.factorize(values, sort=True)
    return pd.Categorical.from_codes(codes, categories=uniques)


def _ranks(values: pd.Categorical) -> np.ndarray:
    """Each value's rank among the distinct values, missing values after the rest."""
    codes = np.asarray(values.codes)
    return np.where(codes < 0, len(values.categories), codes)


def matches_of(rows: pd.DataFrame) -> pd.DataFrame:
    """label_rows in monitoring's long form (MATCH_COLUMNS): one row per compared answer."""
    names = rows.attrs.get("questions", [])
    if rows.empty or not names:
        return pd.DataFrame(columns=mon.MATCH_COLUMNS)
    # melt and dropna by hand: question by question, the compared rows in order.
    compared = ~np.isnan(rows[names].to_numpy(dtype=float))
    q, r = np.nonzero(compared.T)
    # Text columns kept as Python objects: inferring pandas' string dtype costs 0.1 s a column.
    return pd.DataFrame(
        {
            "annotator": pd.Series(rows["annotator"].to_numpy(dtype=object)[r], dtype=object),
            "work_id": pd.Series(rows["work_id"].to_numpy(dtype=object)[r], dtype=object),
            "question": pd.Series(np.asarray(names, dtype=object)[q], dtype=object),
            "created_at": rows["created_at"].iloc[r].reset_index(drop=True),
            "gold_item": rows["gold_item"].to_numpy(dtype=bool)[r],
            "match": rows[names].to_numpy(dtype=float)[r, q].astype(bool),
        }
    )[mon.MATCH_COLUMNS]
