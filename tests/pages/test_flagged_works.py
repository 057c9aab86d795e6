"""Flagged works for the lead: listed on the Monitor, opened on Adjudicate (disputed or not),
adjudicated there or passed over; a flag never changes validated answers."""

from __future__ import annotations

from typing import Any

import pytest

from labeling.auth.users import get_user
from labeling.review.campaigns import get_campaign
from labeling.review.labels import LabelSubmission, submit_label
from labeling.review.queue import claim_next
from labeling.vocabulary import STATUS_DISPUTED, STATUS_VALIDATED
from tests.factories import answers_for
from tests.pages.test_lead_pages import (  # noqa: F401 (lead_db is a fixture)
    adjudicator,
    dispute,
    label_pair,
    lead_db,
    login,
    work,
)


def flag_one(db: dict[str, Any], note: str) -> str:
    """annotator labels their next work of "top" alone, flagged: in review, not disputed."""
    engine, schema = db["engine"], db["schema"]
    cid, uid = get_campaign(engine, "top").id, get_user(engine, "annotator").id
    claim = claim_next(engine, cid, uid)
    assert claim is not None
    submit_label(engine, LabelSubmission(
        campaign_id=cid, work_id=claim.work_id, user_id=uid, answers=answers_for(schema, 2),
        schema_hash=schema.hash, scores_visible=True, model_version="m", time_on_item_ms=900,
        submission_id=f"flag-{claim.work_id}", flagged=True, note=note,
    ), schema=schema)  # fmt: skip
    return claim.work_id


def test_monitor_lists_the_flagged_works(lead_db: dict[str, Any]) -> None:  # noqa: F811
    """Skips and flags: one row per flag with the work's id, title, annotator, note, time."""
    alone = flag_one(lead_db, "is this research?")
    at = login("lead", "pages/monitor.py")
    at.selectbox(key="mon_campaign").set_value(get_campaign(lead_db["engine"], "top").id).run()
    assert not at.exception, at.exception
    tables = [df.value for df in at.dataframe if "flagged_at" in df.value.columns]
    assert len(tables) == 1, "the flagged works table is not on the page"
    table = tables[0]
    assert list(table.columns[:5]) == ["work_id", "title", "annotator", "note", "flagged_at"]
    first = lead_db["disputed"][0]
    got = sorted(zip(table["work_id"], table["annotator"], table["note"], strict=True))
    assert got == [(first, "annotator", "unclear scope"), (first, "annotator2", "unclear scope"),
                   (alone, "annotator", "is this research?")]  # fmt: skip
    assert table["title"].str.startswith("Test work").all()
    assert table["flagged_at"].notna().all()
    assert table["flagged_at"].iloc[0] >= table["flagged_at"].iloc[-1]  # newest first


def test_adjudicate_opens_flagged_works_disputed_or_not(
    lead_db: dict[str, Any],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Show: Flagged works lists every work with a flag, with its notes; one in review is
    adjudicated (and the screen goes on), a disputed one too; J passes one over."""
    alone = flag_one(lead_db, "is this research?")
    browser = adjudicator(monkeypatch)
    at = login("lead", "pages/adjudicate.py")
    data = dispute(at)
    assert data["kind"] == "disputed" and data["total"] == 2
    first = lead_db["disputed"][0]
    assert data["work_id"] == first  # a disputed work shows its flags too
    assert data["flags"] == ["annotator: unclear scope", "annotator2: unclear scope"]
    assert "F" not in [q["key"] for q in data["questions"]]  # F switches the list
    browser.send(at, "filter", show="flagged")
    data = dispute(at)
    assert (data["kind"], data["total"], data["index"]) == ("flagged", 2, 0)
    assert first < alone and data["work_id"] == first  # by work id
    browser.send(at, "move", step=1)  # J: passed over
    data = dispute(at)
    assert data["work_id"] == alone and data["status"] != STATUS_DISPUTED
    assert data["flags"] == ["annotator: is this research?"]
    assert data["annotators"] == ["annotator"]
    final = answers_for(lead_db["schema"], 2)
    browser.send(at, "adjudicate", work_id=alone, answers=final, reason="it is research")
    row = work(lead_db["url"], alone)
    assert row.status == STATUS_VALIDATED and row.final_answers == final
    after = dispute(at)
    assert after["message"]["text"] == f"{alone} validated by adjudication."
    assert (after["total"], after["work_id"]) == (2, first)  # still listed; the next shown
    browser.send(at, "adjudicate", work_id=first, answers=final, reason="scope is fine")
    assert work(lead_db["url"], first).status == STATUS_VALIDATED  # a disputed one too
    browser.send(at, "filter", show="everything")
    assert "'show' must be one of disputed, flagged" in dispute(at)["message"]["text"]
    browser.send(at, "filter", show="disputed")
    assert dispute(at)["kind"] == "disputed" and dispute(at)["total"] == 1


def test_a_flagged_validated_work_keeps_its_answers(
    lead_db: dict[str, Any],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A work validated by its rule and flagged is listed with its validated answers first;
    adjudicating it is refused and its answers stay (README: Ground truth)."""
    engine, schema = lead_db["engine"], lead_db["schema"]
    wid = label_pair(engine, schema, "top", (3, 3), note="title is odd")
    before = work(lead_db["url"], wid)
    assert before.status == STATUS_VALIDATED  # flags do not stop the rule
    browser = adjudicator(monkeypatch)
    at = login("lead", "pages/adjudicate.py")
    browser.send(at, "filter", show="flagged")
    while dispute(at)["work_id"] != wid:
        browser.send(at, "move", step=1)
    data = dispute(at)
    assert data["status"] == STATUS_VALIDATED
    assert data["annotators"][0] == f"validated ({before.validated_via})"
    assert data["prefill"] == before.final_answers
    assert "reopen it below" in data["note"]
    browser.send(at, "adjudicate", work_id=wid, answers=answers_for(schema, 0), reason="no")
    assert "Not adjudicated" in dispute(at)["message"]["text"]
    assert work(lead_db["url"], wid) == before
