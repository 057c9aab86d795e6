"""The Monitor's design lines: the sample-size plan and the anchoring arms (both DBs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from labeling.reports.anchoring import anchoring_report
from labeling.reports.evaluation import validated_works
from labeling.reports.monitor.design import NO_ARMS
from labeling.reports.monitor.view import statistics
from labeling.reports.planning import plan_for, plan_sentence
from labeling.review.campaigns import create_campaign, get_campaign
from labeling.schema import Schema
from tests.factories import add_user
from tests.reports.test_anchoring import labelled_arms
from tests.reports.test_evaluation import QUESTIONS, _frame, _label


def test_a_sample_campaign_shows_its_plan_and_no_arms(
    engine: Engine, schema: Schema, seed_record: dict[str, Any], tmp_path: Path
) -> None:
    _frame(engine, schema, seed_record, tmp_path)
    camp = create_campaign(engine, name="s", strategy="stratified", allocation=4,
                           bins=[0.0, 0.5, 1.0], questions=QUESTIONS, seed=2)  # fmt: skip
    _label(engine, schema, camp.id, add_user(engine, "ann"))
    info = get_campaign(engine, camp.id)
    stats = statistics(engine, schema, info)
    want = plan_sentence(plan_for(engine, schema, info, 0.03,
                                  validated=validated_works(engine, schema, info.id)))  # fmt: skip
    assert stats.sentences["plan"] == want and want.startswith("About ")
    assert stats.tables["anchoring"].is_empty and stats.tables["anchoring"].empty == NO_ARMS


def test_an_assist_campaign_shows_the_report_s_numbers(frame: Engine, schema: Schema) -> None:
    engine = frame
    camp = labelled_arms(engine, schema, overlap=2, seed=5)
    stats = statistics(engine, schema, get_campaign(engine, camp.id))
    assert stats.sentences["plan"] == ""  # a score order is no sample: no plan line
    rows = stats.tables["anchoring"].raw
    codex = rows[rows["agreement with"] == "codex's call"].iloc[0]
    report = anchoring_report(engine, schema, camp.id)["questions"]["categories"]
    want = report["teachers"]["codex"]
    assert (codex["n shown"], codex["n hidden"]) == (want["n_shown"], want["n_hidden"])
    assert codex["difference"] == pytest.approx(want["difference"])
    assert set(rows["agreement with"]) == {"codex's call", "gemma's call", "validated answer"}
