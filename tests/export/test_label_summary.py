"""Label summaries: stored by exports, never trusted when stale, the same bytes either way."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import Engine, delete, func, select, update

from db.engine import snapshot_connection, write_session
from db.models import Label, LabelSummary, User
from labeling.export.gold_set import ExportFilters, export_gold
from labeling.export.summaries import SUMMARY_COLUMNS, fresh, stored
from labeling.review.labels import LabelSubmission, edit_label
from labeling.schema import Schema
from tests.export.test_gold_table import IDS, V1, _reference, _rows, build_varied
from tests.factories import add_user

ALL = pa.array(IDS, pa.string())


@pytest.fixture
def varied(engine: Engine, schema: Schema, seed_record: dict, tmp_path: Path) -> Engine:
    """Eight works, three annotators, edits, skips and partial agreement (test_gold_table)."""
    return build_varied(engine, schema, seed_record, tmp_path)


@pytest.fixture
def summarised(varied: Engine, schema: Schema, tmp_path: Path) -> Engine:
    """The varied database after one export, which stored every work's summary."""
    export_gold(varied, schema, tmp_path / "first.parquet", fmt="parquet",
                filters=ExportFilters(status="all"))  # fmt: skip
    assert len(_stored_rows(varied)) == len(IDS)
    return varied


def _stored_rows(engine: Engine) -> dict[str, tuple]:
    """Every stored summary row by work id."""
    with engine.connect() as conn:
        return {r[0]: tuple(r[1:]) for r in conn.execute(
            select(LabelSummary.work_id, LabelSummary.label_rows,
                   *(getattr(LabelSummary, c) for c in SUMMARY_COLUMNS)))}  # fmt: skip


def _check_current(engine: Engine, schema: Schema) -> None:
    """The stored summaries are all current and equal to a computation from the labels."""
    with snapshot_connection(engine) as conn:
        got, stale = stored(conn, schema, ALL)
        want = fresh(conn, schema, ALL)
        rows = dict(conn.execute(select(Label.work_id, func.count()).group_by(Label.work_id)).all())
    assert stale is None
    for c in SUMMARY_COLUMNS:
        assert got[c].to_pylist() == want[c].to_pylist(), c
    assert {w: r[0] for w, r in _stored_rows(engine).items()} == rows


def _sha(path: Path) -> str:
    """sha256 of a file."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_exports_store_summaries_and_labelling_only_makes_them_stale(
    varied: Engine, schema: Schema, tmp_path: Path
) -> None:
    """Labelling writes no summary; an export stores them all, and after a further edit
    the next export finds exactly that work stale and stores its new summary."""
    assert _stored_rows(varied) == {}
    _rows(varied, schema, tmp_path / "a.jsonl")
    _check_current(varied, schema)
    summaries = _stored_rows(varied)
    assert set(summaries) == set(IDS)
    # W03's second annotator turned their label into a skip: two current labels remain.
    assert '"n":2' in summaries["W03"][1]
    with write_session(varied) as session:
        uid = session.execute(select(User.id).where(User.name == "amy")).scalar_one()
        cid = session.execute(select(Label.campaign_id).limit(1)).scalar_one()
    edit_label(varied, LabelSubmission(
        campaign_id=cid, work_id="W06", user_id=uid, answers={}, skipped=True, skip_reason="other",
        schema_hash=schema.hash, scores_visible=True, model_version=V1, time_on_item_ms=5,
        submission_id="late-skip",
    ), schema=schema)  # fmt: skip
    with snapshot_connection(varied) as conn:
        redone = stored(conn, schema, ALL)[1]
    assert redone is not None and redone["work_id"].to_pylist() == ["W06"]
    rows = _rows(varied, schema, tmp_path / "b.jsonl")
    assert rows["W06"]["n_labels"] == _reference(varied, schema)["W06"]["n_labels"] == 2
    _check_current(varied, schema)


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_export_is_the_same_with_stored_or_recomputed_summaries(
    summarised: Engine, schema: Schema, tmp_path: Path, fmt: str
) -> None:
    filters = ExportFilters(status="all")
    with_stored = export_gold(summarised, schema, tmp_path / f"a.{fmt}", fmt=fmt, filters=filters)
    before = _stored_rows(summarised)
    with write_session(summarised) as session:
        session.execute(delete(LabelSummary))
    recomputed = export_gold(summarised, schema, tmp_path / f"b.{fmt}", fmt=fmt, filters=filters)
    assert recomputed.sha256 == with_stored.sha256
    assert _sha(tmp_path / f"a.{fmt}") == _sha(tmp_path / f"b.{fmt}")
    # The export stored what it had to recompute.
    assert _stored_rows(summarised) == before


@pytest.mark.parametrize("sparse", [4, 0])
def test_a_label_row_written_directly_is_seen(
    summarised: Engine,
    schema: Schema,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sparse: int,
) -> None:
    """A label row the summaries do not count makes the export read that work's labels
    (sparse 0: as for works spread thinly over the table, summaries read by id)."""
    monkeypatch.setattr("labeling.export.summaries.SPARSE", sparse)
    extra = add_user(summarised, "late")
    with write_session(summarised) as session:
        cid = session.execute(select(Label.campaign_id).limit(1)).scalar_one()
        answers = session.execute(select(Label.answers).where(
            Label.work_id == "W05", Label.skipped.is_(False)).limit(1)).scalar_one()  # fmt: skip
        session.add(Label(campaign_id=cid, work_id="W05", user_id=extra, version=1,
                          answers=answers, model_version=V1))  # fmt: skip
    with snapshot_connection(summarised) as conn:
        redone = stored(conn, schema, ALL)[1]
    assert redone is not None and redone["work_id"].to_pylist() == ["W05"]
    assert redone["label_rows"].to_pylist() == [_label_count(summarised, "W05")]
    rows = _rows(summarised, schema, tmp_path / "g.jsonl")
    expected = _reference(summarised, schema)
    assert rows["W05"]["n_labels"] == expected["W05"]["n_labels"] == 4
    for wid in IDS:
        assert {k: rows[wid][k] for k in expected[wid]} == expected[wid], wid
    _check_current(summarised, schema)  # the export brought the summary up to date


def test_a_summary_made_under_another_schema_is_not_trusted(
    summarised: Engine, schema: Schema, tmp_path: Path
) -> None:
    with write_session(summarised) as session:
        session.execute(update(LabelSummary).where(LabelSummary.work_id == "W01").values(
            summary='{"schema":"0ld","n":9,"users":[1],"pairs":[]}'))  # fmt: skip
    rows = _rows(summarised, schema, tmp_path / "g.jsonl")
    expected = _reference(summarised, schema)["W01"]
    assert {k: rows["W01"][k] for k in expected} == expected
    _check_current(summarised, schema)


def _label_count(engine: Engine, wid: str) -> Any:
    """Label rows of a work."""
    with engine.connect() as conn:
        return conn.execute(select(func.count()).where(Label.work_id == wid)).scalar_one()


@pytest.mark.parametrize("seed", range(4))
def test_row_by_row_and_arrow_summaries_agree(engine: Engine, schema: Schema, seed: int) -> None:
    """The submit path (plain Python, few works) and the export path (Arrow) on random
    histories: versions, skips, two campaigns, missing answers, unstamped versions."""
    import random

    from db.models import Work
    from labeling.export.label_columns import current_labels
    from labeling.export.summaries import summarise, summarise_few
    from labeling.review.campaigns import create_campaign
    from tests.factories import answers_for, work_row

    rng = random.Random(seed)
    ids = [f"W{i:03d}" for i in range(40)]
    users = [add_user(engine, f"u{k}") for k in range(4)]
    camps = [create_campaign(engine, name=f"c{k}", overlap=2).id for k in range(2)]
    with write_session(engine) as session:
        session.execute(Work.__table__.insert(), [work_row(w) for w in ids])
        for wid in ids:
            for _ in range(rng.randrange(0, 7)):
                c, u = rng.choice(camps), rng.choice(users)
                v = (
                    1
                    + session.execute(
                        select(func.count()).where(
                            Label.work_id == wid, Label.campaign_id == c, Label.user_id == u
                        )
                    ).scalar_one()
                )
                answers = {k: val for k, val in answers_for(schema, rng.randrange(3)).items()
                           if rng.random() < 0.8}  # fmt: skip
                session.add(Label(
                    campaign_id=c, work_id=wid, user_id=u, version=v, answers=answers,
                    skipped=rng.random() < 0.2, model_version=rng.choice([V1, "v0", None]),
                ))  # fmt: skip
                session.flush()
    with snapshot_connection(engine) as conn:
        few = summarise_few(conn, schema, ids)
        arrow = summarise(current_labels(conn, schema.questions, None, pa.array(ids)), len(ids),
                          len(schema.questions), schema.hash)  # fmt: skip
    for c in SUMMARY_COLUMNS:
        assert few[c].to_pylist() == arrow[c].to_pylist(), c
    assert any(few["summary"].to_pylist()) and None in few["summary"].to_pylist()


def test_an_export_never_replaces_a_newer_summary(
    summarised: Engine, schema: Schema, tmp_path: Path
) -> None:
    """Summaries an export recomputed from its snapshot replace only summaries of no more
    label rows: one that a later export stored meanwhile (more rows) stays."""
    from labeling.export.summaries import store

    with snapshot_connection(summarised) as conn:
        current = fresh(conn, schema, ALL)
    rows = _stored_rows(summarised)
    older = pa.table({"work_id": ALL, "label_rows": pa.array([rows[w][0] - 1 for w in IDS]),
                      **{c: pa.array(["stale"] * len(IDS)) if c == "summary" else current[c]
                         for c in SUMMARY_COLUMNS}})  # fmt: skip
    store(summarised, older)
    assert _stored_rows(summarised) == rows
    with write_session(summarised) as session:
        session.execute(delete(LabelSummary).where(LabelSummary.work_id == "W04"))
    store(summarised, older.slice(3, 1))  # no summary at all: the computed one is stored
    assert _stored_rows(summarised)["W04"] == (rows["W04"][0] - 1, "stale", *rows["W04"][2:])
    again = pa.table({"work_id": ALL.slice(3, 1), "label_rows": [rows["W04"][0]],
                      **{c: current[c].slice(3, 1) for c in SUMMARY_COLUMNS}})  # fmt: skip
    store(summarised, again)  # as many rows: replaced
    assert _stored_rows(summarised) == rows
