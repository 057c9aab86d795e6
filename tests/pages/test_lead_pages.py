"""The lead pages in AppTest: adjudicate, reopen, gold, monitor; annotators are kept out."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import streamlit as st
from sqlalchemy import Engine, select
from streamlit.testing.v1 import AppTest

from db.engine import read_session
from db.models import Work
from labeling.auth.users import get_user
from labeling.database import dispose_all, get_engine
from labeling.frames.importer import import_frame
from labeling.review.campaigns import create_campaign, get_campaign
from labeling.review.labels import LabelSubmission, submit_label
from labeling.review.queue import claim_next
from labeling.schema import Schema, load_schema
from labeling.settings import DEFAULT_SCHEMA, get_settings
from labeling.vocabulary import STATUS_DISPUTED, STATUS_VALIDATED
from tests.factories import answers_for
from tests.label_page import Browser, form
from tests.pages.test_label_page import PASSWORD, build_label_db, seed_records

APP = Path(__file__).resolve().parents[2] / "app.py"
REFUSAL = "a score-ordered queue is not a probability sample: no frame estimate is possible"


def label_pair(
    engine: Engine,
    schema: Schema,
    campaign: str,
    variants: tuple[int, int],
    note: str | None = None,
) -> str:
    """The two annotators label their next work of a campaign; returns the work id."""
    cid = get_campaign(engine, campaign).id
    work_id = None
    for name, variant in zip(("annotator", "annotator2"), variants, strict=True):
        uid = get_user(engine, name).id
        claim = claim_next(engine, cid, uid)
        assert claim is not None
        work_id = claim.work_id
        submit_label(
            engine,
            LabelSubmission(
                campaign_id=cid,
                work_id=claim.work_id,
                user_id=uid,
                answers=answers_for(schema, variant),
                schema_hash=schema.hash,
                scores_visible=True,
                model_version="m",
                time_on_item_ms=3000,
                submission_id=f"{name}-{cid}-{claim.work_id}",
                flagged=note is not None,
                note=note,
            ),
            schema=schema,
        )
    assert work_id is not None
    return work_id


@pytest.fixture
def lead_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The app on a fresh database: two disputed and one validated work in campaign "top"."""
    url = f"sqlite:///{tmp_path / 'lead.db'}"
    monkeypatch.setenv("LABELING_DB_URL", url)
    monkeypatch.setenv("LABELING_OPENALEX_OFFLINE", "true")
    get_settings.cache_clear()
    st.cache_resource.clear()
    engine = build_label_db(url, tmp_path, n=6)
    schema = load_schema(DEFAULT_SCHEMA)
    disputed = [
        label_pair(engine, schema, "top", (0, 1), note="unclear scope"),
        label_pair(engine, schema, "top", (2, 3)),
    ]
    validated = label_pair(engine, schema, "top", (0, 0))
    create_campaign(engine, name="empty", strategy="manual")
    yield {
        "url": url,
        "engine": engine,
        "schema": schema,
        "disputed": disputed,
        "validated": validated,
    }
    st.cache_resource.clear()
    get_settings.cache_clear()
    dispose_all()


def login(name: str, page: str) -> AppTest:
    """Run the app, sign in, and open a page."""
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    at.text_input(key="login_name").input(name)
    at.text_input(key="login_password").input(PASSWORD)
    at.button[0].click().run()
    assert not at.exception, at.exception
    at.switch_page(page).run()
    return at


def work(url: str, work_id: str) -> Any:
    """A work's status, validated_via, final answers and gold flag."""
    with read_session(get_engine(url)) as session:
        return session.execute(
            select(Work.status, Work.validated_via, Work.final_answers, Work.is_gold).where(
                Work.id == work_id
            )
        ).one()


def page_text(at: AppTest) -> str:
    """Everything the page shows as text: Markdown, text, captions, alerts, tables, and the
    data given to components."""
    parts: list[str] = []
    for kind in ("markdown", "text", "caption", "error", "warning", "info", "success", "title"):
        parts += [str(e.value) for e in getattr(at, kind)]
    for df in at.dataframe:
        parts.append(df.value.to_csv())
    parts += [str(s.options) for s in at.selectbox]
    parts += [e.proto.json for e in at.get("bidi_component")]  # a component's data, as sent
    return "\n".join(parts)


def plain(text: str) -> str:
    """Escaped Markdown back to the text it shows."""
    return re.sub(r"\\(.)", r"\1", text)


# ------------------------------------------------------------------ adjudicate


def adjudicator(monkeypatch: pytest.MonkeyPatch) -> Browser:
    """The adjudicate component's browser side, faked."""
    return Browser(monkeypatch, "adjudicate_form")


def dispute(at: AppTest) -> dict[str, Any]:
    """What the page gave the adjudicate component."""
    return form(at, "adjudicate_form")


def test_adjudicate_resolves_a_disputed_work(
    lead_db: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The form's answers and reason validate the work by adjudication."""
    browser = adjudicator(monkeypatch)
    at = login("lead", "pages/adjudicate.py")
    assert not at.exception, at.exception
    first = lead_db["disputed"][0]
    data = dispute(at)
    assert (data["work_id"], data["index"], data["total"]) == (first, 0, 2)
    assert data["card"]["title"].startswith("Test work")  # as text
    assert data["card"]["abstract"]["state"] == "ok"  # the abstract is shown
    assert data["annotators"] == ["annotator", "annotator2"]  # names side by side
    rows = {r["question"]: r for r in data["rows"]}
    assert rows["about_ca_system"]["answers"] == ["yes", "no"]
    assert rows["about_ca_system"]["disagree"] and rows["about_ca_system"]["majority"] == (
        "no majority"
    )
    assert data["teachers"]["names"] == ["Codex", "Gemma"]
    # One yes, one no everywhere: the form starts with no majority on every question.
    assert set(data["prefill"].values()) == {None}
    final = answers_for(lead_db["schema"], 1)
    browser.send(at, "adjudicate", work_id=first, answers=final, reason="codebook 3.2")
    row = work(lead_db["url"], first)
    assert row.status == STATUS_VALIDATED
    assert row.validated_via.startswith("adjudicated")
    assert row.final_answers == final
    after = dispute(at)  # the queue moves on: one disputed work is left
    assert after["message"]["text"] == f"{first} validated by adjudication."
    assert (after["total"], after["work_id"]) == (1, lead_db["disputed"][1])


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"reason": "  "}, "A reason is required to adjudicate."),
        (
            {"answers": {"about_ca_system": None}},
            "No majority on about_ca_system: choose an answer",
        ),
        ({"answers": {"categories": None}}, "No majority on categories: choose an answer"),
        ({"answers": {"genre": "sonnet"}}, "Not adjudicated:"),
        ({"work_id": "W1"}, "W1 is no longer the dispute shown"),
    ],
)
def test_adjudicate_refuses_without_a_reason_or_an_answer(
    lead_db: dict[str, Any], monkeypatch: pytest.MonkeyPatch, change: dict, said: str
) -> None:
    """No reason, a question left without a majority (never stored as "none"), an invalid
    answer or a stale work: said, and the work stays disputed."""
    browser = adjudicator(monkeypatch)
    at = login("lead", "pages/adjudicate.py")
    first = lead_db["disputed"][0]
    payload = {"work_id": first, "answers": answers_for(lead_db["schema"], 1), "reason": "ok"}
    payload.update({k: v for k, v in change.items() if k != "answers"})
    payload["answers"].update(change.get("answers", {}))
    browser.send(at, "adjudicate", **payload)
    data = dispute(at)
    assert said in data["message"]["text"] and data["ack_ok"] is False
    assert work(lead_db["url"], first).status == STATUS_DISPUTED
    assert data["work_id"] == first


def test_next_and_previous(lead_db: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """J and K (sent as moves) go through the queue of disputed works, wrapping around."""
    browser = adjudicator(monkeypatch)
    at = login("lead", "pages/adjudicate.py")
    browser.send(at, "move", step=1)
    assert dispute(at)["index"] == 1 and dispute(at)["work_id"] == lead_db["disputed"][1]
    browser.send(at, "move", step=1)
    assert dispute(at)["index"] == 0
    browser.send(at, "move", step=-1)
    assert dispute(at)["index"] == 1
    browser.send(at, "move", step=7)
    assert "'step' must be 1 or -1" in dispute(at)["message"]["text"]
    empty = get_campaign(lead_db["engine"], "empty").id
    browser.send(at, "campaign", campaign_id=empty)
    assert dispute(at)["state"] == "empty" and dispute(at)["campaign"] == empty


def test_reopen_and_mark_gold(lead_db: dict[str, Any]) -> None:
    """Gold marking is all or none and needs validated works; reopen needs one."""
    at = login("lead", "pages/adjudicate.py")
    wid = lead_db["validated"]
    at.text_area(key="gold_ids").input(f"{wid}, {lead_db['disputed'][0]}")
    at.button(key="mark_gold").click().run()
    assert "only validated works can become gold" in plain(at.error[0].value)
    assert not work(lead_db["url"], wid).is_gold  # all or nothing
    at.text_area(key="gold_ids").input(wid.lower())
    at.button(key="mark_gold").click().run()
    assert not at.exception, at.exception
    assert work(lead_db["url"], wid).is_gold
    assert "1 work(s) marked as gold" in plain(at.success[0].value)
    at.text_input(key="reopen_id").input(lead_db["disputed"][1])
    at.text_input(key="reopen_reason").input("second look")
    at.button(key="reopen").click().run()
    assert "only validated works can be reopened" in plain(at.error[0].value)
    assert work(lead_db["url"], lead_db["disputed"][1]).status == STATUS_DISPUTED
    at.text_input(key="reopen_id").input(wid)
    at.button(key="reopen").click().run()
    assert not at.exception, at.exception
    row = work(lead_db["url"], wid)
    assert row.status != STATUS_VALIDATED and row.validated_via is None
    assert "reopened" in plain(at.success[0].value)


def test_a_dispute_across_campaigns_and_a_second_lead(
    lead_db: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Another campaign's differing verdict on a validated work is listed with both verdicts
    (the prefill leaves the differing questions open); the lead who comes second is told
    who settled it, and nothing is stored for him."""
    from labeling.auth.users import add_user as add_account
    from labeling.review.label_import import import_labels

    engine, schema, wid = lead_db["engine"], lead_db["schema"], lead_db["validated"]
    before = work(lead_db["url"], wid)
    other = answers_for(schema, 0) | {"genre": answers_for(schema, 1)["genre"]}
    path = tmp_path / "second.csv"
    path.write_text("work_id,annotator,question,value\n" + "".join(
        f"{wid},carol,{q},{';'.join(v) if isinstance(v, list) else v}\n"
        for q, v in other.items()), encoding="utf-8")  # fmt: skip
    assert import_labels(engine, path, schema, campaign="second").disputes_opened == 1
    assert work(lead_db["url"], wid) == before  # still validated, its answers unchanged
    add_account(engine, "ruth", "lead", PASSWORD)
    browser = adjudicator(monkeypatch)
    at, late = login("lead", "pages/adjudicate.py"), login("ruth", "pages/adjudicate.py")
    for page in (at, late):
        browser.send(page, "move", step=-1)  # the last one: the dispute across campaigns
        data = dispute(page)
        assert (data["total"], data["work_id"]) == (3, wid)
    assert "differs on genre" in data["note"]
    assert data["annotators"][:2] == [f"validated ({before.validated_via})", "campaign second"]
    assert "second: carol" in data["annotators"]
    assert data["prefill"]["genre"] is None
    assert data["prefill"]["domain"] == answers_for(schema, 0)["domain"]
    browser.send(at, "adjudicate", work_id=wid, answers=other, reason="second is right")
    assert work(lead_db["url"], wid).final_answers == other
    browser.send(late, "adjudicate", work_id=wid, answers=answers_for(schema, 0), reason="no")
    said = dispute(late)["message"]["text"]
    assert f"{wid} is no longer the dispute shown: last changed by 'lead' (adjudication)" in said
    assert work(lead_db["url"], wid).final_answers == other


# ------------------------------------------------------------------ monitor


def test_monitor_renders_for_a_campaign_with_labels(lead_db: dict[str, Any]) -> None:
    """The monitor shows annotators, flag notes, agreement and the refusal."""
    at = login("lead", "pages/monitor.py")
    top = get_campaign(lead_db["engine"], "top").id
    at.selectbox(key="mon_campaign").set_value(top).run()
    assert not at.exception, at.exception
    text = plain(page_text(at))
    assert "3 of 6 works have all 2 label(s)" in text
    assert "annotator2" in text
    assert "unclear scope" in text  # the flag note
    assert "agreement with the others [95% CI]" in text
    assert REFUSAL in text  # "top" is score-ordered
    assert len(at.get("vega_lite_chart")) >= 1


def test_monitor_heatmap_with_enough_common_works(lead_db: dict[str, Any], tmp_path: Path) -> None:
    """With three common works (the old hidden minimum was ten) the kappa heatmap appears."""
    engine, schema = lead_db["engine"], lead_db["schema"]
    records = seed_records(16)[6:]  # ten more works, new ids, into the same frame
    frame = tmp_path / "more.jsonl"
    frame.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    import_frame(engine, frame, schema, progress=False)
    create_campaign(engine, name="pairs", strategy="score_opus", overlap=2)
    for i in range(3):
        label_pair(engine, schema, "pairs", (0, i % 2))
    at = login("lead", "pages/monitor.py")
    at.selectbox(key="mon_campaign").set_value(get_campaign(engine, "pairs").id).run()
    assert not at.exception, at.exception
    text = plain(page_text(at))
    assert "No pair of annotators" not in text
    # progress, throughput, time per work, drift, kappa matrix, reliability
    assert len(at.get("vega_lite_chart")) == 6
    pairs = [df.value for df in at.dataframe if list(df.value.columns) == ["a", "b", "kappa", "n"]]
    assert pairs and set(pairs[0]["a"]) == {"annotator", "annotator2"}


def test_monitor_renders_for_an_empty_campaign(lead_db: dict[str, Any]) -> None:
    """A campaign without labels renders plain sentences, no exception."""
    at = login("lead", "pages/monitor.py")
    at.selectbox(key="mon_campaign").set_value(get_campaign(lead_db["engine"], "empty").id).run()
    assert not at.exception, at.exception
    text = plain(page_text(at))
    assert "No labels yet: nobody to look at." in text
    assert "No validated works yet: 0 of 0 works in this campaign." in text


def test_monitor_estimates_for_a_sample_campaign(lead_db: dict[str, Any]) -> None:
    """A probability sample gets frame estimates instead of the refusal."""
    engine = lead_db["engine"]
    create_campaign(engine, name="sample-3", strategy="random", sample_size=3, seed=1)
    at = login("lead", "pages/monitor.py")
    at.selectbox(key="mon_campaign").set_value(get_campaign(engine, "sample-3").id).run()
    assert not at.exception, at.exception
    text = plain(page_text(at))
    assert REFUSAL not in text
    assert re.search(r"\d+ validated of 3 sampled works, frame of 6 works", text), text


# ------------------------------------------------------------------ roles


@pytest.mark.parametrize("page", ["pages/adjudicate.py", "pages/monitor.py"])
def test_annotator_cannot_open_lead_pages(lead_db: dict[str, Any], page: str) -> None:
    """Neither the navigation nor the page itself lets an annotator in."""
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    at.text_input(key="login_name").input("annotator")
    at.text_input(key="login_password").input(PASSWORD)
    at.button[0].click().run()
    with pytest.raises(ValueError, match="Could not find a navigation page"):
        at.switch_page(page)  # not in the annotator's navigation
    # Run directly with the annotator's session, the page still refuses on the server.
    direct = AppTest.from_file(str(APP.parent / page), default_timeout=60)
    direct.session_state["auth_token"] = at.session_state["auth_token"]
    direct.session_state["mon_campaign"] = get_campaign(lead_db["engine"], "top").id
    direct.run()
    assert not direct.exception, direct.exception
    assert [e.value for e in direct.error] == ["You do not have access to this page."]
    text = page_text(direct)
    assert "annotator2" not in text  # another annotator's name appears nowhere
    assert not direct.dataframe and not direct.text and not direct.get("vega_lite_chart")
    for wid in lead_db["disputed"]:
        assert wid not in text


def test_lead_can_open_the_page_files_directly(lead_db: dict[str, Any]) -> None:
    """The direct run used above shows names to a lead (not vacuous)."""
    at = login("lead", "pages/home.py")
    for page in ("pages/adjudicate.py", "pages/monitor.py"):
        direct = AppTest.from_file(str(APP.parent / page), default_timeout=60)
        direct.session_state["auth_token"] = at.session_state["auth_token"]
        direct.session_state["mon_campaign"] = get_campaign(lead_db["engine"], "top").id
        direct.run()
        assert not direct.exception, direct.exception
        assert not direct.error
        assert "annotator2" in page_text(direct)  # the same check is not vacuous
