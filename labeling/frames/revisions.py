"""Frame revisions: which content of a work's record labels were made on, and that content.

A work's revision is the `record_hash` of its stored record. A re-import that changes the
content keeps the content it replaces in `predictions` under its revision (store.py), and a
label names the revision it was made on (`labels.revision`; NULL before migration 0020:
unknown). The reports and the export compare labels with the content they were made on:
for a work, the revision of its latest current label that names one (its validating labels
were made on it), when that is not the stored record's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, and_, func, select

from db.models import Label, Prediction, Work

_MARKS = 10_000  # ids per IN (...)


def revision_records(
    conn: Connection, wanted: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], dict[str, Any]]:
    """Kept content by (work, revision): the whole record kept with it (a record-shaped dict
    of its prediction and machine scores where only those were kept)."""
    wanted = set(wanted)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    ids = sorted({w for w, _ in wanted})
    for start in range(0, len(ids), _MARKS):
        part = ids[start : start + _MARKS]
        query = select(Prediction.work_id, Prediction.revision, Prediction.record,
                       Prediction.prediction, Prediction.machine_scores,
                       ).where(Prediction.work_id.in_(part),
                               Prediction.revision.is_not(None))  # fmt: skip
        for r in conn.execute(query):
            if (r.work_id, r.revision) in wanted:
                out[(r.work_id, r.revision)] = r.record or {
                    "prediction": r.prediction or {},
                    "machine_scores": r.machine_scores or {},
                }
    return out


def labelled_revisions(
    conn: Connection,
    *,
    campaign_id: int | None = None,
    conditions: Iterable[Any] = (),
) -> dict[str, tuple[str, dict[str, Any]]]:
    """{work: (revision, its kept record)} of the works whose latest current label naming a
    revision names one that is not the stored record's, and whose content is kept.

    campaign_id: only that campaign's labels (None: every campaign's). conditions: on Work,
    the works to look at (e.g. validated ones, a range of ids). Labels of an earlier
    revision are rare: the first query finds the works that have any, the rest reads only
    theirs.
    """
    query = (
        select(Label.work_id)
        .join(Work, Work.id == Label.work_id)
        .where(Label.revision.is_not(None), Label.revision != Work.record_hash,
               Label.skipped.is_(False), *conditions)
        .distinct()
    )  # fmt: skip
    if campaign_id is not None:
        query = query.where(Label.campaign_id == campaign_id)
    ids = sorted(conn.execute(query).scalars())
    if not ids:
        return {}
    latest: dict[str, tuple[str, str]] = {}  # work -> (revision, the stored record's)
    for start in range(0, len(ids), _MARKS):
        part = ids[start : start + _MARKS]
        latest.update(_latest_revisions(conn, part, campaign_id))
    wanted = {(w, rev) for w, (rev, now) in latest.items() if rev != now}
    kept = revision_records(conn, wanted)
    return {w: (rev, kept[(w, rev)]) for w, rev in sorted(wanted) if (w, rev) in kept}


def _latest_revisions(
    conn: Connection, ids: list[str], campaign_id: int | None
) -> dict[str, tuple[str, str]]:
    """{work: (revision of its latest current non-skipped label naming one, record_hash)}."""
    newest = (
        select(Label.campaign_id, Label.work_id, Label.user_id,
               func.max(Label.version).label("version"))
        .where(Label.work_id.in_(ids))
        .group_by(Label.campaign_id, Label.work_id, Label.user_id)
    )  # fmt: skip
    if campaign_id is not None:
        newest = newest.where(Label.campaign_id == campaign_id)
    cur = newest.subquery()
    query = (
        select(Label.work_id, Label.revision, Work.record_hash)
        .join(cur, and_(Label.campaign_id == cur.c.campaign_id, Label.work_id == cur.c.work_id,
                        Label.user_id == cur.c.user_id, Label.version == cur.c.version))
        .join(Work, Work.id == Label.work_id)
        .where(Label.skipped.is_(False), Label.revision.is_not(None))
        .order_by(Label.work_id, Label.created_at, Label.id)
    )  # fmt: skip
    out: dict[str, tuple[str, str]] = {}
    for work_id, revision, record_hash in conn.execute(query):
        if revision is not None:  # as the query has it
            out[work_id] = (revision, record_hash)  # the latest comes last
    return out
