"""The Monitor's database reads: SQL aggregation equals the pandas reference, live counts, views."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pandas as pd
import pytest
from sqlalchemy import Engine, update

from db.engine import write_session
from db.models import CampaignItem, utcnow
from labeling.reports import monitoring as mon
from labeling.reports.monitor import data as md
from labeling.reports.monitor.view import live_view, monitor_view
from labeling.review.campaigns import campaign_progress, create_campaign, get_campaign
from labeling.review.labels import LabelSubmission, edit_label, submit_label
from labeling.review.queue import claim_next
from labeling.schema import Schema
from tests.factories import add_user, add_works, answers_for
from tests.reports.test_monitoring import _label, disputed  # noqa: F401 - fixture


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    cols = ["annotator", "work_id", "question", "gold_item", "match"]
    return df[cols].sort_values(cols[:3]).reset_index(drop=True)


def _claim_and_label(
    engine: Engine, schema: Schema, cid: int, uid: int, answers: dict[str, Any], **kw: Any
) -> str:
    """Claim the user's next work and submit these answers (or a skip)."""
    claim = claim_next(engine, cid, uid)
    assert claim is not None
    submit_label(
        engine,
        LabelSubmission(
            campaign_id=cid,
            work_id=claim.work_id,
            user_id=uid,
            answers=answers,
            schema_hash=schema.hash,
            scores_visible=False,
            model_version="m",
            time_on_item_ms=kw.pop("ms", 2000),
            submission_id=f"{cid}-{uid}-{claim.work_id}",
            **kw,
        ),
        schema=schema,
    )
    return claim.work_id


@pytest.fixture
def rich(engine: Engine, schema: Schema) -> dict[str, Any]:
    """Campaign m (overlap 3, majority): a dissenter, multi-label sets, an edit, a skip, gold."""
    add_works(engine, 6)
    a, b, c = (add_user(engine, n) for n in ("ann", "bob", "cid"))
    camp = create_campaign(engine, name="m", overlap=3, rule="majority")
    cats = schema.questions[0]
    assert cats.kind == "multi"
    two = dict(answers_for(schema, 0), **{cats.name: [cats.labels[2], cats.labels[0]]})
    same = dict(answers_for(schema, 0), **{cats.name: [cats.labels[0], cats.labels[2]]})
    w1 = _claim_and_label(engine, schema, camp.id, a, answers_for(schema, 0))
    _claim_and_label(engine, schema, camp.id, b, answers_for(schema, 0), ms=3000)
    _claim_and_label(engine, schema, camp.id, c, answers_for(schema, 1), ms=9000)
    w2 = _claim_and_label(engine, schema, camp.id, a, two)
    _claim_and_label(engine, schema, camp.id, b, same, flagged=True, note="odd")
    _claim_and_label(engine, schema, camp.id, c, answers_for(schema, 2))
    _claim_and_label(engine, schema, camp.id, a, {}, skipped=True, skip_reason="no_abstract")
    # cid edits W2 to agree on every question but the multi-label one
    edit_label(
        engine,
        LabelSubmission(
            campaign_id=camp.id,
            work_id=w2,
            user_id=c,
            answers=dict(answers_for(schema, 0), **{cats.name: [cats.labels[1]]}),
            schema_hash=schema.hash,
            scores_visible=False,
            model_version="m",
            time_on_item_ms=900,
            submission_id="edit-1",
        ),
        schema=schema,
    )
    with write_session(engine) as session:  # W1 counts as a gold check in this campaign
        session.execute(
            update(CampaignItem)
            .where(CampaignItem.campaign_id == camp.id, CampaignItem.work_id == w1)
            .values(is_gold=True)
        )
    return {"engine": engine, "camp": camp, "w1": w1, "w2": w2}


def test_sql_matches_equal_the_python_reference(rich: dict[str, Any], schema: Schema) -> None:
    engine, camp = rich["engine"], get_campaign(rich["engine"], "m")
    rows = md.label_rows(engine, schema, camp)
    got = md.matches_of(rows)
    reference = mon.answer_matches(
        mon.load_labels(engine, camp.id), mon.load_finals(engine, camp.id)
    )
    assert len(reference) > 0 and reference["match"].any() and (~reference["match"]).any()
    assert reference["gold_item"].any() and (~reference["gold_item"]).any()
    pd.testing.assert_frame_equal(_sorted(got), _sorted(reference), check_dtype=False)
    # one row per annotator and work: the edit replaced bob's first version
    assert not rows.duplicated(["annotator", "work_id"]).any()
    assert set(rows.attrs["questions"]) == {q.name for q in schema.questions}


def test_annotator_table_from_sql_equals_the_reference(
    rich: dict[str, Any], schema: Schema
) -> None:
    engine, camp = rich["engine"], get_campaign(rich["engine"], "m")
    rows = md.label_rows(engine, schema, camp)
    fast = mon.annotator_table(rows, {}, matches=md.matches_of(rows))
    slow = mon.annotator_stats(engine, camp.id)
    cols = ["annotator", "labels", "skips", "flags", "agree", "agree_n", "gold", "gold_n"]
    pd.testing.assert_frame_equal(fast[cols], slow[cols], check_dtype=False)


def test_activity_and_remaining(disputed: dict[str, Any]) -> None:  # noqa: F811
    engine, camp = disputed["engine"], disputed["camp"]
    act = md.activity(engine, camp.id)
    totals = act.groupby("kind")["n"].sum().to_dict()
    assert totals == {"labelled": 4, "skipped": 1, "validated": 1, "disputed": 1}
    assert act["at"].dt.tz is not None
    assert (act["at"] <= pd.Timestamp(utcnow()) + timedelta(minutes=1)).all()
    remaining, started = md.remaining_labels(engine, camp)
    # 4 works, overlap 2: W1 and W2 done, W3 skipped by bob (0 labels), W4 untouched
    assert (remaining, started) == (4, 2)


def test_data_version_moves_with_labels_not_time(
    disputed: dict[str, Any],  # noqa: F811
    schema: Schema,
) -> None:
    engine, camp = disputed["engine"], disputed["camp"]
    before = md.data_version(engine, camp.id)
    assert md.data_version(engine, camp.id) == before
    _label(engine, schema, camp.id, disputed["ann"], 3)
    after = md.data_version(engine, camp.id)
    assert after != before and after[0] == before[0] + 1


def test_live_view_equals_the_database(disputed: dict[str, Any], schema: Schema) -> None:  # noqa: F811
    engine, camp = disputed["engine"], disputed["camp"]
    live = live_view(engine, camp.id)
    assert {k: live.progress[k] for k in campaign_progress(engine, camp.id)} == campaign_progress(
        engine, camp.id
    )
    assert live.rate["n"] == 4 and live.rate["remaining"] == 4
    assert "2 of 4 works have all 2 label(s)" in live.sentences["progress"]
    assert "2 have at least one" in live.sentences["progress"]
    _label(engine, schema, camp.id, disputed["ann"], 0)
    again = live_view(engine, camp.id)
    assert again.progress["labels"] == live.progress["labels"] + 1
    assert again.progress["labels"] == campaign_progress(engine, camp.id)["labels"]


def test_monitor_view_of_an_empty_campaign(engine: Engine, schema: Schema) -> None:
    add_works(engine, 3)
    camp = create_campaign(engine, name="nothing-yet", strategy="score_max")
    live, stats = monitor_view(engine, schema, camp.id)
    assert live.cumulative.empty and live.rate["per_hour"] is None
    assert stats.tables["annotators"].empty == "No labels yet."
    assert stats.sentences["teachers"] == "No validated works yet: 0 of 3 works in this campaign."
    for key in ("teachers", "machines", "brier", "reliability", "agreement", "pairs", "attention"):
        assert stats.tables[key].is_empty, key
    assert stats.reliability_bins.empty and stats.confusion == {}


def test_monitor_view_with_labels(rich: dict[str, Any], schema: Schema) -> None:
    engine = rich["engine"]
    live, stats = monitor_view(engine, schema, rich["camp"].id)
    assert not live.cumulative.empty
    assert set(stats.tables["annotators"].raw["annotator"]) == {"ann", "bob", "cid"}
    assert list(stats.tables["reasons"].raw["reason"]) == ["no_abstract", "odd"]
    assert not stats.tables["reliability"].is_empty
    shown = stats.tables["reliability"].shown
    assert "alpha [95% CI]" in shown.columns and "level" in shown.columns
    teachers = stats.tables["teachers"].raw
    assert set(teachers["system"]) <= set(schema.teachers) and len(teachers) > 0
    # every table downloads as CSV: its numbers, with a header
    for t in stats.tables.values():
        if not t.is_empty:
            assert t.raw.to_csv(index=False).splitlines()[0]


def test_activity_minutes_are_utc_on_both_engines(engine: Engine, schema: Schema) -> None:
    """A label stamped at a known UTC time lands in that minute (PostgreSQL too)."""
    add_works(engine, 2)
    uid = add_user(engine, "tz")
    camp = create_campaign(engine, name="tz", strategy="score_max")
    _label(engine, schema, camp.id, uid, 0)
    act = md.activity(engine, camp.id)
    now = pd.Timestamp(utcnow())
    assert abs((act["at"].iloc[0] - now).total_seconds()) < 120
