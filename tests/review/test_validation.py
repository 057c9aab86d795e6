"""Validation rules (pure), answer checks, and adjudication/reopen against both databases."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, select

from db.engine import read_session
from db.models import Adjudication, StatusEvent, Work
from labeling.review.campaigns import create_campaign
from labeling.review.labels import LabelSubmission, submit_label
from labeling.review.queue import claim_next
from labeling.review.validation import (
    AnswerError,
    ValidationError,
    adjudicate,
    check_answers,
    evaluate,
    reopen,
)
from labeling.schema import Question, Schema
from labeling.vocabulary import (
    STATUS_DISPUTED,
    STATUS_IN_REVIEW,
    STATUS_UNVALIDATED,
    STATUS_VALIDATED,
)
from tests.factories import add_user, add_works, answers_for

CAT = Question("cats", "multi", ("a", "b", "c"))
YN = Question("ca", "binary", ("yes", "no"))
GENRE = Question("genre", "single", ("x", "y", "z"))
QS = [CAT, YN, GENRE]


def lab(cats: list[str], ca: str = "yes", genre: str = "x") -> dict[str, Any]:
    """A label's answers on the three test questions."""
    return {"cats": cats, "ca": ca, "genre": genre}


@pytest.mark.parametrize(
    ("labels", "rule", "k", "status", "final"),
    [
        ([], "unanimous", 2, STATUS_UNVALIDATED, None),
        ([lab(["a"])], "unanimous", 2, STATUS_IN_REVIEW, None),
        ([lab(["a"])], "unanimous", 1, STATUS_VALIDATED, lab(["a"])),
        ([lab(["a"]), lab(["a"])], "unanimous", 2, STATUS_VALIDATED, lab(["a"])),
        # multi-label answers compare as sets, final in schema label order
        ([lab(["b", "a"]), lab(["a", "b"])], "unanimous", 2, STATUS_VALIDATED, lab(["a", "b"])),
        ([lab([]), lab([])], "unanimous", 2, STATUS_VALIDATED, lab([])),
        ([lab(["a"]), lab(["a", "b"])], "unanimous", 2, STATUS_DISPUTED, None),
        # a conflict among two labels is a dispute even before k labels are in
        ([lab(["a"]), lab(["a"], ca="no")], "unanimous", 3, STATUS_DISPUTED, None),
        ([lab(["a"]), lab(["a"])], "unanimous", 3, STATUS_IN_REVIEW, None),
        ([lab(["a"]), lab(["a"], genre="y")], "majority", 3, STATUS_IN_REVIEW, None),
        ([lab(["a"]), lab(["a"]), lab(["b"])], "majority", 3, STATUS_VALIDATED, lab(["a"])),
        (
            [lab(["a"]), lab(["a"], genre="y"), lab(["a"], genre="z")],
            "majority",
            3,
            STATUS_DISPUTED,
            None,
        ),
        ([lab(["a"]), lab(["b"])], "majority", 2, STATUS_DISPUTED, None),
        ([lab(["a"]), lab(["a"])], "majority", 2, STATUS_VALIDATED, lab(["a"])),
        (
            [lab(["a"], ca="no"), lab(["a"], ca="no"), lab(["a"], ca="yes"), lab(["a"])],
            "majority",
            3,
            STATUS_DISPUTED,
            None,
        ),
    ],
)
def test_evaluate_rules(
    labels: list[dict[str, Any]], rule: str, k: int, status: str, final: dict | None
) -> None:
    """Rule cases: unanimous, majority, conflicts, fewer than k, multi-label sets."""
    verdict = evaluate(labels, QS, rule, k)
    assert verdict.status == status
    assert verdict.final_answers == final
    assert verdict.reason


def test_evaluate_names_only_and_bad_arguments() -> None:
    """Questions may be names; unknown rules and k < 1 are refused."""
    verdict = evaluate([{"q": ["b", "a"]}, {"q": ["a", "b"]}], ["q"], "unanimous", 2)
    assert verdict.status == STATUS_VALIDATED
    assert verdict.final_answers == {"q": ["a", "b"]}
    with pytest.raises(ValueError, match="unknown rule"):
        evaluate([], QS, "plurality", 2)
    with pytest.raises(ValueError, match="k must be"):
        evaluate([], QS, "unanimous", 0)


def test_disagreement_reason_names_questions() -> None:
    """A dispute names the questions in conflict."""
    verdict = evaluate([lab(["a"]), lab(["b"], genre="y")], QS, "unanimous", 2)
    assert verdict.reason == "labels disagree on cats, genre"


@pytest.mark.parametrize(
    ("answers", "require_all", "expected", "error"),
    [
        (lab(["c", "a"]), True, lab(["a", "c"]), None),
        ({"cats": [], "ca": True, "genre": "z"}, True, lab([], genre="z"), None),
        ({"cats": [], "ca": " No ", "genre": "z"}, True, lab([], ca="no", genre="z"), None),
        ({"cats": ["a"]}, False, {"cats": ["a"]}, None),
        ({"cats": ["a"]}, True, None, "'ca' is not answered"),
        ({**lab(["a"]), "other": 1}, True, None, "unknown question 'other'"),
        ({**lab(["a"]), "genre": "w"}, True, None, "'w' is not one of its labels"),
        ({**lab(["a"]), "ca": "maybe"}, True, None, "'yes' or 'no'"),
        ({**lab(["a"]), "cats": "a"}, True, None, "list of labels"),
        ({**lab(["a"]), "cats": ["a", "a"]}, True, None, "chosen twice"),
        ({**lab(["a"]), "cats": ["d"]}, True, None, "unknown labels d"),
    ],
)
def test_check_answers(
    answers: dict[str, Any], require_all: bool, expected: dict | None, error: str | None
) -> None:
    """Answers are checked and normalised against the questions."""
    if error is None:
        assert check_answers(answers, QS, require_all=require_all) == expected
    else:
        with pytest.raises(AnswerError, match=error):
            check_answers(answers, QS, require_all=require_all)


# ------------------------------------------------------------------ database side


def _label(engine: Engine, schema: Schema, cid: int, uid: int, variant: int) -> str:
    """Claim the next work for a user and label it with a variant of the answers."""
    claim = claim_next(engine, cid, uid)
    assert claim is not None
    submit_label(
        engine,
        LabelSubmission(
            campaign_id=cid,
            work_id=claim.work_id,
            user_id=uid,
            answers=answers_for(schema, variant),
            schema_hash=schema.hash,
            scores_visible=False,
            model_version="m",
            time_on_item_ms=1,
            submission_id=f"{cid}-{uid}-{claim.work_id}",
        ),
        schema=schema,
    )
    return claim.work_id


def _work(engine: Engine, work_id: str) -> Any:
    """A work's status, final answers and validated_via."""
    with read_session(engine) as session:
        return session.execute(
            select(Work.status, Work.final_answers, Work.validated_via).where(Work.id == work_id)
        ).one()


def _events(engine: Engine, work_id: str) -> list[tuple[str | None, str]]:
    """A work's status events as (from, to)."""
    with read_session(engine) as session:
        rows = session.execute(
            select(StatusEvent.from_status, StatusEvent.to_status)
            .where(StatusEvent.work_id == work_id)
            .order_by(StatusEvent.id)
        ).all()
        return [tuple(r) for r in rows]


def test_labels_move_status_and_write_events(engine: Engine, schema: Schema) -> None:
    """Labels move a work through in review to validated or disputed, with events."""
    add_works(engine, 2)
    a, b = add_user(engine, "a"), add_user(engine, "b")
    camp = create_campaign(engine, name="c", overlap=2)
    wid = _label(engine, schema, camp.id, a, 0)
    assert _work(engine, wid).status == STATUS_IN_REVIEW
    assert _label(engine, schema, camp.id, b, 0) == wid
    work = _work(engine, wid)
    assert work.status == STATUS_VALIDATED
    assert work.final_answers == answers_for(schema, 0)
    assert work.validated_via == f"rule:unanimous:k=2:c{camp.id}"
    assert _events(engine, wid) == [
        (STATUS_UNVALIDATED, STATUS_IN_REVIEW),
        (STATUS_IN_REVIEW, STATUS_VALIDATED),
    ]
    wid2 = _label(engine, schema, camp.id, a, 0)
    _label(engine, schema, camp.id, b, 1)
    assert _work(engine, wid2).status == STATUS_DISPUTED
    assert _events(engine, wid2)[-1] == (STATUS_IN_REVIEW, STATUS_DISPUTED)


def test_adjudicate_and_reopen(engine: Engine, schema: Schema) -> None:
    """A lead's adjudication validates; reopening returns to disputed; history kept."""
    add_works(engine, 1)
    a, b = add_user(engine, "a"), add_user(engine, "b")
    lead = add_user(engine, "lea", role="lead")
    camp = create_campaign(engine, name="c", overlap=2)
    wid = _label(engine, schema, camp.id, a, 0)
    _label(engine, schema, camp.id, b, 1)
    assert _work(engine, wid).status == STATUS_DISPUTED
    with pytest.raises(ValidationError, match="only leads"):
        adjudicate(engine, wid, answers_for(schema, 0), "no", a, camp.id)
    with pytest.raises(AnswerError):
        adjudicate(engine, wid, {"genre": "nonsense"}, "bad", lead, camp.id, schema=schema)
    verdict = adjudicate(
        engine, wid, answers_for(schema, 1), "codebook 3.2", lead, camp.id, schema=schema
    )
    assert verdict.status == STATUS_VALIDATED
    work = _work(engine, wid)
    assert (work.status, work.validated_via) == (STATUS_VALIDATED, "adjudicated:lea")
    assert work.final_answers == answers_for(schema, 1)
    with read_session(engine) as session:
        adj = session.execute(select(Adjudication)).scalar_one()
        assert (adj.user_id, adj.reason, adj.campaign_id) == (lead, "codebook 3.2", camp.id)
        last = session.execute(
            select(StatusEvent).order_by(StatusEvent.id.desc()).limit(1)
        ).scalar_one()
        assert (last.user_id, last.to_status) == (lead, STATUS_VALIDATED)
        assert "codebook 3.2" in last.reason

    verdict = reopen(engine, wid, lead, "second look", schema=schema)
    assert verdict.status == STATUS_DISPUTED  # the labels still disagree
    work = _work(engine, wid)
    assert (work.status, work.validated_via, work.final_answers) == (STATUS_DISPUTED, None, None)
    assert _events(engine, wid)[-1] == (STATUS_VALIDATED, STATUS_DISPUTED)
    with read_session(engine) as session:  # history kept
        assert session.execute(select(Adjudication)).scalar_one() is not None


def test_adjudicated_work_is_not_reevaluated_until_reopened(engine: Engine, schema: Schema) -> None:
    """Later labels leave an adjudicated work alone until it is reopened."""
    add_works(engine, 1)
    a, b, c = (add_user(engine, n) for n in "abc")
    lead = add_user(engine, "lea", role="lead")
    camp = create_campaign(engine, name="c", overlap=3, rule="majority")
    wid = _label(engine, schema, camp.id, a, 0)
    adjudicate(engine, wid, answers_for(schema, 2), "clear case", lead, camp.id)
    _label(engine, schema, camp.id, b, 1)
    work = _work(engine, wid)
    assert (work.status, work.final_answers) == (STATUS_VALIDATED, answers_for(schema, 2))
    reopen(engine, wid, lead, "new labels came in", schema=schema)
    assert _work(engine, wid).status == STATUS_IN_REVIEW  # 2 of 3 labels, no majority yet
    _label(engine, schema, camp.id, c, 0)
    work = _work(engine, wid)
    assert (work.status, work.final_answers) == (STATUS_VALIDATED, answers_for(schema, 0))
    assert work.validated_via == f"rule:majority:k=3:c{camp.id}"


def test_reopen_rule_validated_work_holds_it_in_review(engine: Engine, schema: Schema) -> None:
    """Reopening a rule-validated work holds it in review."""
    add_works(engine, 1)
    a = add_user(engine, "a")
    lead = add_user(engine, "lea", role="lead")
    camp = create_campaign(engine, name="c", overlap=1)
    wid = _label(engine, schema, camp.id, a, 0)
    assert _work(engine, wid).status == STATUS_VALIDATED
    verdict = reopen(engine, wid, lead, "suspicious")
    assert verdict.status == STATUS_IN_REVIEW
    assert _events(engine, wid)[-1] == (STATUS_VALIDATED, STATUS_IN_REVIEW)


def test_adjudicate_unknown_work(engine: Engine) -> None:
    """Unknown works are refused."""
    lead = add_user(engine, "lea", role="lead")
    with pytest.raises(ValidationError, match="unknown work"):
        adjudicate(engine, "W404", {}, "x", lead)
    with pytest.raises(ValidationError, match="unknown work"):
        reopen(engine, "W404", lead, "x")
