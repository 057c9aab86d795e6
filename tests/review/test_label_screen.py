"""The label page's server side without a browser or Streamlit: actions checked and applied."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, select

from db.engine import read_session
from db.models import Label, Lease
from labeling.errors import StorageError
from labeling.review import flow
from labeling.review import label_screen as ls
from labeling.review.campaigns import create_campaign
from labeling.schema import Schema
from labeling.settings import Settings
from tests.factories import add_user, add_works

OFFLINE = Settings(openalex_offline=True)  # passed in: abstracts are never fetched
ANSWERS = {
    "categories": ["Open science"],
    "about_ca_system": "no",
    "about_ca_topic": "yes",
    "domain": "cross_domain",
    "study_design": "meta_analysis",
    "genre": "review",
}


@pytest.fixture
def world(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Five works, two open campaigns, one annotator; abstracts never fetched."""
    monkeypatch.setenv("LABELING_OPENALEX_OFFLINE", "true")
    from labeling.settings import get_settings

    get_settings.cache_clear()
    add_works(engine, 5)
    one = create_campaign(engine, name="one", strategy="score_opus").id
    two = create_campaign(engine, name="two", strategy="score_gpt").id
    return {"user": add_user(engine, "ann"), "one": one, "two": two}


def submit(screen: ls.Screen, action_id: str = "a1", **changes: Any) -> dict[str, Any]:
    """A submit action for the work on screen."""
    item, _ = screen.shown()
    payload = {
        "id": action_id,
        "type": "submit",
        "work_id": item.work_id,
        "submission_id": item.submission_id,
        "answers": dict(ANSWERS),
        "confidence": 2,
        "flagged": False,
        "note": "",
        "time_on_item_ms": 2500,
    }
    payload.update(changes)
    return payload


def rows(engine: Engine) -> list[Label]:
    """Every stored label version, oldest first."""
    with read_session(engine) as session:
        found = list(session.execute(select(Label).order_by(Label.id)).scalars())
        session.expunge_all()
    return found


@pytest.mark.parametrize(
    ("payload", "said"),
    [
        (None, "must be an object"),
        ([], "must be an object"),
        ({"id": "x"}, "'type' must be text"),
        ({"id": "x" * 65, "type": "back"}, "1 to 64 characters"),
        ({"id": "x", "type": "submit", "answers": []}, "must be an object of question"),
        (
            {"id": "x", "type": "submit", "answers": {"categories": "Open science"}},
            "'categories' must be a list of labels",
        ),
        (
            {"id": "x", "type": "submit", "answers": {"domain": ["cross_domain"]}},
            "'domain' must be one label or null",
        ),
        ({"id": "x", "type": "submit", "answers": {}, "flagged": "yes"}, "'flagged' must be true"),
        ({"id": "x", "type": "submit", "answers": {}, "confidence": True}, "confidence must be"),
        ({"id": "x", "type": "submit", "answers": {}, "note": "n" * 20_001}, "at most 20,000"),
        ({"id": "x", "type": "submit", "answers": {}, "time_on_item_ms": -1}, "time_on_item_ms"),
        (
            {"id": "x", "type": "submit", "answers": {}, "submission_id": "s", "work_id": 7},
            "'work_id' must be text",
        ),
    ],
)
def test_parse_refuses_what_it_cannot_use(schema: Schema, payload: Any, said: str) -> None:
    with pytest.raises(ls.ActionError, match=said.replace("(", r"\(")):
        ls.parse_action(payload, list(schema.questions))


def test_parse_shapes_a_submit_into_a_draft(schema: Schema) -> None:
    action = ls.parse_action(
        {
            "id": "a",
            "type": "submit",
            "work_id": "W1",
            "submission_id": "s",
            "answers": {"domain": "cross_domain"},
            "confidence": 3,
            "flagged": True,
            "note": "n",
            "skip_reason": "other",
            "time_on_item_ms": 12.7,
        },
        list(schema.questions),
    )
    assert action.draft.answers["categories"] == [] and action.draft.answers["genre"] is None
    assert (action.draft.confidence, action.draft.flagged, action.draft.note) == (3, True, "n")
    assert (action.skip_reason, action.time_on_item_ms, action.work_id) == ("other", 12, "W1")


def test_submit_is_stored_before_the_next_work_and_once(
    engine: Engine, schema: Schema, world: dict[str, Any]
) -> None:
    screen = ls.apply_action(
        engine, ls.Screen(world["user"]), None, schema=schema, settings=OFFLINE
    )
    first = screen.item.work_id
    assert screen.campaign_id == world["one"] and first == "W0001"
    ls.apply_action(engine, screen, submit(screen), schema=schema, settings=OFFLINE)
    (label,) = rows(engine)
    assert (label.work_id, label.answers, label.time_on_item_ms) == (first, ANSWERS, 2500)
    assert screen.item.work_id == "W0002" and screen.ack == "a1" and screen.ack_ok
    assert screen.message == ("success", f"Saved {first} (version 1).")
    again = dict(
        submit(screen), work_id=first, submission_id=f"first:{world['one']}:{world['user']}:{first}"
    )
    ls.apply_action(
        engine, screen, dict(again, id="a1"), schema=schema, settings=OFFLINE
    )  # the same trigger
    assert len(rows(engine)) == 1 and screen.item.work_id == "W0002"
    ls.apply_action(
        engine, screen, dict(again, id="a2"), schema=schema, settings=OFFLINE
    )  # W0001 is gone
    assert len(rows(engine)) == 1 and not screen.ack_ok
    assert "no longer on screen" in screen.message[1]


def test_a_failed_write_keeps_the_answers_and_says_why(
    engine: Engine, schema: Schema, world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    screen = ls.apply_action(
        engine, ls.Screen(world["user"]), None, schema=schema, settings=OFFLINE
    )

    def full(*args: Any, **kwargs: Any) -> Any:
        raise StorageError("Not saved: the database's disk is full")

    monkeypatch.setattr(flow, "submit_label", full)
    ls.apply_action(
        engine, screen, submit(screen, note="kept", flagged=True), schema=schema, settings=OFFLINE
    )
    assert rows(engine) == [] and not screen.ack_ok and screen.item.work_id == "W0001"
    assert screen.message[0] == "error" and "your answers are kept here" in screen.message[1]
    assert screen.draft.answers == ANSWERS and screen.draft.note == "kept"
    assert screen.draft.flagged and screen.draft.confidence == 2


def test_switching_campaign_releases_the_lease(
    engine: Engine, schema: Schema, world: dict[str, Any]
) -> None:
    screen = ls.apply_action(
        engine, ls.Screen(world["user"]), None, schema=schema, settings=OFFLINE
    )
    ls.apply_action(
        engine,
        screen,
        {"id": "c", "type": "campaign", "campaign_id": world["two"]},
        schema=schema,
        settings=OFFLINE,
    )
    assert screen.campaign_id == world["two"] and screen.item.campaign_id == world["two"]
    with read_session(engine) as session:
        held = session.execute(select(Lease.campaign_id)).scalars().all()
    assert held == [world["two"]]
    ls.apply_action(
        engine,
        screen,
        {"id": "d", "type": "campaign", "campaign_id": 999},
        schema=schema,
        settings=OFFLINE,
    )
    assert not screen.ack_ok and "not open" in screen.message[1]
    assert screen.campaign_id == world["two"]


def test_a_reload_or_a_second_tab_gets_the_work_the_user_holds(
    engine: Engine, schema: Schema, world: dict[str, Any]
) -> None:
    """A new page (a reload, another tab) opens the campaign and work the user has leased,
    not a second work of the first campaign; both tabs submitting it store one label."""
    tab1 = ls.apply_action(engine, ls.Screen(world["user"]), None, schema=schema, settings=OFFLINE)
    ls.apply_action(
        engine,
        tab1,
        {"id": "c", "type": "campaign", "campaign_id": world["two"]},
        schema=schema,
        settings=OFFLINE,
    )
    held = tab1.item.work_id
    tab2 = ls.apply_action(engine, ls.Screen(world["user"]), None, schema=schema, settings=OFFLINE)
    assert (tab2.campaign_id, tab2.item.work_id) == (world["two"], held)
    with read_session(engine) as session:
        assert session.execute(select(Lease.work_id)).scalars().all() == [held]
    ls.apply_action(engine, tab1, submit(tab1, "t1"), schema=schema, settings=OFFLINE)
    ls.apply_action(engine, tab2, submit(tab2, "t2", confidence=3), schema=schema, settings=OFFLINE)
    assert [(r.work_id, r.version, r.confidence) for r in rows(engine)] == [(held, 1, 2)]
    assert tab2.message[0] == "warning" and "already saved" in tab2.message[1]
    assert "this submit stored nothing" in tab2.message[1]
    assert tab1.item.work_id == tab2.item.work_id != held  # the next work, leased once
    with read_session(engine) as session:
        assert len(session.execute(select(Lease.work_id)).scalars().all()) == 1
