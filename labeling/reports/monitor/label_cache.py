"""A campaign's label rows as read from the database, kept per process and extended by new ids.

Labels are only ever added (an edit is a new version), so the Monitor need not read 100,000
labels again after each new one: it keeps the rows it read (in id order) and reads those with
a larger id. What it keeps is checked on every read against the campaign's label count and
largest id, in the same transaction: a label committed late with a smaller id (concurrent
writers on PostgreSQL), a deleted label or a recreated database gives another count or
largest id, and then every label is read again. Only the labels' own columns are kept;
users, gold items and validated answers are joined afresh by the caller.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pandas as pd
from sqlalchemy import Connection, Text, cast, func, select

from db.fetch import driver_rows
from db.models import Label

CACHE_SIZE = 8  # campaigns kept per process
COLUMNS = [
    "id",
    "work_id",
    "user_id",
    "version",
    "minute",
    "skipped",
    "skip_reason",
    "flagged",
    "note",
    "time_on_item_ms",
    "answers",
]


@dataclass
class _Kept:
    """The rows read so far: their frame, count and largest id."""

    frame: pd.DataFrame
    n: int
    last: int


_KEPT: OrderedDict[tuple[str, int, datetime], _Kept] = OrderedDict()
_LOCK = threading.Lock()
STATS = {"full": 0, "extended": 0}  # reads of every label, reads of new ones only (tests)


def clear() -> None:
    """Forget every kept campaign (tests, the bench's cold figure)."""
    with _LOCK:
        _KEPT.clear()
        STATS.update(full=0, extended=0)


def _frame(rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    """Driver rows as a frame of Python objects, numbers as numbers."""
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(COLUMNS)
    df = pd.DataFrame(
        {c: pd.Series(v, dtype=object) for c, v in zip(COLUMNS, columns, strict=True)}
    )
    for c in ("id", "time_on_item_ms", "user_id", "version"):
        df[c] = pd.to_numeric(df[c], errors="coerce")
    return df


def campaign_labels(
    conn: Connection, url: str, campaign_id: int, created_at: datetime, minute: Any
) -> pd.DataFrame:
    """Every label of a campaign (COLUMNS, in id order), reading only ids not read before.

    Args:
        conn: a connection inside the caller's read transaction.
        url: the database (with campaign_id and created_at, the key of what is kept).
        campaign_id: the campaign.
        created_at: the campaign's creation time (a recreated campaign is another one).
        minute: the SQL expression of a label's minute (monitor.data._minute).
    """
    key = (url, campaign_id, created_at)
    n, last = conn.execute(
        select(func.count(), func.coalesce(func.max(Label.id), 0)).where(
            Label.campaign_id == campaign_id
        )
    ).one()
    with _LOCK:
        kept = _KEPT.get(key)
    query = (
        select(
            Label.id,
            Label.work_id,
            Label.user_id,
            Label.version,
            minute,
            Label.skipped,
            Label.skip_reason,
            Label.flagged,
            Label.note,
            Label.time_on_item_ms,
            cast(Label.answers, Text),
        )
        .where(Label.campaign_id == campaign_id)
        .order_by(Label.id)
    )
    frame = None
    if kept is not None and kept.n <= n and kept.last <= last:
        new = driver_rows(conn, query.where(Label.id > kept.last)) if last > kept.last else []
        if kept.n + len(new) == n and (not new or new[-1][0] == last):
            frame = pd.concat([kept.frame, _frame(new)], ignore_index=True) if new else kept.frame
            STATS["extended"] += 1
    if frame is None:
        frame = _frame(driver_rows(conn, query))
        STATS["full"] += 1
        if len(frame) != n or (n and frame["id"].iloc[-1] != last):
            return frame  # labels changed between the two reads: keep nothing
    with _LOCK:
        _KEPT[key] = _Kept(frame, int(n), int(last))
        _KEPT.move_to_end(key)
        while len(_KEPT) > CACHE_SIZE:
            _KEPT.popitem(last=False)
    return frame
