"""Ground truth that stays true: a validated answer changes only by an explicit, recorded act.

Issue cases 1 (a later label in another campaign, gold checks) and 2 (two leads at once), on
both engines, through the CLI and the functions the pages call.
"""

from __future__ import annotations

import csv
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import Engine, func, insert, select

from db.engine import read_session, write_session
from db.models import Adjudication, CampaignVerdict, Lease, StatusEvent, Work, utcnow
from labeling.auth.users import get_user
from labeling.cli.main import main
from labeling.review.adjudication import DisputeScreen, apply_dispute_action
from labeling.review.campaigns import create_campaign
from labeling.review.disputes import disputed_works, mark_gold
from labeling.review.history import work_history
from labeling.review.labels import LabelSubmission, edit_label, submit_label
from labeling.review.queue import claim_next
from labeling.review.validation import AlreadySettled, adjudicate, reopen
from labeling.schema import Schema
from labeling.settings import Settings
from labeling.vocabulary import (
    ACT_ADJUDICATION,
    ACT_CORROBORATION,
    ACT_CROSS_DISPUTE,
    ACT_GOLD,
    ACT_REOPEN,
    ACT_RULE,
    STATUS_DISPUTED,
    STATUS_IN_REVIEW,
    STATUS_VALIDATED,
)
from tests.factories import add_user, add_works, answers_for


def cli(db_url: str, *args: str) -> Result:
    """Run the CLI against a database."""
    return CliRunner().invoke(main, ["--db", db_url, *args])


def _label_csv(path: Path, schema: Schema, wid: str, who: str, campaign: str, v: int) -> Path:
    """A long label file: one full label (answers_for variant v) of one work."""
    answers = answers_for(schema, v)
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["work_id", "annotator", "question", "value", "campaign"])
        for q in schema.questions:
            value = answers[q.name]
            out.writerow([wid, who, q.name, ";".join(value) if isinstance(value, list) else value,
                          campaign])  # fmt: skip
    return path


def _work(engine: Engine, wid: str) -> Any:
    with read_session(engine) as session:
        return session.execute(
            select(Work.status, Work.final_answers, Work.validated_via, Work.is_gold).where(
                Work.id == wid
            )
        ).one()


def _acts(engine: Engine, wid: str) -> list[str | None]:
    with read_session(engine) as session:
        return list(
            session.execute(
                select(StatusEvent.act).where(StatusEvent.work_id == wid).order_by(StatusEvent.id)
            ).scalars()
        )


def _lease(engine: Engine, cid: int, wid: str, uid: int) -> None:
    """Give a user the lease on a work (as a claim would), so that they may label it."""
    with write_session(engine) as session:
        session.execute(
            insert(Lease),
            {"campaign_id": cid, "work_id": wid, "user_id": uid,
             "expires_at": utcnow() + timedelta(minutes=10)},
        )  # fmt: skip


def _submit(engine: Engine, schema: Schema, cid: int, wid: str, uid: int, answers: dict) -> Any:
    """A first label on a given work (the user holds its lease)."""
    _lease(engine, cid, wid, uid)
    return submit_label(
        engine,
        LabelSubmission(
            campaign_id=cid, work_id=wid, user_id=uid, answers=answers,
            submission_id=f"{cid}-{wid}-{uid}", schema_hash=schema.hash, scores_visible=True,
            model_version="m", time_on_item_ms=1,
        ),
        schema=schema,
    )  # fmt: skip


def test_a_later_campaign_never_replaces_validated_answers(
    db_url: str, engine: Engine, schema: Schema, tmp_path: Path
) -> None:
    """The issue's reproduction with the CLI alone: g1 validates, g3 disagrees, g4 agrees."""
    assert cli(db_url, "demo").exit_code == 0
    wid = engine.connect().execute(select(func.min(Work.id))).scalar_one()
    first = cli(db_url, "import-labels", str(_label_csv(tmp_path / "g1.csv", schema, wid,
                                                        "ann1", "g1", 0)))  # fmt: skip
    assert first.exit_code == 0, first.output
    before = _work(engine, wid)
    assert before.status == STATUS_VALIDATED and before.final_answers == answers_for(schema, 0)
    assert before.validated_via.startswith("rule:unanimous:k=1:c")

    # A different full label in g3 (the very annotator, even): the answers stay g1's.
    res = cli(db_url, "import-labels", str(_label_csv(tmp_path / "g3.csv", schema, wid, "ann1",
                                                      "g3", 1)))  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "0 validated works corroborated, 1 disputes opened across campaigns" in res.stdout
    assert _work(engine, wid) == before
    assert _acts(engine, wid) == [ACT_RULE, ACT_CROSS_DISPUTE]
    history = json.loads(cli(db_url, "history", wid, "--json").stdout)
    event = history["events"][-1]
    assert event["answers_before"] == event["answers_after"] == answers_for(schema, 0)
    assert event["campaign"] == "g3" and "differs" in event["reason"]
    (verdict,) = history["verdicts"]
    assert (verdict["campaign"], verdict["outcome"], verdict["settled_at"]) == ("g3", "disputed",
                                                                               None)  # fmt: skip
    assert verdict["answers"] == answers_for(schema, 1)
    assert set(verdict["differing"]) == {q.name for q in schema.questions}
    text = cli(db_url, "history", wid)
    assert text.exit_code == 0 and "g3: disputed on" in text.stdout and "(open)" in text.stdout

    # An agreeing verdict in g4 corroborates, recorded, answers unchanged.
    res = cli(db_url, "import-labels", str(_label_csv(tmp_path / "g4.csv", schema, wid, "ann2",
                                                      "g4", 0)))  # fmt: skip
    assert "1 validated works corroborated, 0 disputes opened" in res.stdout
    assert _work(engine, wid) == before
    assert _acts(engine, wid)[-1] == ACT_CORROBORATION
    row = _exported(db_url, tmp_path, wid)  # still exported, saying a dispute is open
    assert (row["dispute_open"], row["corroborated_by"]) == (True, ["g4"])
    assert row["human_genre"] == answers_for(schema, 0)["genre"]

    # The dispute is on Adjudicate, with both verdicts side by side, until a lead decides.
    (view,) = [v for v in disputed_works(engine) if v.work_id == wid]
    assert view.across and len(view.weighed) == 2
    assert view.n_labels == 2  # ann1 in g1 and ann1 in g3: the verdicts are no labels
    assert view.answers[view.weighed[0]] == answers_for(schema, 0)
    assert view.answers[view.weighed[1]] == answers_for(schema, 1)
    assert "g3: ann1" in view.answers and "g1: ann1" in view.answers
    lead = add_user(engine, "lea", "lead")
    genre = answers_for(schema, 1)["genre"]
    adjudicate(engine, wid, {"genre": genre}, "g3 is right on genre", lead, view.campaign_id,
               schema=schema)  # fmt: skip
    after = _work(engine, wid)
    assert after.final_answers == {**answers_for(schema, 0), "genre": genre}
    assert after.validated_via == "adjudicated:lea"
    assert not [v for v in disputed_works(engine) if v.work_id == wid]
    history = work_history(engine, wid)
    assert history["events"][-1]["act"] == ACT_ADJUDICATION
    assert history["events"][-1]["answers_before"] == answers_for(schema, 0)
    assert history["verdicts"][0]["settled_by"] == "lea"
    row = _exported(db_url, tmp_path, wid)
    assert (row["dispute_open"], row["human_genre"]) == (False, genre)
    # The settled verdict, met again, opens nothing new.
    assert cli(db_url, "import-labels", str(tmp_path / "g3.csv")).exit_code == 0
    assert not [v for v in disputed_works(engine) if v.work_id == wid]


def _exported(db_url: str, tmp_path: Path, wid: str) -> dict[str, Any]:
    """A work's row of the validated gold set, exported with the CLI as JSON Lines."""
    out = tmp_path / "gold.jsonl"
    res = cli(db_url, "export", "--format", "jsonl", "--out", str(out))
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    return next(r for r in rows if r["work_id"] == wid)


def test_questions_the_later_campaign_did_not_ask_keep_their_answers(
    engine: Engine, schema: Schema
) -> None:
    """A genre-only campaign disputes the genre alone; the other answers are untouched."""
    add_works(engine, 1)
    a, b = add_user(engine, "a"), add_user(engine, "b")
    lead = add_user(engine, "lea", "lead")
    full = create_campaign(engine, name="full", overlap=1)
    wid = "W0001"
    _submit(engine, schema, full.id, wid, a, answers_for(schema, 0))
    genre_only = create_campaign(engine, name="genre", overlap=1, questions=["genre"])
    other = answers_for(schema, 1)["genre"]
    result = _submit(engine, schema, genre_only.id, wid, b, {"genre": other})
    assert result.status == STATUS_VALIDATED
    work = _work(engine, wid)
    assert work.final_answers == answers_for(schema, 0)
    with read_session(engine) as session:
        row = session.execute(select(CampaignVerdict)).scalar_one()
        assert (row.outcome, row.differing, row.answers) == ("disputed", ["genre"],
                                                             {"genre": other})  # fmt: skip
    reopen(engine, wid, lead, "look again", schema=schema)
    with read_session(engine) as session:
        assert session.execute(select(CampaignVerdict.settled_by)).scalar_one() == lead
    assert _acts(engine, wid) == [ACT_RULE, ACT_CROSS_DISPUTE, ACT_REOPEN]


def test_the_validating_campaign_changes_its_answers_with_an_event(
    engine: Engine, schema: Schema
) -> None:
    """An edit (B) in the campaign that validated the work is a new verdict under its rule."""
    add_works(engine, 1)
    a, b = add_user(engine, "a"), add_user(engine, "b")
    camp = create_campaign(engine, name="c", overlap=2, rule="unanimous")
    wid = "W0001"
    _submit(engine, schema, camp.id, wid, a, answers_for(schema, 0))
    _submit(engine, schema, camp.id, wid, b, answers_for(schema, 0))
    assert _work(engine, wid).status == STATUS_VALIDATED

    def edit(uid: int, variant: int) -> None:
        edit_label(engine, LabelSubmission(
            campaign_id=camp.id, work_id=wid, user_id=uid, answers=answers_for(schema, variant),
            submission_id=f"edit-{uid}-{variant}", schema_hash=schema.hash, scores_visible=True,
            model_version="m", time_on_item_ms=1), schema=schema)  # fmt: skip

    edit(a, 1)  # no longer unanimous: disputed, the answers before recorded
    assert _work(engine, wid).status == STATUS_DISPUTED
    edit(b, 1)  # unanimous again, on other answers
    work = _work(engine, wid)
    assert (work.status, work.final_answers) == (STATUS_VALIDATED, answers_for(schema, 1))
    events = work_history(engine, wid)["events"]
    assert [e["act"] for e in events] == [ACT_RULE] * 4
    assert events[2]["answers_before"] == answers_for(schema, 0)
    assert events[2]["answers_after"] is None
    assert events[3]["answers_after"] == answers_for(schema, 1)


def test_gold_checks_never_change_the_gold_answer(engine: Engine, schema: Schema) -> None:
    """A gold check is scored against the gold answer; a reopened gold work is no check."""
    add_works(engine, 3)
    a, b = add_user(engine, "a"), add_user(engine, "b")
    lead = add_user(engine, "lea", "lead")
    main_c = create_campaign(engine, name="main", overlap=1)
    _submit(engine, schema, main_c.id, "W0003", a, answers_for(schema, 0))
    assert mark_gold(engine, ["W0003"], lead) == 1
    assert _acts(engine, "W0003") == [ACT_RULE, ACT_GOLD]
    checks = create_campaign(engine, name="checks", overlap=1, gold_rate=1.0,
                             filter={"status": ["machine_predicted_unvalidated"]})  # fmt: skip
    claim = claim_next(engine, checks.id, b)
    assert claim is not None and claim.is_gold and claim.work_id == "W0003"
    submit_label(engine, LabelSubmission(
        campaign_id=checks.id, work_id="W0003", user_id=b, answers=answers_for(schema, 1),
        submission_id="gold-b", schema_hash=schema.hash, scores_visible=True, model_version="m",
        time_on_item_ms=1), schema=schema)  # fmt: skip
    work = _work(engine, "W0003")
    assert (work.status, work.final_answers, work.is_gold) == (
        STATUS_VALIDATED, answers_for(schema, 0), True)  # fmt: skip
    assert _acts(engine, "W0003") == [ACT_RULE, ACT_GOLD]
    reopen(engine, "W0003", lead, "the codebook changed", schema=schema)
    assert _work(engine, "W0003").status == STATUS_IN_REVIEW
    for _ in range(2):  # every other work, never the reopened gold one
        claim = claim_next(engine, checks.id, a)
        assert claim is not None and not claim.is_gold and claim.work_id != "W0003"
        submit_label(engine, LabelSubmission(
            campaign_id=checks.id, work_id=claim.work_id, user_id=a,
            answers=answers_for(schema, 0), submission_id=f"a-{claim.work_id}",
            schema_hash=schema.hash, scores_visible=True, model_version="m",
            time_on_item_ms=1), schema=schema)  # fmt: skip
    assert claim_next(engine, checks.id, a) is None


def _disputed(engine: Engine, schema: Schema, n: int) -> tuple[int, list[str]]:
    """N works disputed in a k=2 campaign; returns (campaign id, work ids)."""
    add_works(engine, n)
    a, b = add_user(engine, "a"), add_user(engine, "b")
    camp = create_campaign(engine, name="c", overlap=2)
    ids = [f"W{i:04d}" for i in range(1, n + 1)]
    for wid in ids:
        _submit(engine, schema, camp.id, wid, a, answers_for(schema, 0))
        _submit(engine, schema, camp.id, wid, b, answers_for(schema, 1))
    return camp.id, ids


def test_the_second_lead_is_told_and_nothing_is_stored(engine: Engine, schema: Schema) -> None:
    """Two leads on the same dispute: the second adjudication is refused under the lock."""
    cid, (wid,) = _disputed(engine, schema, 1)
    ann, bob = add_user(engine, "ann", "lead"), add_user(engine, "bob", "lead")
    settings = Settings(db_url="sqlite://", openalex_offline=True)
    screens = [DisputeScreen(user_id=ann), DisputeScreen(user_id=bob)]
    for screen in screens:  # both load the same dispute
        apply_dispute_action(engine, screen, None, schema=schema, settings=settings)
        assert screen.view is not None and screen.view.work_id == wid

    def action(n: int, variant: int) -> dict[str, Any]:
        return {"type": "adjudicate", "id": f"act-{n}", "work_id": wid, "reason": f"lead {n}",
                "answers": answers_for(schema, variant)}  # fmt: skip

    # The page's check ("still the dispute shown?") passes for both: bob's view is stale.
    bob_view = screens[1].view
    apply_dispute_action(engine, screens[0], action(0, 0), schema=schema, settings=settings)
    assert screens[0].ack_ok
    with pytest.raises(AlreadySettled, match=r"already settled by 'ann' \(adjudication\)"):
        adjudicate(engine, wid, answers_for(schema, 1), "lead 1", bob, cid, schema=schema)
    screens[1].view = bob_view
    with read_session(engine) as session:
        assert session.execute(select(func.count()).select_from(Adjudication)).scalar_one() == 1
    assert _work(engine, wid).final_answers == answers_for(schema, 0)
    # Reopen twice: the second is refused the same way.
    reopen(engine, wid, ann, "again", schema=schema)
    with pytest.raises(AlreadySettled, match="'ann' \\(reopen\\)"):
        reopen(engine, wid, bob, "again", schema=schema)


def test_an_edit_that_settles_the_dispute_first_wins(engine: Engine, schema: Schema) -> None:
    """An annotator's edit (B) settles the dispute while a lead has it open: the lead's
    adjudication is refused, naming who changed it, and nothing is stored."""
    cid, (wid,) = _disputed(engine, schema, 1)
    lead = add_user(engine, "ann", "lead")
    settings = Settings(db_url="sqlite://", openalex_offline=True)
    screen = DisputeScreen(user_id=lead)
    apply_dispute_action(engine, screen, None, schema=schema, settings=settings)
    assert screen.view is not None and screen.view.work_id == wid
    b = get_user(engine, "b").id  # the second annotator of _disputed
    edit_label(engine, LabelSubmission(
        campaign_id=cid, work_id=wid, user_id=b, answers=answers_for(schema, 0),
        submission_id="b-agrees", schema_hash=schema.hash, scores_visible=True,
        model_version="m", time_on_item_ms=1), schema=schema)  # fmt: skip
    assert _work(engine, wid).status == STATUS_VALIDATED
    with pytest.raises(AlreadySettled, match=r"already settled by 'b' \(rule\)"):
        adjudicate(engine, wid, answers_for(schema, 1), "late", lead, cid, schema=schema)
    action = {"type": "adjudicate", "id": "x", "work_id": wid, "reason": "late",
              "answers": answers_for(schema, 1)}  # fmt: skip
    apply_dispute_action(engine, screen, action, schema=schema, settings=settings)
    assert screen.message is not None and "last changed by 'b' (rule)" in screen.message[1]
    with read_session(engine) as session:
        assert session.execute(select(func.count()).select_from(Adjudication)).scalar_one() == 0
    assert _work(engine, wid).final_answers == answers_for(schema, 0)


def test_other_verdicts_are_held_against_the_validating_campaigns_new_answers(
    engine: Engine, schema: Schema
) -> None:
    """When the validating campaign's edit changes the answers, a disputing verdict that now
    agrees becomes a corroboration; when the work leaves validated, the dispute is moot."""
    add_works(engine, 1)
    a, b = add_user(engine, "a"), add_user(engine, "b")
    first = create_campaign(engine, name="first", overlap=1)
    wid = "W0001"
    _submit(engine, schema, first.id, wid, a, answers_for(schema, 0))
    second = create_campaign(engine, name="second", overlap=1)
    _submit(engine, schema, second.id, wid, b, answers_for(schema, 1))
    assert work_history(engine, wid)["verdicts"][0]["outcome"] == "disputed"
    edit_label(engine, LabelSubmission(
        campaign_id=first.id, work_id=wid, user_id=a, answers=answers_for(schema, 1),
        submission_id="a-edit", schema_hash=schema.hash, scores_visible=True, model_version="m",
        time_on_item_ms=1), schema=schema)  # fmt: skip
    history = work_history(engine, wid)
    assert history["final_answers"] == answers_for(schema, 1)
    assert history["verdicts"][0]["outcome"] == "corroborated"
    assert [e["act"] for e in history["events"]] == [
        ACT_RULE, ACT_CROSS_DISPUTE, ACT_RULE, ACT_CORROBORATION]  # fmt: skip
    assert not [v for v in disputed_works(engine) if v.work_id == wid]
