"""The vectorised gold-set builder against a plain reference, and its machine-side sources."""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select, update

from db.engine import read_session, snapshot_connection, write_session
from db.models import Label, User, Work
from labeling.export.gold_set import ExportFilters, export_gold
from labeling.frames.importer import import_frame
from labeling.frames.machine_columns import machine_hash, machine_plan
from labeling.review.campaigns import create_campaign
from labeling.review.labels import LabelSubmission, edit_label, submit_label
from labeling.review.queue import claim_next
from labeling.schema import Schema
from tests.conftest import make_record, write_jsonl
from tests.factories import add_user, answers_for

V1, V2 = "metacan-v3-hybrid-931329e0061c", "metacan-v4-next"
IDS = [f"W{i:02d}" for i in range(1, 9)]


def _answers(schema: Schema, user: int, wid: str) -> dict[str, Any]:
    """Answers that agree on some questions and differ on others, per annotator and work."""
    base = answers_for(schema, 0)
    n = int(wid[1:])
    other = answers_for(schema, user)
    # Each work gets its own mix: question i follows annotator `user` when (n + i) % 3 == 0.
    return {q.name: (other if (n + i) % 3 == 0 else base)[q.name]
            for i, q in enumerate(schema.questions)}  # fmt: skip


def _submit(engine: Engine, schema: Schema, cid: int, uid: int, wid: str, answers: Any,
            *, edit: bool = False, skipped: bool = False) -> None:  # fmt: skip
    """Submit (or edit) one label."""
    fn = edit_label if edit else submit_label
    fn(
        engine,
        LabelSubmission(
            campaign_id=cid,
            work_id=wid,
            user_id=uid,
            answers=answers,
            skipped=skipped,
            skip_reason="other" if skipped else None,
            schema_hash=schema.hash,
            scores_visible=True,
            model_version=V1,
            time_on_item_ms=900,
            submission_id=f"{cid}-{uid}-{wid}-{edit}-{skipped}",
        ),
        schema=schema,
    )


@pytest.fixture
def varied(engine: Engine, schema: Schema, seed_record: dict, tmp_path: Path) -> Engine:
    """Eight works, three annotators with overlap 3, an edit, a skip, partial agreement."""
    return build_varied(engine, schema, seed_record, tmp_path)


def build_varied(engine: Engine, schema: Schema, seed_record: dict, tmp_path: Path) -> Engine:
    """The `varied` database (also used by other test modules)."""
    frame = write_jsonl(tmp_path / "f.jsonl", [make_record(seed_record, w) for w in IDS])
    import_frame(engine, frame, schema)
    users = [add_user(engine, name) for name in ("zed", "amy", "=bob")]
    cid = create_campaign(engine, name="triple", overlap=3).id
    for k, uid in enumerate(users):
        while (claim := claim_next(engine, cid, uid)) is not None:
            if k == 2 and claim.work_id == "W08":
                _submit(engine, schema, cid, uid, "W08", {}, skipped=True)
                continue
            _submit(engine, schema, cid, uid, claim.work_id, _answers(schema, k, claim.work_id))
    _submit(engine, schema, cid, users[0], "W02", _answers(schema, 1, "W05"), edit=True)
    _submit(engine, schema, cid, users[1], "W03", {}, edit=True, skipped=True)
    return engine


def _reference(engine: Engine, schema: Schema) -> dict[str, dict[str, Any]]:
    """n_labels, annotators, agreement and label times per work, computed row by row."""
    with read_session(engine) as session:
        names = dict(session.execute(select(User.id, User.name)).all())
        latest: dict[tuple, Any] = {}
        for lab in session.execute(
            select(Label.campaign_id, Label.work_id, Label.user_id, Label.skipped, Label.answers,
                   Label.created_at).order_by(Label.version)
        ):  # fmt: skip
            latest[(lab.campaign_id, lab.work_id, lab.user_id)] = lab
    out: dict[str, dict[str, Any]] = {}
    for wid in IDS:
        labs = [lab for key, lab in latest.items() if key[1] == wid and not lab.skipped]
        shares = []
        for q in schema.questions:
            values = [lab.answers.get(q.name) for lab in labs]
            values = [v for v in values if v is not None]
            if len(values) >= 2:
                pairs = list(combinations(values, 2))
                shares.append(sum(a == b for a, b in pairs) / len(pairs))
        stamps = sorted(lab.created_at.isoformat(timespec="microseconds") for lab in labs)
        out[wid] = {
            "n_labels": len(labs),
            "annotators": sorted({names[lab.user_id] for lab in labs}),
            "agreement": round(sum(shares) / len(shares), 6) if shares else None,
            "first_labelled_at": stamps[0] if stamps else None,
            "last_labelled_at": stamps[-1] if stamps else None,
        }
    return out


def _rows(engine: Engine, schema: Schema, out: Path, **kw: Any) -> dict[str, dict[str, Any]]:
    """Export to JSON Lines and read the rows back by work id."""
    export_gold(engine, schema, out, fmt="jsonl", filters=ExportFilters(status="all"), **kw)
    return {r["work_id"]: r for r in map(json.loads, out.read_text("utf-8").splitlines())}


@pytest.mark.parametrize("chunk_size", [1, 3, 50])
def test_label_columns_match_the_reference(
    varied: Engine, schema: Schema, tmp_path: Path, chunk_size: int
) -> None:
    rows = _rows(varied, schema, tmp_path / "g.jsonl", chunk_size=chunk_size)
    expected = _reference(varied, schema)
    assert set(rows) == set(IDS)
    for wid in IDS:
        got = {k: rows[wid][k] for k in expected[wid]}
        assert got == expected[wid], wid
    # The fixture really exercised the edge cases.
    assert rows["W03"]["n_labels"] == 2 and rows["W08"]["n_labels"] == 2
    assert {r["agreement"] for r in rows.values()} - {1.0, None}  # partial agreement exists
    assert rows["W01"]["annotators"] == ["=bob", "amy", "zed"]


def test_missing_or_stale_machine_columns_are_recomputed(
    varied: Engine, schema: Schema, tmp_path: Path
) -> None:
    first = tmp_path / "a.parquet"
    a = export_gold(varied, schema, first, fmt="parquet", filters=ExportFilters(status="all"))
    with write_session(varied) as session:
        session.execute(update(Work).where(Work.id.in_(IDS[:3])).values(machine=None))
        session.execute(
            update(Work)
            .where(Work.id.in_(IDS[3:6]))
            .values(machine='["stale"]', machine_hash="0000000000000000")
        )
    b = export_gold(varied, schema, tmp_path / "b.parquet", fmt="parquet",
                    filters=ExportFilters(status="all"))  # fmt: skip
    assert a.sha256 == b.sha256
    # And the stored columns are the ones the plan computes from the record.
    with read_session(varied) as session:
        work = session.get(Work, IDS[7])
        assert work.machine_hash == machine_hash(schema)
        plan = machine_plan(schema)
        columns = plan.columns(work.record)
        assert json.loads(work.machine) == [columns[c] for c in plan.stored]


def test_machine_side_is_the_one_labelled(
    engine: Engine, schema: Schema, seed_record: dict, tmp_path: Path
) -> None:
    import_frame(engine, write_jsonl(tmp_path / "v1.jsonl",
                                     [make_record(seed_record, w) for w in ("W1", "W2")]),
                 schema)  # fmt: skip
    uid = add_user(engine, "amy")
    cid = create_campaign(engine, name="one", overlap=1).id
    claim = claim_next(engine, cid, uid)
    assert claim is not None
    _submit(engine, schema, cid, uid, claim.work_id, answers_for(schema, 0))
    newer = [make_record(seed_record, w, prediction__model_version=V2,
                         prediction__genre_codex="empirical",
                         machine_scores__validation_status="score_only:v1")
             for w in ("W1", "W2")]  # fmt: skip
    import_frame(engine, write_jsonl(tmp_path / "v2.jsonl", newer), schema)
    rows = _rows(engine, schema, tmp_path / "g.jsonl")
    labelled, other = rows[claim.work_id], rows[({"W1", "W2"} - {claim.work_id}).pop()]
    assert labelled["model_version"] == V1 and labelled["model_version_current"] == V2
    assert labelled["machine_genre_codex"] == "methods"  # as shown when labelled
    assert labelled["validation_status"] == "score_only:v0-immature-baseline"
    assert other["model_version"] == other["model_version_current"] == V2
    assert other["machine_genre_codex"] == "empirical"
    assert other["validation_status"] == "score_only:v1"


def test_export_snapshot_ignores_later_commits(engine: Engine) -> None:
    add_user(engine, "before")
    with snapshot_connection(engine) as conn:
        add_user(engine, "after")  # commits while the export's snapshot is open
        query = select(User.name).order_by(User.name)
        assert conn.execute(query).scalars().all() == ["before"]
        assert conn.execute(query).scalars().all() == ["before"]  # every statement alike
    with read_session(engine) as session:
        assert session.execute(select(User.name).order_by(User.name)).scalars().all() == [
            "after",
            "before",
        ]


def test_reimport_refreshes_machine_columns_of_unchanged_records(
    engine: Engine, schema: Schema, seed_record: dict, tmp_path: Path
) -> None:
    frame = write_jsonl(tmp_path / "f.jsonl", [make_record(seed_record, w) for w in IDS[:3]])
    import_frame(engine, frame, schema)
    with write_session(engine) as session:  # as if imported under another schema
        session.execute(update(Work).values(machine='["old"]', machine_hash="0123456789abcdef"))
    summary = import_frame(engine, frame, schema)
    assert summary.unchanged == 3 and summary.updated == 0
    plan = machine_plan(schema)
    with read_session(engine) as session:
        for work in session.scalars(select(Work)):
            columns = plan.columns(work.record)
            assert work.machine_hash == machine_hash(schema)
            assert json.loads(work.machine) == [columns[c] for c in plan.stored]
