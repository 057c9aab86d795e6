"""Randomised assist arms end to end: the label flow draws them, the report compares them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine, select

from db.engine import read_session
from db.models import Label
from labeling.cli.main import main
from labeling.reports.anchoring import anchoring_report
from labeling.review import flow
from labeling.review.assist import scores_shown
from labeling.review.campaigns import CampaignError, create_campaign
from labeling.schema import Schema
from labeling.settings import get_settings
from tests.factories import add_user
from tests.reports.test_evaluation import BIB, _high, _truth


def _codex_calls(work_id: str) -> list[str]:
    """Codex's call on categories in the test frame: Bibliometrics on the high works and W09."""
    i = int(work_id[1:])
    return [BIB] if _high(i) or i == 9 else []


def _label_all(engine: Engine, schema: Schema, cid: int, users: list[int]) -> None:
    """Each user labels every work through the label flow; shown the scores, they copy codex."""
    for uid in users:
        while True:
            item = flow.next_item(engine, cid, uid, schema, settings=get_settings())
            if item.work_id is None:
                break
            draft = flow.Draft.fresh(item.questions)
            wid = item.work_id
            copied = item.scores_visible
            draft.answers["categories"] = _codex_calls(wid) if copied else _truth(wid)["categories"]
            out = flow.save(engine, item, draft, user_id=uid, schema=schema)
            assert out.saved, out.message


def labelled_arms(engine: Engine, schema: Schema, *, overlap: int, seed: int) -> Any:
    """A campaign with arms (R = 0.5) on categories, every work labelled by `overlap` users."""
    camp = create_campaign(engine, name="arms", strategy="score_max", overlap=overlap,
                           assist_rate=0.5, seed=seed, questions=["categories"])  # fmt: skip
    _label_all(engine, schema, camp.id, [add_user(engine, f"ann{i}") for i in range(overlap)])
    return camp


def test_arms_are_drawn_per_assignment_recorded_and_compared(frame: Engine, schema: Schema) -> None:
    engine = frame
    camp = labelled_arms(engine, schema, overlap=3, seed=3)
    assert camp.assist_rate == 0.5
    with read_session(engine) as session:
        rows = session.execute(
            select(Label.work_id, Label.user_id, Label.scores_visible).where(
                Label.campaign_id == camp.id
            )
        ).all()
    assert len(rows) == 72
    # Each label recorded the arm its assignment was drawn into, reproducibly.
    assert all(r[2] == scores_shown(0.5, 3, camp.id, r[0], r[1]) for r in rows)
    shown = sum(bool(r[2]) for r in rows)
    assert 20 <= shown <= 52  # about half of 72
    report = anchoring_report(engine, schema, camp.name)
    assert report["randomised"] and report["note"] is None
    assert report["arms"] == {"shown": shown, "hidden": 72 - shown}
    codex = report["questions"]["categories"]["teachers"]["codex"]
    assert (codex["n_shown"], codex["n_hidden"]) == (shown, 72 - shown)
    assert codex["rate_shown"] == 1.0  # they copied codex whenever they saw it
    assert codex["rate_hidden"] < 1.0 and codex["difference"] > 0
    assert codex["lo"] < codex["difference"] < codex["hi"]
    # The comparison with the validated answers is there too (whatever the rule validated).
    assert "validated" in report["questions"]["categories"]
    json.dumps(report, allow_nan=False)


def test_assist_rate_is_checked() -> None:
    with pytest.raises(CampaignError, match="strictly between 0 and 1"):
        create_campaign(None, name="x", assist_rate=1.0)  # type: ignore[arg-type]
    with pytest.raises(CampaignError, match="either --blind or an assist rate"):
        create_campaign(None, name="x", assist_rate=0.5, blind=True)  # type: ignore[arg-type]


def test_anchoring_cli(db_url: str, frame: Engine, schema: Schema) -> None:
    """`labeling anchoring`: JSON keys, the text lines, a campaign without arms says so."""
    engine = frame
    run = CliRunner().invoke
    create = ["--db", db_url, "campaigns", "create"]
    made = run(main, [*create, "arms", "--strategy", "score_max", "--overlap", "2",
                      "--assist-rate", "0.5", "--questions", "categories"])  # fmt: skip
    assert made.exit_code == 0, made.output
    bad = run(main, ["--db", db_url, "campaigns", "create", "b", "--assist-rate", "0.5", "--blind"])
    assert bad.exit_code == 2 and "either --blind or an assist rate" in bad.output
    out_of_range = run(main, ["--db", db_url, "campaigns", "create", "c", "--assist-rate", "1"])
    assert out_of_range.exit_code == 2
    create_campaign(engine, name="open", strategy="score_max")
    from labeling.review.campaigns import get_campaign

    _label_all(engine, schema, get_campaign(engine, "arms").id, [add_user(engine, "a"),
                                                               add_user(engine, "b")])  # fmt: skip
    data = json.loads(
        run(main, ["--db", db_url, "anchoring", "--campaign", "arms", "--json"]).output
    )
    assert set(data) == {"campaign", "assist_rate", "randomised", "n_labels", "arms", "method",
                         "min_arm_n", "note", "questions"}  # fmt: skip
    assert data["n_labels"] == 48
    text = run(main, ["--db", db_url, "anchoring", "--campaign", "arms"])
    assert text.exit_code == 0 and "categories      vs codex's call" in text.output
    plain = run(main, ["--db", db_url, "anchoring", "--campaign", "open"])
    assert plain.exit_code == 0 and "does not randomise the arms" in plain.output
