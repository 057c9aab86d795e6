"""The Monitor's kept label rows: extended by new labels, read again when they cannot be trusted
(both DBs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from sqlalchemy import Engine, delete, select

from db.engine import read_session, write_session
from db.models import Label
from labeling.reports.monitor import label_cache
from labeling.reports.monitor.data import label_rows
from labeling.review.campaigns import get_campaign
from labeling.review.labels import LabelSubmission, edit_label
from labeling.schema import Schema
from tests.factories import add_user
from tests.reports.test_monitor_status_parts import _answers, _campaign, _label


@pytest.fixture(autouse=True)
def _nothing_kept() -> Any:
    """Each test starts and ends with nothing kept."""
    label_cache.clear()
    yield
    label_cache.clear()


def _rows(engine: Engine, schema: Schema, cid: int) -> pd.DataFrame:
    """label_rows of the campaign (kept rows used when there are some)."""
    return label_rows(engine, schema, get_campaign(engine, cid))


def _afresh(engine: Engine, schema: Schema, cid: int) -> pd.DataFrame:
    """label_rows read from scratch, leaving what was kept as it was."""
    saved = dict(label_cache._KEPT), dict(label_cache.STATS)
    label_cache.clear()
    try:
        return _rows(engine, schema, cid)
    finally:
        label_cache._KEPT.update(saved[0])
        label_cache.STATS.update(saved[1])


def test_new_labels_and_edits_extend_the_kept_rows(
    engine: Engine, schema: Schema, seed_record: dict[str, Any], tmp_path: Path
) -> None:
    cid = _campaign(engine, schema, seed_record, tmp_path)
    a, b = add_user(engine, "a"), add_user(engine, "b")
    _label(engine, schema, cid, a, limit=3)
    first = _rows(engine, schema, cid)
    assert label_cache.STATS == {"full": 1, "extended": 0} and len(first) == 3
    _label(engine, schema, cid, b, limit=2)
    wid = first["work_id"].iloc[0]
    edit_label(
        engine,
        LabelSubmission(campaign_id=cid, work_id=wid, user_id=a,
                        answers=_answers(wid, wrong=True), schema_hash=schema.hash,
                        scores_visible=True, model_version="m", time_on_item_ms=900,
                        submission_id=f"edit:{wid}"),
        schema=schema,
    )  # fmt: skip
    later = _rows(engine, schema, cid)
    assert label_cache.STATS == {"full": 1, "extended": 1}
    assert len(later) == 5  # the edit replaces a's first version
    pd.testing.assert_frame_equal(later, _afresh(engine, schema, cid))
    assert later.loc[(later["work_id"] == wid) & (later["annotator"] == "a"), "version"].item() == 2
    again = _rows(engine, schema, cid)  # nothing new: the kept rows as they are
    assert label_cache.STATS == {"full": 1, "extended": 2}
    pd.testing.assert_frame_equal(again, later)


def test_a_label_gone_or_committed_late_makes_it_read_everything_again(
    engine: Engine, schema: Schema, seed_record: dict[str, Any], tmp_path: Path
) -> None:
    cid = _campaign(engine, schema, seed_record, tmp_path)
    a, b = add_user(engine, "a"), add_user(engine, "b")
    _label(engine, schema, cid, a, limit=4)
    _rows(engine, schema, cid)
    with read_session(engine) as session:
        ids = sorted(session.execute(select(Label.id).where(Label.campaign_id == cid)).scalars())
    with write_session(engine) as session:  # a smaller id disappears: the count tells
        session.execute(delete(Label).where(Label.id == ids[1]))
    gone = _rows(engine, schema, cid)
    assert label_cache.STATS == {"full": 2, "extended": 0} and len(gone) == 3
    # A label whose id is below the largest one read (committed late by another writer).
    _label(engine, schema, cid, b, limit=1)
    with write_session(engine) as session:
        newest = session.execute(select(Label).order_by(Label.id.desc()).limit(1)).scalar_one()
        newest.id = ids[1]  # the freed id, below the largest one kept
    late = _rows(engine, schema, cid)
    assert label_cache.STATS == {"full": 3, "extended": 0} and len(late) == 4
    pd.testing.assert_frame_equal(late, _afresh(engine, schema, cid))
