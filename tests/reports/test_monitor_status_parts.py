"""The Monitor's status parts (machines, estimates, plan) are kept while their inputs are equal
and recomputed as soon as a validated work, a final answer or the design changes (both DBs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from db.engine import read_session
from db.models import StatusEvent
from labeling.reports.evaluation import frame_estimates, machine_report, validated_works
from labeling.reports.monitor.status_parts import CACHE
from labeling.reports.monitor.view import Statistics, statistics
from labeling.review.campaigns import CampaignInfo, create_campaign, get_campaign
from labeling.review.labels import LabelSubmission, edit_label, submit_label
from labeling.review.queue import claim_next
from labeling.review.validation import adjudicate, reopen
from labeling.schema import Schema
from tests.factories import add_user
from tests.reports.test_evaluation import QUESTIONS, _frame, _truth


@pytest.fixture(autouse=True)
def _empty_cache() -> Any:
    """Each test starts and ends with an empty cache."""
    CACHE.clear()
    yield
    CACHE.clear()


def _campaign(engine: Engine, schema: Schema, seed: dict[str, Any], tmp: Path, **kw: Any) -> int:
    """A stratified sample of 8 of the 24 test works (overlap 2 unless told)."""
    _frame(engine, schema, seed, tmp)
    camp = create_campaign(engine, name="s", strategy="stratified", allocation=4,
                           bins=[0.0, 0.5, 1.0], questions=QUESTIONS, seed=2,
                           **{"overlap": 2, **kw})  # fmt: skip
    return camp.id


def _fresh(engine: Engine, schema: Schema, info: CampaignInfo) -> tuple[str, str]:
    """Machines and estimates computed directly (no cache), as JSON."""
    v = validated_works(engine, schema, info.id)
    return (
        json.dumps(machine_report(engine, schema, info, validated=v), sort_keys=True),
        json.dumps(frame_estimates(engine, schema, info, validated=v), sort_keys=True),
    )


def _shown(stats: Statistics) -> tuple[str, str]:
    """The page's machines table and estimates, as JSON."""
    return (
        stats.tables["machines"].raw.to_json(),
        json.dumps(stats.estimates, sort_keys=True),
    )


def _label(
    engine: Engine,
    schema: Schema,
    cid: int,
    uid: int,
    limit: int | None = None,
    wrong: bool = False,
) -> list:
    """Claim and label works with their true answers, or the wrong genre (one submission id
    per user and work)."""
    done: list[str] = []
    while limit is None or len(done) < limit:
        claim = claim_next(engine, cid, uid)
        if claim is None:
            break
        sub = LabelSubmission(campaign_id=cid, work_id=claim.work_id, user_id=uid,
                              answers=_answers(claim.work_id, wrong), schema_hash=schema.hash,
                              scores_visible=True, model_version="m", time_on_item_ms=500,
                              submission_id=f"{uid}:{claim.work_id}")  # fmt: skip
        submit_label(engine, sub, schema=schema)
        done.append(claim.work_id)
    return done


def _answers(work_id: str, wrong: bool) -> dict[str, Any]:
    """The true answers, or with the other genre."""
    truth = _truth(work_id)
    if wrong:
        truth["genre"] = "empirical" if truth["genre"] == "methods" else "methods"
    return truth


def _events(engine: Engine) -> int:
    """The newest status event id."""
    with read_session(engine) as session:
        return int(session.execute(select(func.coalesce(func.max(StatusEvent.id), 0))).scalar())


def test_a_label_that_validates_nothing_reuses_them_a_status_change_does_not(
    engine: Engine, schema: Schema, seed_record: dict[str, Any], tmp_path: Path
) -> None:
    cid = _campaign(engine, schema, seed_record, tmp_path)
    a, b, c = (add_user(engine, n) for n in ("a", "b", "c"))
    _label(engine, schema, cid, a, limit=6)
    _label(engine, schema, cid, b, limit=4)  # second labels, equal answers: validated
    first = statistics(engine, schema, get_campaign(engine, cid))
    assert (CACHE.hits, CACHE.misses) == (0, 1)
    before = _events(engine)
    # A second label that disagrees: the work becomes disputed, the validated ones stay.
    assert _label(engine, schema, cid, c, limit=1, wrong=True)
    assert _events(engine) > before  # though it writes a status event (now disputed)
    info = get_campaign(engine, cid)
    again = statistics(engine, schema, info)
    assert (CACHE.hits, CACHE.misses) == (1, 1)
    assert _shown(again) == _shown(first)
    assert again.sentences["plan"] == first.sentences["plan"]
    assert json.dumps(again.estimates, sort_keys=True) == _fresh(engine, schema, info)[1]
    # A status change to validated (a lead settles a work) recomputes them.
    work = validated_works(engine, schema, cid).ids
    todo = [w for w in _label_ids(engine, cid) if w not in work]
    adjudicate(engine, todo[0], _truth(todo[0]), "settled", add_user(engine, "lead", "lead"),
               cid, schema=schema)  # fmt: skip
    info = get_campaign(engine, cid)
    settled = statistics(engine, schema, info)
    assert (CACHE.hits, CACHE.misses) == (1, 2)
    assert _shown(settled) != _shown(first)
    want = _shown(settled)
    CACHE.clear()
    assert _shown(statistics(engine, schema, info)) == want  # as computed afresh
    # And back: reopening it is a change again, and gives the first numbers.
    reopen(engine, todo[0], add_user(engine, "lead2", "lead"), "again", schema=schema)
    back = statistics(engine, schema, get_campaign(engine, cid))
    assert (CACHE.hits, CACHE.misses) == (0, 2)
    assert _shown(back) == _shown(first)


def _label_ids(engine: Engine, cid: int) -> list[str]:
    """The campaign's labelled works."""
    from db.models import Label

    with read_session(engine) as session:
        return sorted(
            set(session.execute(select(Label.work_id).where(Label.campaign_id == cid)).scalars())
        )


def test_a_final_answer_that_changes_while_still_validated_recomputes_them(
    engine: Engine, schema: Schema, seed_record: dict[str, Any], tmp_path: Path
) -> None:
    cid = _campaign(engine, schema, seed_record, tmp_path, overlap=1)
    a = add_user(engine, "a")
    done = _label(engine, schema, cid, a)
    first = statistics(engine, schema, get_campaign(engine, cid))
    before = _events(engine)
    wid = done[0]
    other = {**_truth(wid), "categories": [] if _truth(wid)["categories"] else ["Bibliometrics"]}
    edit_label(
        engine,
        LabelSubmission(campaign_id=cid, work_id=wid, user_id=a, answers=other,
                        schema_hash=schema.hash, scores_visible=True, model_version="m",
                        time_on_item_ms=500, submission_id=f"edit:{wid}"),
        schema=schema,
    )  # fmt: skip
    # Still validated, other answers: the change is recorded (README, "Ground truth").
    assert _events(engine) == before + 1
    info = get_campaign(engine, cid)
    edited = statistics(engine, schema, info)
    assert CACHE.misses == 2 and CACHE.hits == 0
    assert _shown(edited) != _shown(first)
    assert json.dumps(edited.estimates, sort_keys=True) == _fresh(engine, schema, info)[1]


def test_the_cycle_collector_is_paused_during_statistics_and_resumed_after(
    engine: Engine, schema: Schema, seed_record: dict[str, Any], tmp_path: Path
) -> None:
    import gc

    from labeling.reports.monitor import view

    cid = _campaign(engine, schema, seed_record, tmp_path)
    seen: list[bool] = []
    real = view.validated_works

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    view.validated_works = spy  # type: ignore[assignment]
    try:
        assert gc.isenabled()
        statistics(engine, schema, get_campaign(engine, cid))
        assert seen == [False] and gc.isenabled()
        gc.disable()  # paused by someone else before: stays paused
        statistics(engine, schema, get_campaign(engine, cid))
        assert not gc.isenabled()
    finally:
        gc.enable()
        view.validated_works = real  # type: ignore[assignment]
