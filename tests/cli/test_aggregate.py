"""`labeling aggregate`: the report's JSON keys, exit codes, and the dawid-skene rule."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine, func, select

from db.engine import read_session
from db.models import StatusEvent, Work
from labeling.cli.main import main
from labeling.review.campaigns import CampaignError, create_campaign, get_campaign
from labeling.review.labels import LabelSubmission, submit_label
from labeling.review.queue import claim_next
from labeling.review.validation import adjudicate, evaluate
from labeling.schema import Schema
from tests.factories import add_user, add_works

QUESTIONS = ["genre", "about_ca_system"]


def run(url: str, *args: str) -> Any:
    """Invoke the CLI against `url`."""
    return CliRunner().invoke(main, ["--db", url, *args], catch_exceptions=False)


def truth(schema: Schema, i: int) -> dict[str, str]:
    """The true answers of the i-th work (in queue order)."""
    genres = schema.question("genre").labels
    return {"genre": genres[i % 3], "about_ca_system": "yes" if i % 4 == 0 else "no"}


def answer(schema: Schema, who: str, i: int) -> dict[str, str]:
    """ann is always right; bob errs on every 5th work, cy on every 3rd (the same wrong way)."""
    right = truth(schema, i)
    if (who == "bob" and i % 5 == 0) or (who == "cy" and i % 3 == 0):
        genres = schema.question("genre").labels
        return {
            "genre": genres[(i + 1) % 3],
            "about_ca_system": "no" if right["about_ca_system"] == "yes" else "yes",
        }
    return right


def label(
    engine: Engine,
    schema: Schema,
    cid: int,
    uid: int,
    who: str,
    order: list[str],
    n: int,
    tag: str = "",
) -> None:
    """`who` labels their next n works of the campaign."""
    for _ in range(n):
        claim = claim_next(engine, cid, uid)
        assert claim is not None
        submit_label(
            engine,
            LabelSubmission(
                campaign_id=cid,
                work_id=claim.work_id,
                user_id=uid,
                answers=answer(schema, who, order.index(claim.work_id)),
                schema_hash=schema.hash,
                scores_visible=False,
                model_version="m",
                time_on_item_ms=1000,
                submission_id=f"{tag}{who}-{claim.work_id}",
            ),
            schema=schema,
        )


@pytest.fixture
def campaign(engine: Engine, schema: Schema) -> int:
    """A dawid-skene campaign (P = 0.99, k = 3) of 31 works: 30 with three labels, one with two."""
    order = add_works(engine, 31)  # W0001 first in the queue (highest score)
    cid = create_campaign(
        engine,
        name="ds",
        strategy="score_max",
        overlap=3,
        rule="dawid-skene",
        posterior=0.99,
        questions=QUESTIONS,
        schema=schema,
    ).id
    for who in ("ann", "bob", "cy"):
        label(engine, schema, cid, add_user(engine, who), who, order, 30 if who == "cy" else 31)
    return cid


def statuses(engine: Engine) -> dict[str, tuple[str, str | None]]:
    """Each work's status and validated_via."""
    with read_session(engine) as session:
        return {
            r.id: (r.status, r.validated_via)
            for r in session.execute(select(Work.id, Work.status, Work.validated_via))
        }


def test_the_json_report_has_the_documented_keys(engine, db_url, campaign) -> None:
    result = run(db_url, "aggregate", "--campaign", "ds", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert {
        "campaign",
        "rule",
        "overlap",
        "method",
        "n_works",
        "n_labels",
        "questions",
        "works",
        "annotators",
    } <= set(report)
    assert report["campaign"] == "ds" and report["rule"] == "dawid-skene:p=0.99"
    assert report["method"] == "dawid-skene" and report["n_works"] == 31
    assert report["n_labels"] == 92
    work = report["works"][0]
    assert set(work) == {"work_id", "n_labels", "answers", "posteriors", "distributions"}
    assert set(work["answers"]) == set(QUESTIONS)
    genre = report["questions"]["genre"]
    assert {
        "kind",
        "n_works",
        "n_labels",
        "classes",
        "prior",
        "iterations",
        "converged",
        "annotators",
    } <= set(genre)
    assert set(genre["annotators"]["ann"]) == {"accuracy", "n", "confusion"}
    ann, bob, cy = report["annotators"]
    assert [a["annotator"] for a in (ann, bob, cy)] == ["ann", "bob", "cy"]
    assert set(ann) == {"annotator", "accuracy", "n", "questions"}
    assert ann["n"] == 62 and cy["n"] == 60
    assert ann["accuracy"] > bob["accuracy"] > cy["accuracy"]
    majority = json.loads(
        run(db_url, "aggregate", "--campaign", "ds", "--method", "majority", "--json").stdout
    )
    assert majority["method"] == "majority"
    assert majority["questions"]["genre"]["iterations"] is None
    text = run(db_url, "aggregate", "--campaign", "ds").output
    assert "annotator accuracy" in text and "W0001  n=3  about_ca_system=" in text


def test_unknown_campaign_and_misused_validate_exit_2(engine, db_url, schema) -> None:
    missing = CliRunner().invoke(main, ["--db", db_url, "aggregate", "--campaign", "nope"])
    assert missing.exit_code == 2 and "nope" in missing.output
    add_works(engine, 3)
    create_campaign(engine, name="plain", overlap=2, schema=schema)
    wrong = CliRunner().invoke(
        main, ["--db", db_url, "aggregate", "--campaign", "plain", "--validate"]
    )
    assert wrong.exit_code == 2 and "--rule dawid-skene" in wrong.output
    both = CliRunner().invoke(
        main,
        ["--db", db_url, "aggregate", "--campaign", "plain", "--validate", "--method", "majority"],
    )
    assert both.exit_code == 2 and "majority" in both.output


def test_validate_settles_the_works_by_posterior_and_k(
    engine, db_url, schema, campaign, tmp_path: Path
) -> None:
    # A submit leaves every work of a dawid-skene campaign in review.
    assert {s for s, _ in statuses(engine).values()} == {"human_in_review"}
    result = run(db_url, "aggregate", "--campaign", "ds", "--validate", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    sure = {
        w["work_id"]
        for w in report["works"]
        if w["n_labels"] >= 3 and min(w["posteriors"].values()) >= 0.99
    }
    unsure = {w["work_id"] for w in report["works"] if w["n_labels"] >= 3} - sure
    assert sure and unsure, "the simulation should give both outcomes"
    now = statuses(engine)
    assert {w for w, s in now.items() if s == ("human_validated", "model:dawid-skene")} == sure
    assert {w for w, s in now.items() if s == ("human_disputed", None)} == unsure
    assert now["W0031"] == ("human_in_review", None)  # two labels of the three k asks
    v = report["validation"]
    assert (v["validated"], v["disputed"], v["in_review"], v["changed"]) == (
        len(sure),
        len(unsure),
        1,
        len(sure) + len(unsure),
    )
    with read_session(engine) as session:
        finals = dict(
            session.execute(
                select(Work.id, Work.final_answers).where(Work.status == "human_validated")
            ).all()
        )
        events = session.execute(
            select(func.count())
            .select_from(StatusEvent)
            .where(StatusEvent.reason.like("%dawid-skene posterior%"))
        ).scalar_one()
    assert events == len(sure) + len(unsure)
    answers = {w["work_id"]: w["answers"] for w in report["works"]}
    assert all(finals[w] == answers[w] for w in sure)
    # The export carries how the works were validated.
    out = tmp_path / "gold.csv"
    exported = run(db_url, "export", "--format", "csv", "--out", str(out), "--campaign", "ds")
    assert exported.exit_code == 0, exported.output
    with out.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {r["work_id"] for r in rows} == sure
    assert {r["validated_via"] for r in rows} == {"model:dawid-skene"}
    assert {r["validation_method"] for r in rows} == {"model"}
    # Again: nothing changes; a lead's adjudication is left alone.
    lead = add_user(engine, "lead", "lead")
    settled = sorted(unsure)[0]
    adjudicate(engine, settled, truth(schema, 0), "checked", lead, campaign, schema=schema)
    again = json.loads(run(db_url, "aggregate", "--campaign", "ds", "--validate", "--json").stdout)[
        "validation"
    ]
    assert again["changed"] == 0 and again["left_alone"] == 1
    assert statuses(engine)[settled][1] == "adjudicated:lead"


def test_a_submit_leaves_a_model_validated_work_alone(engine, db_url, schema, campaign) -> None:
    run(db_url, "aggregate", "--campaign", "ds", "--validate")
    validated = [w for w, s in statuses(engine).items() if s[0] == "human_validated"]
    from labeling.auth.users import get_user
    from labeling.review.labels import edit_label

    ann = get_user(engine, "ann").id
    edit_label(
        engine,
        LabelSubmission(
            campaign_id=campaign,
            work_id=validated[0],
            user_id=ann,
            answers=answer(schema, "cy", 0),
            schema_hash=schema.hash,
            scores_visible=False,
            model_version="m",
            time_on_item_ms=1,
            submission_id="edit-1",
        ),
        schema=schema,
    )
    assert statuses(engine)[validated[0]] == ("human_validated", "model:dawid-skene")


def test_campaigns_create_stores_the_posterior_threshold(engine, db_url, schema) -> None:
    add_works(engine, 3)
    made = run(
        db_url, "campaigns", "create", "m", "--rule", "dawid-skene", "--posterior", "0.9", "-k", "2"
    )
    assert made.exit_code == 0, made.output
    assert get_campaign(engine, "m").rule == "dawid-skene:p=0.9"
    assert run(db_url, "campaigns", "create", "d", "--rule", "dawid-skene").exit_code == 0
    assert get_campaign(engine, "d").rule == "dawid-skene:p=0.95"
    for args in (
        ["--rule", "majority", "--posterior", "0.9"],
        ["--rule", "dawid-skene", "--posterior", "0.5"],
    ):
        bad = CliRunner().invoke(main, ["--db", db_url, "campaigns", "create", "x", *args])
        assert bad.exit_code == 2, bad.output
    with pytest.raises(CampaignError, match="above 0.5"):
        create_campaign(engine, name="y", rule="dawid-skene", posterior=0.4)
    verdict = evaluate([{"genre": "methods"}], ["genre"], "dawid-skene:p=0.9", 1)
    assert verdict.status == "human_in_review" and "aggregate --validate" in verdict.reason


def test_the_monitor_shows_the_model_accuracy_beside_gold(engine, db_url, schema, campaign) -> None:
    from labeling.reports.monitor.view import statistics

    stats = statistics(engine, schema, get_campaign(engine, "ds"))
    table = stats.tables["model_accuracy"]
    assert not table.is_empty
    report = json.loads(run(db_url, "aggregate", "--campaign", "ds", "--json").stdout)
    expected = {a["annotator"]: (a["accuracy"], a["n"]) for a in report["annotators"]}
    got = {r.annotator: (r.model_accuracy, r.model_n) for r in table.raw.itertuples()}
    assert set(got) == set(expected)
    for who, (accuracy, n) in expected.items():  # the Monitor stops EM at 100 rounds
        assert got[who][0] == pytest.approx(accuracy, abs=1e-4) and got[who][1] == n
    # The next view continues each task from the fit kept by the first: the same numbers.
    again = statistics(engine, schema, get_campaign(engine, "ds")).tables["model_accuracy"]
    for r in again.raw.itertuples():
        assert r.model_accuracy == pytest.approx(expected[r.annotator][0], abs=1e-4)
    assert list(table.raw["gold_n"]) == [0, 0, 0]  # no gold checks in this campaign
    assert "gold accuracy [95% CI]" in table.shown.columns
    # Too few shared works: a sentence, not a table.
    small = create_campaign(engine, name="small", overlap=2, questions=QUESTIONS, schema=schema).id
    order = sorted(statuses(engine))
    label(engine, schema, small, add_user(engine, "dan"), "ann", order, 5, tag="small-")
    few = statistics(engine, schema, get_campaign(engine, "small")).tables["model_accuracy"]
    assert few.is_empty and few.empty.startswith("Too few shared labels for the model: 0 work")


def test_the_text_names_fits_that_did_not_settle() -> None:
    from labeling.cli.aggregate import _text

    report = {
        "campaign": "c",
        "method": "dawid-skene",
        "n_labels": 2,
        "n_works": 1,
        "rule": "unanimous",
        "overlap": 1,
        "annotators": [],
        "works": [
            {"work_id": "W1", "n_labels": 2, "answers": {"g": "a"}, "posteriors": {"g": 0.5}}
        ],
        "questions": {
            "g": {"converged": False},
            "cats": {"labels": {"x": {"converged": True}, "y": {"converged": False}}},
        },
    }
    text = _text(report)
    assert "before settling on g, cats: y (" in text and "W1  n=2  g=a (0.500)" in text


# ------------------------------------------------------------------ too few to say, one majority


def two_annotators(engine: Engine, schema: Schema, n: int, rule: str = "dawid-skene") -> int:
    """A campaign "few" of n works, each labelled by ann and bob (k = 2); bob errs on every
    5th work (W0001, W0006, ...), a 1-1 tie on each question there."""
    order = add_works(engine, n)
    cid = create_campaign(
        engine, name="few", strategy="score_max", overlap=2, rule=rule, questions=QUESTIONS
    ).id
    for who in ("ann", "bob"):
        label(engine, schema, cid, add_user(engine, who), who, order, n)
    return cid


def test_too_few_shared_works_give_a_sentence_not_a_posterior(engine, db_url, schema) -> None:
    """9 works with two labels: the Monitor's minimum is 10, and the CLI applies it too."""
    from labeling.stats.overlap import MIN_SHARED_WORKS

    assert MIN_SHARED_WORKS == 10
    two_annotators(engine, schema, 9)
    text = run(db_url, "aggregate", "--campaign", "few")
    assert text.exit_code == 0, text.output  # too few to say is no error
    assert "Too few shared labels for the model: 9 work(s) have two or more labels" in text.output
    assert "at least 10" in text.output
    assert "annotator accuracy" not in text.output and "(0." not in text.output
    result = run(db_url, "aggregate", "--campaign", "few", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["note"].startswith("Too few shared labels for the model: 9 work(s)")
    assert (report["shared_works"], report["min_shared_works"]) == (9, 10)
    assert "annotators" not in report and "questions" not in report
    assert (report["n_works"], report["n_labels"]) == (9, 18)
    assert [w["work_id"] for w in report["works"]] == [f"W{i:04d}" for i in range(1, 10)]
    tie = report["works"][0]  # ann and bob disagree on W0001: the counts say so, no more
    genres = schema.question("genre").labels
    assert tie == {
        "work_id": "W0001",
        "n_labels": 2,
        "counts": {
            "about_ca_system": {"no": 1, "yes": 1},
            "genre": {genres[0]: 1, genres[1]: 1},
        },
    }
    assert all("posteriors" not in w and "answers" not in w for w in report["works"])
    # Majority vote needs no overlap across works: it still answers, per work.
    majority = json.loads(
        run(db_url, "aggregate", "--campaign", "few", "--method", "majority", "--json").stdout
    )
    assert "note" not in majority and len(majority["works"]) == 9


def test_validate_under_the_minimum_settles_nothing_and_says_so(engine, db_url, schema) -> None:
    two_annotators(engine, schema, 9)
    before = statuses(engine)
    text = run(db_url, "aggregate", "--campaign", "few", "--validate")
    assert text.exit_code == 0, text.output
    assert "nothing validated or disputed. Too few shared labels" in text.output
    result = run(db_url, "aggregate", "--campaign", "few", "--validate", "--json")
    assert result.exit_code == 0, result.output
    v = json.loads(result.stdout)["validation"]
    assert (v["validated"], v["disputed"], v["changed"], v["works"]) == (0, 0, 0, 0)
    assert v["note"].startswith("nothing validated or disputed. Too few shared labels")
    assert statuses(engine) == before  # every work still in review


def test_ten_shared_works_give_the_model(engine, db_url, schema) -> None:
    two_annotators(engine, schema, 10)
    report = json.loads(run(db_url, "aggregate", "--campaign", "few", "--json").stdout)
    assert "note" not in report and len(report["works"]) == 10
    assert all(set(w["posteriors"]) == set(QUESTIONS) for w in report["works"])
    assert [a["annotator"] for a in report["annotators"]] == ["ann", "bob"]
    text = run(db_url, "aggregate", "--campaign", "few").output
    assert "annotator accuracy" in text and "Too few" not in text


def test_a_tie_is_no_majority_in_the_cli_and_in_adjudicate(engine, db_url, schema) -> None:
    """A 1-1 tie: `aggregate --method majority`, the majority rule and Adjudicate agree."""
    from labeling.review.adjudication import majority_prefill
    from labeling.review.disputes import disputed_works

    cid = two_annotators(engine, schema, 9, rule="majority")
    result = run(db_url, "aggregate", "--campaign", "few", "--method", "majority", "--json")
    assert result.exit_code == 0, result.output
    works = {w["work_id"]: w for w in json.loads(result.stdout)["works"]}
    tie, agreed = works["W0001"], works["W0002"]
    assert tie["answers"] == {"genre": None, "about_ca_system": None}
    assert tie["posteriors"] == {"genre": 0.5, "about_ca_system": 0.5}
    assert agreed["answers"] == truth(schema, 1)
    assert agreed["posteriors"] == {"genre": 1.0, "about_ca_system": 1.0}
    text = run(db_url, "aggregate", "--campaign", "few", "--method", "majority").output
    line = next(row for row in text.splitlines() if row.startswith("  W0001"))
    assert "genre=no majority (0.500)" in line and "about_ca_system=no majority (0.500)" in line
    # The rule disputed exactly the tied works; Adjudicate starts them with no majority.
    disputed = disputed_works(engine, cid)
    assert [v.work_id for v in disputed] == ["W0001", "W0006"]
    questions = [schema.question(q) for q in QUESTIONS]
    for view in disputed:
        assert majority_prefill(view.answers.values(), questions) == {
            "genre": None,
            "about_ca_system": None,
        }
