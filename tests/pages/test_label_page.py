"""The label page in AppTest: the server side of the label component.

A fake browser (tests/label_page.py) sends the actions the component's JS sends; the tests
check what is stored and what the page gives the component to show next.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from labeling.database import dispose_all, get_engine
from labeling.settings import get_settings
from tests.label_page import (  # noqa: F401 - the helpers other test modules import from here
    APP,
    HOSTILE,
    PASSWORD,
    Browser,
    build_label_db,
    first_answers,
    form,
    labels,
    login,
    plain,
    seed_records,
    texts,
)


@pytest.fixture
def label_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The app pointed at a fresh label database in offline mode."""
    url = f"sqlite:///{tmp_path / 'label.db'}"
    monkeypatch.setenv("LABELING_DB_URL", url)
    monkeypatch.setenv("LABELING_OPENALEX_OFFLINE", "true")
    get_settings.cache_clear()
    st.cache_resource.clear()
    from labeling.review.flow import forget_progress

    forget_progress()
    build_label_db(url, tmp_path, hostile_first=True)
    yield url
    st.cache_resource.clear()
    get_settings.cache_clear()
    dispose_all()


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch) -> Browser:
    """The label component's browser side, faked: actions sent as its JS sends them."""
    return Browser(monkeypatch)


def choose_campaign(at: AppTest, browser: Browser, name: str) -> AppTest:
    """Pick a campaign in the form's campaign menu."""
    ids = {c["name"].removesuffix(" (blind)"): c["id"] for c in form(at)["campaigns"]}
    return browser.send(at, "campaign", campaign_id=ids[name])


def screen(at: AppTest) -> Any:
    """The page's server-side state."""
    return at.session_state["lbl_screen"]


# ------------------------------------------------------------------ the card


def test_card_data_is_plain_text_and_safe_links(label_db: str) -> None:
    data = form(login("annotator"))
    card = data["card"]
    # Text is handed to the browser as is (it sets it with textContent); no Markdown, no HTML.
    assert card["title"] == HOSTILE
    assert card["abstract"]["text"].startswith("Abstract of W9000001: <b>not bold</b>")
    assert card["links"] == [
        {"text": "OpenAlex W9000001", "href": "https://openalex.org/W9000001"},
        {"text": "DOI 10.1145/3721145.3730418", "href": "https://doi.org/10.1145/3721145.3730418"},
    ]
    assert ["Institutions", ["University of Waterloo"]] in card["lists"]
    assert ["ca_aff", True] in card["routes"] and card["retraction"] == "Not retracted"
    assert "Computer Science" in card["facts"] and "cited by 1" in card["facts"]


JARGON = ("candidate", "consensus", "head", "student", "maturity", "teacher", "threshold")


def test_the_scores_read_in_plain_words_and_the_precise_terms_are_behind_the_fold(
    label_db: str,
) -> None:
    """A newcomer reads the block beside the options without the project's jargon; the words
    it stands for are under "How this classification was reached"."""
    data = form(login("annotator"))
    teachers = data["teachers"]
    shown = [teachers["legend"]] + [
        f"{q['agreement_text']} {q['reading']}" for q in teachers["questions"]
    ]
    assert [w for w in JARGON if any(w in text.lower() for text in shown)] == []
    design = {q["name"]: q for q in teachers["questions"]}["study_design"]
    assert design["agreement_text"] == "the two models pick differently"
    # The record's own candidate and consensus (the seed's candidate is one call only).
    assert design["reading"] == "picked by either model: simulation_or_modeling · by both: —"
    terms = data["details"]["terms"]
    for word in ("Candidate", "consensus", "Student model", "head", "Maturity gate"):
        assert word in terms


def test_card_shows_both_teachers_side_by_side_and_the_details(label_db: str) -> None:
    data = form(login("annotator"))
    teachers = data["teachers"]
    assert teachers["names"] == ["Codex", "Gemma"]
    assert "⚠ a question where the two pick differently" in teachers["legend"]
    by_name = {q["name"]: q for q in teachers["questions"]}
    design = by_name["study_design"]
    assert design["agreement"] == "disagree"  # the seed record's teachers split on it
    assert design["calls"] == ["Codex: design_other", "Gemma: simulation_or_modeling"]
    rows = {r["label"]: r for r in design["rows"]}
    assert rows["simulation_or_modeling"]["called"] == [False, True]
    assert rows["simulation_or_modeling"]["split"] and rows["design_other"]["split"]
    assert rows["simulation_or_modeling"]["scores"] == ["0.208", "0.980"]
    assert any("is not its highest score" in n for n in by_name["genre"]["notes"])
    yes_no = {r["label"]: r["called"] for r in by_name["about_ca_system"]["rows"]}
    assert yes_no == {"yes": [False, False], "no": [True, True]}
    details = data["details"]  # behind "How this classification was reached"
    assert details["machine"]["validation_status"] == "score_only:v0-immature-baseline"
    assert "provisional, baseline, maturity gate not passed" in details["machine"]["flags"]
    assert "it never asserts a category" in details["rank"]
    assert "Scores rank; they never assert a category" in details["machine"]["note"]
    assert details["tables"][0]["head"] == [
        "Label",
        "Codex",
        "Gemma",
        "Cand.",
        "Cons.",
        "Agreement",
    ]
    keys = [q["key"] for q in data["questions"]]
    assert keys == ["Q", "W", "E", "T", "Y", "U"]
    assert all(q["definition"] for q in data["questions"])  # D shows the codebook in place


def test_offline_abstract_state_is_said_plainly(label_db: str, browser: Browser) -> None:
    at = choose_campaign(login("annotator"), browser, "tail")
    abstract = form(at)["card"]["abstract"]
    assert abstract["state"] == "offline" and "Offline mode" in abstract["message"]
    assert abstract["retry"] is True
    browser.send(at, "retry_abstract")
    assert form(at)["card"]["abstract"]["state"] == "offline"
    browser.submit(at)
    assert len(labels(label_db)) == 1
    assert form(at)["state"] == "done"


# ------------------------------------------------------------------ labelling


def test_label_is_stored_once_before_the_next_work_shows(label_db: str, browser: Browser) -> None:
    at = login("annotator")
    data = form(at)
    assert data["work_id"] == "W9000001" and data["ctx"]["mode"] == "queue"
    answers = dict(first_answers(data), categories=["Metaresearch", "Open science"])
    browser.submit(at, answers, ms=4321)
    (label,) = labels(label_db)
    assert label.work_id == "W9000001" and label.version == 1 and not label.skipped
    assert label.answers == answers and label.time_on_item_ms == 4321
    assert label.scores_visible is True
    assert label.model_version == "metacan-v3-hybrid-931329e0061c" and label.schema_hash
    after = form(at)
    assert after["work_id"] == "W9000002" and after["card"]["title"].startswith("Test work 2:")
    assert after["ack"] == browser.sent[-1]["id"] and after["ack_ok"] is True
    assert after["message"] == {"kind": "success", "text": "Saved W9000001 (version 1)."}
    assert "· your labels: 1 ·" in after["progress"]["text"]
    # The same trigger delivered twice (a reconnect) is applied once.
    browser.resend(at, browser.sent[-1])
    assert len(labels(label_db)) == 1 and form(at)["work_id"] == "W9000002"
    assert form(at)["message"] is None


def test_double_submit_of_one_work_stores_one_label(label_db: str, browser: Browser) -> None:
    """Two submits of the same work (two ids, one submission id): one label, said plainly."""
    one, two = login("annotator"), login("annotator")  # two tabs hold the same lease
    assert form(one)["work_id"] == form(two)["work_id"] == "W9000001"
    browser.submit(one)
    browser.submit(two)
    assert len(labels(label_db)) == 1
    assert "already saved" in form(two)["message"]["text"]
    assert form(two)["message"]["kind"] == "warning" and form(two)["work_id"] == "W9000002"


def test_incomplete_label_is_refused_with_the_missing_questions(
    label_db: str, browser: Browser
) -> None:
    at = login("annotator")
    answers = dict(first_answers(form(at)), domain=None, genre=None)
    browser.submit(at, answers)
    assert labels(label_db) == []
    data = form(at)
    assert data["message"]["kind"] == "error" and data["ack_ok"] is False
    assert "Answer every question first: domain, genre" in data["message"]["text"]
    assert data["work_id"] == "W9000001" and data["draft"]["answers"] == answers


def test_a_submit_for_a_work_no_longer_shown_is_refused(label_db: str, browser: Browser) -> None:
    at = login("annotator")
    data = form(at)
    browser.send(
        at,
        "submit",
        submission_id="first:1:1:W9000009",
        work_id="W9000009",
        answers=first_answers(data),
    )
    assert labels(label_db) == []
    assert "no longer on screen" in form(at)["message"]["text"]
    assert form(at)["work_id"] == "W9000001"


@pytest.mark.parametrize(
    ("payload", "said"),
    [
        ("junk", "must be an object"),
        ({"type": "submit"}, "'id' must be text"),
        ({"id": "", "type": "submit"}, "needs an id of 1 to 64"),
        ({"id": "x", "type": "dance"}, "unknown action type 'dance'"),
        ({"id": "x", "type": "submit", "answers": {"nope": 1}}, "does not ask: ['nope']"),
        ({"id": "x", "type": "submit", "answers": {}, "confidence": 7}, "confidence must be"),
        ({"id": "x", "type": "submit", "answers": {}, "skip_reason": "bored"}, "unknown skip"),
        ({"id": "x", "type": "campaign", "campaign_id": "1"}, "whole-number 'campaign_id'"),
    ],
)
def test_a_malformed_action_is_said_and_stores_nothing(
    label_db: str, browser: Browser, payload: Any, said: str
) -> None:
    at = login("annotator")
    browser.resend(at, payload)
    data = form(at)
    assert data["message"]["kind"] == "error" and said in data["message"]["text"]
    assert labels(label_db) == [] and data["work_id"] == "W9000001"


def test_skip_records_the_reason(label_db: str, browser: Browser) -> None:
    at = login("annotator")
    browser.submit(at, skip="no_abstract")
    (label,) = labels(label_db)
    assert label.skipped and label.skip_reason == "no_abstract" and label.work_id == "W9000001"
    assert form(at)["work_id"] == "W9000002"
    assert "· your labels: 0 (and 1 skipped) ·" in form(at)["progress"]["text"]


def test_flag_confidence_and_note_are_stored(label_db: str, browser: Browser) -> None:
    at = login("annotator")
    browser.submit(at, flagged=True, confidence=3, note="  check the venue ")
    (label,) = labels(label_db)
    assert label.flagged and label.confidence == 3 and label.note == "check the venue"


def test_edit_previous_label_writes_a_new_version(label_db: str, browser: Browser) -> None:
    at = login("annotator")
    browser.submit(at, confidence=2)
    browser.send(at, "back")
    data = form(at)
    assert data["work_id"] == "W9000001" and data["editing"] == {"version": 1}
    assert data["ctx"]["mode"] == "edit:1" and data["submission_id"].startswith("edit:")
    assert data["draft"]["answers"]["about_ca_system"] == "yes" and data["draft"]["confidence"] == 2
    browser.submit(at, dict(data["draft"]["answers"], about_ca_system="no"), confidence=2)
    rows = labels(label_db)
    assert [(r.work_id, r.version) for r in rows] == [("W9000001", 1), ("W9000001", 2)]
    assert [r.answers["about_ca_system"] for r in rows] == ["yes", "no"]
    assert form(at)["work_id"] == "W9000002" and form(at)["editing"] is None  # back in the queue


def test_edit_can_be_left_without_saving(label_db: str, browser: Browser) -> None:
    at = login("annotator")
    browser.submit(at)
    browser.send(at, "back")
    assert form(at)["work_id"] == "W9000001"
    browser.send(at, "back")  # nothing older: stays, says so, the action did not move
    assert form(at)["work_id"] == "W9000001" and form(at)["ack_ok"] is False
    assert "No earlier label" in form(at)["message"]["text"]
    browser.send(at, "resume")
    assert form(at)["work_id"] == "W9000002" and form(at)["editing"] is None
    assert len(labels(label_db)) == 1


def test_another_annotator_sees_none_of_my_labels(label_db: str, browser: Browser) -> None:
    at = login("annotator")
    browser.submit(at)
    other = login("annotator2")
    data = form(other)
    assert data["work_id"] == "W9000001"  # overlap 2: the same work, independently
    assert all(v in (None, []) for v in data["draft"]["answers"].values())
    assert "· your labels: 0 ·" in data["progress"]["text"]
    browser.send(other, "back")
    assert form(other)["editing"] is None  # nothing of annotator's to open
    assert "No earlier label of yours" in form(other)["message"]["text"]


def test_campaign_progress_counts_another_annotators_label_at_once(
    label_db: str, browser: Browser
) -> None:
    """No cache lag: the campaign's counts move on the next render after any label. With
    k = 2 a first label completes no work: it shows as the annotator's and as a work started."""
    at = login("annotator")
    assert form(at)["progress"]["text"] == (
        "top · your labels: 0 · works complete: 0 of 12 (each needs 2 labels) · started: 0"
    )
    browser.submit(at)
    assert form(at)["progress"]["text"] == (
        "top · your labels: 1 · works complete: 0 of 12 (each needs 2 labels) · started: 1"
    )
    assert form(at)["progress"]["started_fraction"] == 1 / 12
    other = login("annotator2")
    assert form(other)["work_id"] == "W9000001"
    browser.submit(other)
    browser.send(at, "retry_abstract")  # any later render of the first tab
    assert form(at)["progress"]["text"] == (
        "top · your labels: 1 · works complete: 1 of 12 (each needs 2 labels) · started: 0"
    )
    assert form(at)["progress"]["fraction"] == 1 / 12


def test_switching_campaign_gives_the_work_back(label_db: str, browser: Browser) -> None:
    at = login("annotator")
    assert form(at)["work_id"] == "W9000001"
    at = choose_campaign(at, browser, "blind")
    assert form(at)["campaign"] == screen(at).campaign_id and form(at)["blind"] is True
    other = login("annotator2")
    assert form(other)["work_id"] == "W9000001"  # released, so the next annotator gets it


# ------------------------------------------------------------------ blind campaigns


def test_blind_campaign_hides_scores_until_the_label_is_submitted(
    label_db: str, browser: Browser
) -> None:
    at = choose_campaign(login("annotator"), browser, "blind")
    data = form(at)
    assert data["blind"] and not data["scores_visible"]
    assert data["teachers"] is None and data["details"] is None
    assert "score_opus" not in json.dumps(data) and "Codex" not in json.dumps(data)
    first = data["work_id"]
    browser.submit(at)
    (label,) = labels(label_db)
    assert label.work_id == first and label.scores_visible is False
    # The submitted work's scores now show as feedback; the next work's stay hidden.
    after = form(at)
    assert after["feedback"]["work_id"] == first
    assert after["feedback"]["details"]["machine"]["validation_status"] == (
        "score_only:v0-immature-baseline"
    )
    assert after["work_id"] != first and after["teachers"] is None


# ------------------------------------------------------------------ roles


def test_exporter_cannot_open_the_label_page(label_db: str) -> None:
    at = login("exporter", page=None)
    with pytest.raises(ValueError, match="Could not find a navigation page"):
        at.switch_page("pages/label.py")
    # Even run directly with the exporter's session, the page refuses on the server.
    page = AppTest.from_file(str(APP.parent / "pages" / "label.py"), default_timeout=30)
    page.session_state["auth_token"] = at.session_state["auth_token"]
    page.run()
    assert page.error and "do not have access" in page.error[0].value
    assert not page.button and not page.get("bidi_component")


def test_a_campaign_asking_two_questions_shows_only_those(label_db: str, browser: Browser) -> None:
    from labeling.review.campaigns import create_campaign

    create_campaign(
        get_engine(label_db),
        name="two",
        strategy="score_gpt",
        questions=["genre", "about_ca_topic"],
    )
    at = choose_campaign(login("annotator"), browser, "two")
    assert [q["name"] for q in form(at)["questions"]] == ["about_ca_topic", "genre"]
    browser.submit(at, {"about_ca_topic": "no", "genre": "methods"})
    (label,) = labels(label_db)
    assert label.answers == {"about_ca_topic": "no", "genre": "methods"}


# ------------------------------------------------------------------ defined outcomes


def test_a_lease_lost_to_another_annotator_is_said_and_skipped(
    label_db: str, browser: Browser
) -> None:
    from sqlalchemy import update

    from db.engine import write_session
    from db.models import Lease, utcnow

    at = login("annotator")
    assert form(at)["work_id"] == "W9000001"
    with write_session(get_engine(label_db)) as session:  # the lease runs out ...
        session.execute(update(Lease).values(expires_at=utcnow()))
    other = login("annotator2")  # ... and the work goes to someone else
    assert form(other)["work_id"] == "W9000001"
    browser.submit(at)
    assert labels(label_db) == []
    message = form(at)["message"]
    assert message["kind"] == "warning" and "lease" in message["text"]
    assert "not saved" in message["text"] and form(at)["work_id"] == "W9000002"
    browser.submit(other)
    assert [(r.work_id, r.user_id) for r in labels(label_db)] == [
        ("W9000001", screen(other).user_id)
    ]


def test_reload_shows_the_same_work(label_db: str) -> None:
    first = login("annotator")
    again = login("annotator")  # a new browser session: the lease in the database is resumed
    assert form(first)["work_id"] == form(again)["work_id"]
    assert form(first)["submission_id"] == form(again)["submission_id"]


def test_a_busy_queue_is_said_and_can_be_retried(
    label_db: str, browser: Browser, monkeypatch: pytest.MonkeyPatch
) -> None:
    from labeling.review import flow as session
    from labeling.review.queue import QueueError

    real = session.claim_next

    def busy(*args: Any, **kwargs: Any) -> Any:
        raise QueueError("could not claim a work after 8 attempts")

    monkeypatch.setattr(session, "claim_next", busy)
    at = login("annotator")
    assert form(at)["state"] == "notice" and "queue is busy" in form(at)["notice"]
    monkeypatch.setattr(session, "claim_next", real)
    browser.send(at, "again")
    assert form(at)["work_id"] == "W9000001"
