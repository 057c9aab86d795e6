"""Labels: submit, idempotency, edits, skips, read-back, and import of human labels."""

from __future__ import annotations

import gzip
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from db.engine import read_session
from db.models import CampaignItem, ImportRun, Label, Lease, StatusEvent, User, Work
from labeling.review.campaigns import create_campaign, get_campaign
from labeling.review.label_import import import_labels
from labeling.review.labels import (
    LabelError,
    LabelSubmission,
    current_labels,
    edit_label,
    label_history,
    submit_label,
    user_labels,
)
from labeling.review.queue import claim_next
from labeling.schema import Schema
from labeling.vocabulary import (
    STATUS_DISPUTED,
    STATUS_IN_REVIEW,
    STATUS_UNVALIDATED,
    STATUS_VALIDATED,
)
from tests.factories import add_user, add_works, answers_for


def _args(schema: Schema, sid: str, variant: int = 0, **kw: Any) -> dict[str, Any]:
    """Keyword arguments of a valid submit."""
    args = {
        "answers": answers_for(schema, variant),
        "schema_hash": schema.hash,
        "scores_visible": False,
        "model_version": "m1",
        "time_on_item_ms": 1234,
        "submission_id": sid,
    }
    args.update(kw)
    return args


def _count(engine: Engine, model: Any) -> int:
    """Rows in a table."""
    with read_session(engine) as session:
        return session.execute(select(func.count()).select_from(model)).scalar_one()


def _item(engine: Engine, cid: int, wid: str) -> tuple[int, bool]:
    """(n_labels, done) of a campaign item."""
    with read_session(engine) as session:
        return tuple(
            session.execute(
                select(CampaignItem.n_labels, CampaignItem.done).where(
                    CampaignItem.campaign_id == cid, CampaignItem.work_id == wid
                )
            ).one()
        )


def _status(engine: Engine, wid: str) -> str:
    """A work's status."""
    with read_session(engine) as session:
        return session.execute(select(Work.status).where(Work.id == wid)).scalar_one()


@pytest.fixture
def setup(engine: Engine) -> dict[str, Any]:
    """Five works, annotators a and b, a campaign with overlap 2."""
    add_works(engine, 5)
    camp = create_campaign(engine, name="c", overlap=2)
    return {"cid": camp.id, "a": add_user(engine, "a"), "b": add_user(engine, "b")}


def test_submit_records_everything(engine: Engine, schema: Schema, setup: dict) -> None:
    """A submit stores every field, drops the lease and counts the label."""
    cid, a = setup["cid"], setup["a"]
    claim = claim_next(engine, cid, a)
    res = submit_label(
        engine,
        LabelSubmission(
            campaign_id=cid,
            work_id=claim.work_id,
            user_id=a,
            flagged=True,
            note="odd one",
            confidence=4,
            **_args(schema, "s1"),
        ),
        schema=schema,
    )
    assert (res.version, res.created, res.skipped, res.status) == (1, True, False, STATUS_IN_REVIEW)
    with read_session(engine) as session:
        label = session.get(Label, res.label_id)
        assert label.answers == answers_for(schema, 0)
        assert (label.flagged, label.note, label.confidence) == (True, "odd one", 4)
        assert (label.schema_hash, label.scores_visible, label.model_version) == (
            schema.hash,
            False,
            "m1",
        )
        assert (label.time_on_item_ms, label.source, label.submission_id) == (1234, "app", "s1")
        assert session.execute(select(Lease)).first() is None
    assert _item(engine, cid, claim.work_id) == (1, False)


def test_double_submit_is_idempotent(engine: Engine, schema: Schema, setup: dict) -> None:
    """The same submission id twice creates one label."""
    cid, a = setup["cid"], setup["a"]
    wid = claim_next(engine, cid, a).work_id
    first = submit_label(
        engine,
        LabelSubmission(
            campaign_id=cid,
            work_id=wid,
            user_id=a,
            **_args(schema, "x"),
        ),
        schema=schema,
    )
    again = submit_label(
        engine,
        LabelSubmission(
            campaign_id=cid,
            work_id=wid,
            user_id=a,
            **_args(schema, "x"),
        ),
        schema=schema,
    )
    assert (again.label_id, again.created, again.version) == (first.label_id, False, 1)
    assert _count(engine, Label) == 1
    assert _item(engine, cid, wid) == (1, False)
    with pytest.raises(LabelError, match="already used for another label"):
        submit_label(
            engine,
            LabelSubmission(
                campaign_id=cid,
                work_id="W0002",
                user_id=a,
                **_args(schema, "x"),
            ),
            schema=schema,
        )


def test_concurrent_double_click(engine: Engine, schema: Schema, setup: dict) -> None:
    """Four simultaneous submits with one submission id create one label."""
    cid, a = setup["cid"], setup["a"]
    wid = claim_next(engine, cid, a).work_id

    def go(_: int) -> Any:
        """Submit with the shared submission id."""
        return submit_label(
            engine,
            LabelSubmission(
                campaign_id=cid,
                work_id=wid,
                user_id=a,
                **_args(schema, "same"),
            ),
            schema=schema,
        )

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(go, range(4)))
    assert len({r.label_id for r in results}) == 1
    assert sum(r.created for r in results) == 1
    assert _count(engine, Label) == 1
    assert _item(engine, cid, wid) == (1, False)


# "answers" patches a complete valid answer; "only" replaces it.
REJECTS = [
    ({"only": {"genre": "methods"}}, "'categories' is not answered"),
    ({"answers": {"genre": "poem"}}, "'poem' is not one of"),
    ({"answers": {"mood": "x"}}, "unknown question 'mood'"),
    ({"answers": {"about_ca_system": "perhaps"}}, "'yes' or 'no'"),
    ({"answers": {"categories": ["Bibliometrics", "Bibliometrics"]}}, "chosen twice"),
    ({"skipped": True}, "a skip needs a reason"),
    ({"skipped": True, "skip_reason": "bored"}, "a skip needs a reason"),
    ({"confidence": "high"}, "confidence must be"),
    ({"submission_id": ""}, "submission_id"),
    ({"work_id": "W9999"}, "not in campaign"),
    ({"campaign_id": 999}, "no campaign"),
]


@pytest.mark.parametrize(("change", "message"), REJECTS)
def test_rejected_submits(
    engine: Engine, schema: Schema, setup: dict, change: dict, message: str
) -> None:
    """Bad submits are refused with clear messages; nothing is written, the lease is kept."""
    cid, a = setup["cid"], setup["a"]
    wid = claim_next(engine, cid, a).work_id
    change = dict(change)
    if "answers" in change:
        change["answers"] = {**answers_for(schema, 0), **change["answers"]}
    if "only" in change:
        change["answers"] = change.pop("only")
    kwargs = {"campaign_id": cid, "work_id": wid, "user_id": a, **_args(schema, "s")}
    kwargs.update(change)
    with pytest.raises(LabelError, match=message):
        submit_label(engine, LabelSubmission(**kwargs), schema=schema)
    assert _count(engine, Label) == 0
    assert _count(engine, Lease) == 1  # the lease is kept: the annotator can fix and resubmit


def test_skip_and_campaign_questions(engine: Engine, schema: Schema) -> None:
    """Campaign questions limit the form; skips may be partial and do not count."""
    add_works(engine, 2)
    a = add_user(engine, "a")
    camp = create_campaign(engine, name="g", questions=["genre", "about_ca_topic"])
    wid = claim_next(engine, camp.id, a).work_id
    with pytest.raises(LabelError, match="unknown question 'domain'"):
        submit_label(
            engine,
            LabelSubmission(
                campaign_id=camp.id,
                work_id=wid,
                user_id=a,
                **_args(
                    schema,
                    "s0",
                    answers={"genre": "methods", "about_ca_topic": "no", "domain": "cross_domain"},
                ),
            ),
            schema=schema,
        )
    res = submit_label(
        engine,
        LabelSubmission(
            campaign_id=camp.id,
            work_id=wid,
            user_id=a,
            **_args(
                schema, "s1", answers={"genre": "methods"}, skipped=True, skip_reason="out_of_scope"
            ),
        ),
        schema=schema,
    )
    assert res.skipped and res.created
    assert _item(engine, camp.id, wid) == (0, False)
    wid2 = claim_next(engine, camp.id, a).work_id
    assert wid2 != wid
    res = submit_label(
        engine,
        LabelSubmission(
            campaign_id=camp.id,
            work_id=wid2,
            user_id=a,
            **_args(schema, "s2", answers={"genre": "methods", "about_ca_topic": "yes"}),
        ),
        schema=schema,
    )
    assert res.status == STATUS_VALIDATED
    with read_session(engine) as session:
        assert session.get(Work, wid2).final_answers == {
            "about_ca_topic": "yes",
            "genre": "methods",
        }


def test_edits_version_history_and_counts(engine: Engine, schema: Schema, setup: dict) -> None:
    """Edits add versions, keep counts right and re-evaluate the work."""
    cid, a, b = setup["cid"], setup["a"], setup["b"]
    wid = claim_next(engine, cid, a).work_id
    submit_label(
        engine,
        LabelSubmission(
            campaign_id=cid,
            work_id=wid,
            user_id=a,
            **_args(schema, "a1"),
        ),
        schema=schema,
    )
    assert claim_next(engine, cid, b).work_id == wid
    submit_label(
        engine,
        LabelSubmission(
            campaign_id=cid,
            work_id=wid,
            user_id=b,
            **_args(schema, "b1"),
        ),
        schema=schema,
    )
    assert _status(engine, wid) == STATUS_VALIDATED and _item(engine, cid, wid) == (2, True)
    # an edit needs no lease and re-evaluates the work
    res = edit_label(
        engine,
        LabelSubmission(
            campaign_id=cid,
            work_id=wid,
            user_id=a,
            **_args(schema, "a2", 1),
        ),
        schema=schema,
    )
    assert (res.version, res.status) == (2, STATUS_DISPUTED)
    # turning the label into a skip stops it counting; the work goes back in the queue
    res = edit_label(
        engine,
        LabelSubmission(
            campaign_id=cid,
            work_id=wid,
            user_id=b,
            **_args(schema, "b2", skipped=True, skip_reason="other"),
        ),
        schema=schema,
    )
    assert (res.version, res.status) == (2, STATUS_IN_REVIEW)
    assert _item(engine, cid, wid) == (1, False)
    res = edit_label(
        engine,
        LabelSubmission(
            campaign_id=cid,
            work_id=wid,
            user_id=b,
            **_args(schema, "b3", 1),
        ),
        schema=schema,
    )
    assert (res.version, res.status) == (3, STATUS_VALIDATED)
    assert _item(engine, cid, wid) == (2, True)
    history = label_history(engine, cid, wid, a)
    assert [h.version for h in history] == [1, 2]
    assert [h.answers for h in history] == [answers_for(schema, 0), answers_for(schema, 1)]
    mine = user_labels(engine, cid, b)
    assert [(m.work_id, m.version, m.skipped) for m in mine] == [(wid, 3, False)]
    with pytest.raises(LabelError, match="no label of yours"):
        edit_label(
            engine,
            LabelSubmission(
                campaign_id=cid,
                work_id="W0005",
                user_id=a,
                **_args(schema, "e"),
            ),
            schema=schema,
        )
    with read_session(engine) as session:
        events = session.execute(
            select(StatusEvent.to_status, StatusEvent.user_id).order_by(StatusEvent.id)
        ).all()
    assert [tuple(e) for e in events] == [
        (STATUS_IN_REVIEW, a),
        (STATUS_VALIDATED, b),
        (STATUS_DISPUTED, a),
        (STATUS_IN_REVIEW, b),
        (STATUS_VALIDATED, b),
    ]


def test_current_labels_frame(engine: Engine, schema: Schema, setup: dict) -> None:
    """current_labels gives the latest non-skipped version, one row per question."""
    cid, a, b = setup["cid"], setup["a"], setup["b"]
    w1 = claim_next(engine, cid, a).work_id
    submit_label(
        engine,
        LabelSubmission(
            campaign_id=cid,
            work_id=w1,
            user_id=a,
            **_args(schema, "1"),
        ),
        schema=schema,
    )
    edit_label(
        engine,
        LabelSubmission(
            campaign_id=cid,
            work_id=w1,
            user_id=a,
            **_args(
                schema,
                "2",
                answers={**answers_for(schema, 0), "categories": ["Open science", "Bibliometrics"]},
            ),
        ),
        schema=schema,
    )
    w2 = claim_next(engine, cid, b).work_id
    assert w2 == w1
    submit_label(
        engine,
        LabelSubmission(
            campaign_id=cid,
            work_id=w2,
            user_id=b,
            **_args(schema, "3", skipped=True, skip_reason="no_abstract"),
        ),
        schema=schema,
    )
    other = create_campaign(engine, name="other")
    w3 = claim_next(engine, other.id, b).work_id
    submit_label(
        engine,
        LabelSubmission(
            campaign_id=other.id,
            work_id=w3,
            user_id=b,
            **_args(schema, "4", answers={**answers_for(schema, 0), "categories": []}),
        ),
        schema=schema,
    )
    frame = current_labels(engine, cid)
    assert list(frame.columns) == [
        "campaign_id",
        "work_id",
        "annotator",
        "user_id",
        "question",
        "value",
        "created_at",
        "version",
    ]
    assert set(frame["annotator"]) == {"a"} and set(frame["version"]) == {2}
    assert len(frame) == len(schema.questions)
    cats = frame.loc[frame["question"] == "categories", "value"].item()
    assert cats == "Bibliometrics;Open science"  # schema order
    everything = current_labels(engine)
    assert len(everything) == 2 * len(schema.questions)
    assert (
        everything.loc[
            (everything["annotator"] == "b") & (everything["question"] == "categories"), "value"
        ].item()
        == ""
    )
    assert current_labels(engine, 999).empty
    assert [v.work_id for v in user_labels(engine, cid, a)] == [w1]  # only one's own


# ----------------------------------------------------------------------- import


def _csv(path: Path, rows: list[str]) -> Path:
    """Write a long-format labels CSV."""
    path.write_text(
        "work_id,annotator,question,value,created_at,confidence,note\n" + "\n".join(rows) + "\n",
        encoding="utf-8",
    )
    return path


def test_import_csv(engine: Engine, schema: Schema, tmp_path: Path) -> None:
    """CSV import: groups rows, rejects bad lines with reasons (a label with a bad row whole),
    is idempotent."""
    add_works(engine, 3)
    add_user(engine, "ann")
    create_campaign(
        engine,
        name="imported",
        strategy="manual",
        questions=["categories", "genre", "about_ca_system"],
    )
    rows = [
        "W0001,ann,categories,Bibliometrics;Open science,2024-05-01T10:00:00Z,4,",
        "W0001,ann,genre,methods,,,",
        "W0001,ann,about_ca_system,yes,,,",
        "W0001,bob,categories,Open science;Bibliometrics,,,looked twice",
        "W0001,bob,genre,methods,,,",
        "W0001,bob,about_ca_system,YES,,,",
        "W0002,ann,categories,,,,",  # none chosen
        "W0002,ann,genre,review,,,",
        "W0002,bob,genre,empirical,,,",
        "W9999,ann,genre,methods,,,",  # unknown work
        "W0003,ann,mood,happy,,,",  # unknown question
        "W0003,ann,genre,sonnet,,,",  # unknown label
        "W0003,ann,about_ca_system,maybe,,,",  # not yes/no
        "W0002,ann,genre,methods,,,",  # contradicts an earlier line
        "W0003,,genre,methods,,,",  # no annotator
        "W0003,ann,genre,methods,yesterday,,",  # bad date
    ]
    path = _csv(tmp_path / "labels.csv", rows)
    summary = import_labels(engine, path, schema)
    assert (summary.rows, summary.imported, summary.duplicates, summary.rejected) == (16, 3, 0, 9)
    assert summary.campaign == "imported" and summary.users_created == ["bob"]
    assert summary.works_added == 2
    problems = {p.line: p for p in summary.problems}
    assert set(problems) == {8, 9, 11, 12, 13, 14, 15, 16, 17}
    for line in (8, 9):  # ann's label on W0002 goes with its contradicting line 15
        assert problems[line].reason == (
            "part of a rejected label (line 15: question 'genre' already answered 'review' above)"
        )
    assert "unknown work W9999" in problems[11].reason and problems[11].work_id == "W9999"
    assert "unknown question 'mood'" in problems[12].reason
    assert "'sonnet' is not one of" in problems[13].reason
    assert "'yes' or 'no'" in problems[14].reason
    assert "required" in problems[16].reason and "Invalid isoformat" in problems[17].reason
    assert "already answered 'review'" in problems[15].reason
    camp = get_campaign(engine, "imported")
    assert camp.strategy == "manual" and camp.n_items == 2
    assert _status(engine, "W0001") == STATUS_VALIDATED
    assert _status(engine, "W0002") == STATUS_IN_REVIEW  # bob's label only, and partial
    assert _status(engine, "W0003") == STATUS_UNVALIDATED
    with read_session(engine) as session:
        bob = session.execute(select(User).where(User.name == "bob")).scalar_one()
        assert (bob.role, bob.password_hash) == ("annotator", None)
        label = session.execute(
            select(Label).where(Label.user_id != bob.id, Label.work_id == "W0001")
        ).scalar_one()
        assert label.source == "import" and label.confidence == 4
        assert label.created_at.isoformat() == "2024-05-01T10:00:00+00:00"
        assert label.answers["categories"] == ["Bibliometrics", "Open science"]
        run = session.execute(select(ImportRun)).scalar_one()
        assert run.kind == "labels" and run.summary["imported"] == 3
    again = import_labels(engine, path, schema)
    assert (again.imported, again.duplicates, again.rejected) == (0, 3, 9)
    assert _count(engine, Label) == 3


def test_import_jsonl_gz_into_named_campaign_and_update(
    engine: Engine, schema: Schema, tmp_path: Path
) -> None:
    """JSONL.gz import into a campaign; a changed answer adds a version."""
    add_works(engine, 3)
    camp = create_campaign(engine, name="pilot", overlap=2, sample_size=1)
    rows = [
        {"work_id": "W0001", "annotator": "x", "question": "categories", "value": ["Open science"]},
        {"work_id": "W0001", "annotator": "x", "question": "about_ca_topic", "value": False},
        {"work_id": "W0002", "annotator": "x", "question": "genre", "value": "methods"},
    ]
    path = tmp_path / "labels.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("\n".join(json.dumps(r) for r in rows) + "\n{broken\n\n[1]\n")
    summary = import_labels(engine, path, schema, campaign="pilot")
    assert (summary.imported, summary.rejected) == (2, 2)
    assert [p.line for p in summary.problems] == [4, 6]
    assert get_campaign(engine, camp.id).n_items == 2  # W0002 appended to the queue
    assert _item(engine, camp.id, "W0001") == (1, False)
    rows[2]["value"] = "review"  # the annotator changed their mind
    path2 = tmp_path / "labels2.jsonl"
    path2.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    summary = import_labels(engine, path2, schema, campaign=camp.id)
    assert (summary.imported, summary.duplicates) == (1, 1)
    with read_session(engine) as session:
        versions = session.execute(
            select(Label.version, Label.answers)
            .where(Label.work_id == "W0002")
            .order_by(Label.version)
        ).all()
    assert [(v, a["genre"]) for v, a in versions] == [(1, "methods"), (2, "review")]


def test_import_bad_files(engine: Engine, schema: Schema, tmp_path: Path) -> None:
    """Files without the columns or of unknown type are refused, and create no campaign."""
    bad = tmp_path / "labels.csv"
    bad.write_text("work,who\nW1,a\n", encoding="utf-8")
    with pytest.raises(LabelError, match="missing columns work_id, annotator, question, value"):
        import_labels(engine, bad, schema)
    other = tmp_path / "labels.xlsx"
    other.write_text("", encoding="utf-8")
    with pytest.raises(LabelError, match=r"expected a \.csv, \.jsonl"):
        import_labels(engine, other, schema)
    with pytest.raises(LabelError, match="missing columns"):
        import_labels(engine, bad, schema, campaign="fresh")
    from labeling.review.campaigns import find_campaign

    assert find_campaign(engine, "fresh") is None
