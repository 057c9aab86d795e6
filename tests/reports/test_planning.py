"""The planner on a real campaign: counts from the database, the CLI, its errors (both DBs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine

from labeling.cli.main import main
from labeling.reports.evaluation import frame_estimates
from labeling.reports.planning import PlanError, plan_for, plan_sentence
from labeling.review.campaigns import create_campaign
from labeling.schema import Schema
from tests.factories import add_user
from tests.reports.test_evaluation import BIB, HIGH, LOW, QUESTIONS, _frame, _label


def _campaign(engine: Engine, schema: Schema, seed: dict[str, Any], tmp_path: Path) -> Any:
    """The stratified campaign of test_evaluation, every drawn work labelled."""
    _frame(engine, schema, seed, tmp_path)
    camp = create_campaign(engine, name="s", strategy="stratified", allocation=4,
                           bins=[0.0, 0.5, 1.0], questions=QUESTIONS, seed=2)  # fmt: skip
    _label(engine, schema, camp.id, add_user(engine, "ann"))
    return camp


def test_plan_counts_are_those_of_the_estimates(
    engine: Engine, schema: Schema, seed_record: dict[str, Any], tmp_path: Path
) -> None:
    """The plan starts from the interval `labeling estimates` reports, stratum by stratum."""
    camp = _campaign(engine, schema, seed_record, tmp_path)
    est = frame_estimates(engine, schema, camp.id)["questions"]["categories"]["labels"][BIB]
    out = plan_for(engine, schema, camp.name, 0.05, label=f"categories:{BIB}")
    (plan,) = out["plans"]
    overall = est["overall"]
    assert plan["estimate_now"] == pytest.approx(overall["estimate"])
    assert plan["half_width_now"] == pytest.approx((overall["hi"] - overall["lo"]) / 2)
    assert {r["stratum"]: (r["N"], r["n"]) for r in plan["strata"]} == {LOW: (16, 4), HIGH: (8, 4)}
    assert plan["more"] == sum(r["more"] for r in plan["strata"]) > 0
    assert all(r["n"] + r["more"] <= r["N"] for r in plan["strata"])
    # Every drawn work is labelled: whatever more is needed lies beyond the drawn sample.
    assert all(r["available"] == 0 for r in plan["strata"])
    assert plan["beyond_sample"] == plan["more"]
    assert out["largest"]["more"] == plan["more"]
    sentence = plan_sentence(out)
    assert sentence.startswith(f"About {plan['more']} more labelled works (")
    assert f"+-0.05 on categories:{BIB}" in sentence


def test_plan_for_every_label_and_for_a_teacher(
    engine: Engine, schema: Schema, seed_record: dict[str, Any], tmp_path: Path
) -> None:
    camp = _campaign(engine, schema, seed_record, tmp_path)
    every = plan_for(engine, schema, camp.id, 0.1)
    assert {p["question"] for p in every["plans"]} == set(QUESTIONS)
    assert every["largest"]["more"] == max(p["more"] for p in every["plans"])
    prec = plan_for(engine, schema, camp.id, 0.1, label=BIB, measure="precision", teacher="codex")
    assert prec["plans"][0]["measure"] == "precision"
    assert "codex's precision" in plan_sentence(prec)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"label": "no such label"}, "no label 'no such label'"),
        ({"measure": "recall"}, "needs --teacher"),
        ({"measure": "recall", "teacher": "nobody", "label": BIB}, "no system 'nobody'"),
        ({"measure": "accuracy"}, "measure must be one of"),
    ],
)
def test_plan_errors_say_what(
    engine: Engine,
    schema: Schema,
    seed_record: dict[str, Any],
    tmp_path: Path,
    kwargs: dict[str, Any],
    message: str,
) -> None:
    camp = _campaign(engine, schema, seed_record, tmp_path)
    with pytest.raises(PlanError, match=message):
        plan_for(engine, schema, camp.id, 0.05, **kwargs)


def test_plan_cli(
    db_url: str, engine: Engine, schema: Schema, seed_record: dict[str, Any], tmp_path: Path
) -> None:
    """`labeling plan`: the sentence, --json, and exit 2 for a campaign that is no sample."""
    _campaign(engine, schema, seed_record, tmp_path)
    create_campaign(engine, name="top", strategy="score_max", questions=QUESTIONS)
    run = CliRunner().invoke
    args = ["--db", db_url, "plan", "--campaign", "s", "--half-width", "0.05"]
    text = run(main, [*args, "--label", BIB])
    assert text.exit_code == 0, text.output
    assert text.output.startswith("About ") and "categories" in text.output
    as_json = run(main, [*args, "--label", BIB, "--json"])
    data = json.loads(as_json.output)
    assert set(data) == {"campaign", "measure", "teacher", "half_width", "plans", "largest"}
    refused = run(main, ["--db", db_url, "plan", "--campaign", "top", "--half-width", "0.05"])
    assert refused.exit_code == 2 and "not a probability sample" in refused.output
    wide = run(main, [*args[:-1], "0.9"])
    assert wide.exit_code == 2 and "half-width" in wide.output
