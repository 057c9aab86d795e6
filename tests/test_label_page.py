"""The label page in AppTest: label, skip, flag, edit previous, blind mode, role checks."""

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
from db.models import Label
from labeling.database import dispose_all, get_engine, init_db
from labeling.settings import DEFAULT_SCHEMA, get_settings

APP = Path(__file__).resolve().parents[1] / "app.py"
SEED = Path(__file__).resolve().parent / "fixtures" / "seed_record.json"
PASSWORD = "pw-label-test"
HOSTILE = "<script>alert(1)</script> [x](javascript:alert(2)) **bold** :red[red] $x$"


def seed_records(n: int, *, hostile_first: bool = False) -> list[dict[str, Any]]:
    """N copies of the seed record with distinct ids, titles and decreasing machine scores."""
    seed = json.loads(SEED.read_text(encoding="utf-8"))
    out = []
    for i in range(n):
        rec = json.loads(json.dumps(seed))
        rec["id"] = f"W{9000001 + i}"
        title = f"Test work {i + 1}: {seed['title']}"
        rec["title"] = HOSTILE if hostile_first and i == 0 else title
        rec["has_abstract"] = i % 4 != 3
        opus = round(0.9 - i * 0.8 / max(n, 1), 6)
        rec["machine_scores"].update(score_opus=opus, score_gpt=opus / 2,
                                     score_spread=round(opus / 2, 6))
        out.append(rec)
    return out


def build_label_db(
    url: str, tmp: Path, *, n: int = 12, hostile_first: bool = False, cache_all: bool = False
) -> Engine:
    """N seed-like works, cached abstracts, one user per role and four campaigns.

    Abstracts: 3 works in 4 have one; the last work is not cached (offline state) unless
    cache_all, which gives every work an abstract. Campaigns: "top" (overlap 2), "blind",
    "tail" (only the lowest-scored work) and "sample" (stratified).
    """
    from labeling.campaigns import create_campaign
    from labeling.demo import seed_abstract_cache
    from labeling.frame import import_frame
    from labeling.schema import load_schema
    from labeling.users import add_user

    engine = init_db(url)
    schema = load_schema(DEFAULT_SCHEMA)
    records = seed_records(n, hostile_first=hostile_first)
    frame = tmp / "frame.jsonl"
    frame.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    import_frame(engine, frame, schema, progress=False)
    if cache_all:
        for r in records:
            r["has_abstract"] = True
    seed_abstract_cache(engine, {
        r["id"]: (f"Abstract of {r['id']}: <b>not bold</b> [link](javascript:x) the work "
                  "studies GPU clusters." if r["has_abstract"] else None)
        for r in (records if cache_all else records[:-1])
    })
    for name, role in (("annotator", "annotator"), ("annotator2", "annotator"), ("lead", "lead"),
                       ("exporter", "exporter"), ("admin", "admin")):
        add_user(engine, name, role, PASSWORD)
    create_campaign(engine, name="top", strategy="score_opus", overlap=2)
    create_campaign(engine, name="blind", strategy="score_opus", overlap=1, blind=True)
    lowest = min(r["machine_scores"]["score_opus"] for r in records)
    create_campaign(engine, name="tail", strategy="score_opus",
                    filter={"score_opus": [None, lowest + 1e-9]})
    return engine


@pytest.fixture
def label_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The app pointed at a fresh label database in offline mode."""
    url = f"sqlite:///{tmp_path / 'label.db'}"
    monkeypatch.setenv("LABELING_DB_URL", url)
    monkeypatch.setenv("LABELING_OPENALEX_OFFLINE", "true")
    get_settings.cache_clear()
    st.cache_resource.clear()
    from labeling.session import forget_progress

    forget_progress()
    build_label_db(url, tmp_path, hostile_first=True)
    yield url
    st.cache_resource.clear()
    get_settings.cache_clear()
    dispose_all()


def login(name: str, page: str | None = "pages/label.py") -> AppTest:
    """Run the app, sign in, and open a page."""
    at = AppTest.from_file(str(APP), default_timeout=30).run()
    at.text_input(key="login_name").input(name)
    at.text_input(key="login_password").input(PASSWORD)
    at.button[0].click().run()
    assert not at.exception, at.exception
    if page:
        at.switch_page(page).run()
        assert not at.exception, at.exception
    return at


def labels(url: str) -> list[Label]:
    """Every stored label version, oldest first (detached, attributes loaded)."""
    with read_session(get_engine(url)) as session:
        rows = list(session.execute(select(Label).order_by(Label.id)).scalars())
        session.expunge_all()
    return rows


def plain(markdown_text: str) -> str:
    """Escaped Markdown back to the text it shows."""
    return re.sub(r"\\(.)", r"\1", markdown_text)


def texts(at: AppTest) -> list[str]:
    """The bodies of every st.text element."""
    return [t.value for t in at.text]


def markdown(at: AppTest) -> str:
    """Every Markdown body on the page, joined."""
    return "\n".join(m.value for m in at.markdown)


def answer_all(at: AppTest) -> AppTest:
    """Answer every question with its first option, clicking as a user would."""
    questions = at.session_state["lbl_item"].questions
    for qi in range(len(questions)):
        at.button(key=f"goto_{qi}").click().run()  # only the active question has buttons
        at.button(key=f"opt_{qi}_0").click().run()
        assert not at.exception, at.exception
    return at


def choose_campaign(at: AppTest, name: str) -> AppTest:
    """Pick a campaign in the selector."""
    ids = {c.name: c.id for c in at.session_state["lbl_campaigns"]}
    at.selectbox(key="lbl_campaign").set_value(ids[name]).run()
    assert not at.exception, at.exception
    return at


@pytest.fixture(autouse=True)
def no_dwell(monkeypatch: pytest.MonkeyPatch) -> None:
    """AppTest clicks faster than a person: the double-click guard would swallow them."""
    from labeling import session

    monkeypatch.setattr(session, "MIN_DWELL", 0.0)


def submit(at: AppTest) -> AppTest:
    """Press the submit button."""
    at.button(key="submit").click().run()
    assert not at.exception, at.exception
    return at


# ------------------------------------------------------------------ the card


def test_card_renders_record_text_as_plain_text(label_db: str) -> None:
    at = login("annotator")
    # st.text: never parsed as Markdown or HTML; the hostile title arrives verbatim.
    assert texts(at)[0] == HOSTILE
    assert texts(at)[1].startswith("Abstract of W9000001: <b>not bold</b>")
    md = markdown(at)
    assert "<script>" not in md and "](javascript:" not in md
    assert "[OpenAlex W9000001](https://openalex.org/W9000001)" in md
    assert "(https://doi.org/10.1145/3721145.3730418)" in md
    assert "University of Waterloo" in md and "Natural Sciences" in md
    assert "ca\\_aff" in md  # a route badge, escaped


def test_card_shows_scores_machine_block_and_key_help(label_db: str) -> None:
    at = login("annotator")
    md = markdown(at)
    assert "| Label | Codex | Gemma | Cand. | Cons. | Agreement |" in md
    assert "⚠ teachers disagree" in md  # study_design and genre in the seed record
    assert [c.value for c in at.code] == ["score_only:v0-immature-baseline"]
    captions = " ".join(c.value for c in at.caption)
    assert "it never asserts a category" in md  # the seed page's wording
    assert "Scores rank; they never assert a category" in md  # the record's own note
    assert "provisional, baseline, maturity gate not passed" in md
    assert "Enter submit" in captions and "Alt+1–4 skip" in captions
    assert "Inconsistent record: Gemma" in md and "is not its highest score" in md
    # At a glance next to each question: each teacher's call, candidate, consensus, agreement.
    assert "Codex\\: design\\_other · Gemma\\: simulation\\_or\\_modeling" in captions


def test_offline_abstract_state_is_said_plainly(label_db: str) -> None:
    at = choose_campaign(login("annotator"), "tail")
    warning = " ".join(w.value for w in at.warning)
    assert "Offline mode" in warning
    assert at.button(key="retry_abs")
    answer_all(at)
    submit(at)
    assert len(labels(label_db)) == 1
    assert "Nothing left for you" in " ".join(s.value for s in at.success)


# ------------------------------------------------------------------ labelling


def test_label_is_written_once_before_the_next_work_shows(label_db: str) -> None:
    at = login("annotator")
    item = at.session_state["lbl_item"]
    assert item.work_id == "W9000001"
    answer_all(at)
    draft = at.session_state["lbl_draft"]
    assert draft.missing(item.questions) == []
    submit(at)
    rows = labels(label_db)
    assert len(rows) == 1
    label = rows[0]
    assert label.work_id == "W9000001" and label.version == 1 and not label.skipped
    assert label.answers["about_ca_system"] == "yes" and label.answers["categories"] == [
        "Metaresearch"]
    assert label.scores_visible is True
    assert label.model_version == "metacan-v3-hybrid-931329e0061c"
    assert label.schema_hash and label.time_on_item_ms is not None and label.time_on_item_ms >= 0
    assert at.session_state["lbl_item"].work_id == "W9000002"
    assert texts(at)[0].startswith("Test work 2:")
    assert "You: 1 labelled, 0 skipped" in at.get("progress")[0].proto.text
    # A retry or double click of the same item (same submission id) adds nothing.
    from labeling.schema import load_schema
    from labeling.session import save
    from labeling.settings import DEFAULT_SCHEMA

    again = save(get_engine(label_db), item, draft, user_id=label.user_id,
                 schema=load_schema(DEFAULT_SCHEMA))
    assert again.saved and not again.result.created
    assert len(labels(label_db)) == 1


def test_incomplete_label_is_refused_with_the_missing_questions(label_db: str) -> None:
    at = login("annotator")
    submit(at)
    assert labels(label_db) == []
    assert "Answer every question first" in at.error[0].value
    assert at.session_state["lbl_item"].work_id == "W9000001"


def test_two_tabs_on_one_work_make_one_label(label_db: str) -> None:
    one, two = login("annotator"), login("annotator")
    assert one.session_state["lbl_item"].work_id == two.session_state["lbl_item"].work_id
    submit(answer_all(one))
    submit(answer_all(two))
    assert len(labels(label_db)) == 1
    assert "already saved" in " ".join(w.value for w in two.warning)


def test_skip_records_the_reason(label_db: str) -> None:
    at = login("annotator")
    at.button(key="skip_no_abstract").click().run()
    (label,) = labels(label_db)
    assert label.skipped and label.skip_reason == "no_abstract" and label.work_id == "W9000001"
    assert at.session_state["lbl_item"].work_id == "W9000002"
    assert "You: 0 labelled, 1 skipped" in at.get("progress")[0].proto.text


def test_flag_confidence_and_note_are_stored(label_db: str) -> None:
    at = login("annotator")
    token = at.session_state["lbl_item"].token
    at.button(key="flag").click().run()
    at.button(key="conf_3").click().run()
    at.text_input(key=f"note_{token}").input("check the venue").run()
    submit(answer_all(at))
    (label,) = labels(label_db)
    assert label.flagged and label.confidence == 3 and label.note == "check the venue"


def test_edit_previous_label_writes_a_new_version(label_db: str) -> None:
    at = login("annotator")
    submit(answer_all(at))
    at.button(key="back").click().run()
    assert not at.exception, at.exception
    item, draft = at.session_state["lbl_edit"]
    assert item.work_id == "W9000001" and item.editing.version == 1
    assert draft.answers["about_ca_system"] == "yes"  # the stored answers, ready to change
    at.button(key="goto_1").click().run()
    at.button(key="opt_1_1").click().run()  # about_ca_system: no
    submit(at)
    rows = labels(label_db)
    assert [(r.work_id, r.version) for r in rows] == [("W9000001", 1), ("W9000001", 2)]
    assert [r.answers["about_ca_system"] for r in rows] == ["yes", "no"]
    # Back in the queue, on the work that was waiting.
    assert at.session_state.get("lbl_edit") is None
    assert at.session_state["lbl_item"].work_id == "W9000002"


def test_another_annotator_sees_none_of_my_labels(label_db: str) -> None:
    at = login("annotator")
    submit(answer_all(at))
    other = login("annotator2")
    item = other.session_state["lbl_item"]
    assert item.work_id == "W9000001"  # overlap 2: the same work, independently
    assert other.session_state["lbl_draft"].missing(item.questions) == [
        q.name for q in item.questions if q.kind != "multi"]
    assert "You: 0 labelled, 0 skipped" in other.get("progress")[0].proto.text
    other.button(key="back").click().run()
    assert other.session_state.get("lbl_edit") is None  # nothing of annotator's to open


# ------------------------------------------------------------------ blind campaigns


def test_blind_campaign_hides_scores_until_the_label_is_submitted(label_db: str) -> None:
    at = choose_campaign(login("annotator"), "blind")
    assert at.session_state["lbl_item"].blind
    md = markdown(at)
    assert "Machine view" not in md and "| Codex |" not in md and not at.code
    assert "teachers agree" not in " ".join(c.value for c in at.caption)
    assert any("Blind campaign" in i.value for i in at.info)
    first = at.session_state["lbl_item"].work_id
    submit(answer_all(at))
    (label,) = labels(label_db)
    assert label.work_id == first and label.scores_visible is False
    # The submitted work's scores now show as feedback; the next work's stay hidden.
    feedback = at.expander[0]
    assert f"Feedback on your last label: {first}" in feedback.label
    assert any("| Codex |" in m.value for m in feedback.markdown)
    assert [c.value for c in at.code] == ["score_only:v0-immature-baseline"]
    assert at.session_state["lbl_item"].work_id != first
    assert not at.session_state["lbl_item"].scores_visible


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
    assert not page.button


def test_annotator_cannot_open_the_campaigns_page(label_db: str) -> None:
    at = login("annotator", page=None)
    with pytest.raises(ValueError, match="Could not find a navigation page"):
        at.switch_page("pages/campaigns.py")
    page = AppTest.from_file(str(APP.parent / "pages" / "campaigns.py"), default_timeout=30)
    page.session_state["auth_token"] = at.session_state["auth_token"]
    page.run()
    assert page.error and "do not have access" in page.error[0].value


# ------------------------------------------------------------------ campaigns page


def test_lead_creates_a_campaign_and_sees_its_progress(label_db: str) -> None:
    at = login("lead", page="pages/campaigns.py")
    assert at.title[0].value == "Campaigns"
    at.text_input(key="new_name").input("sample-5")
    at.selectbox(key="new_strategy").set_value("random")
    at.number_input(key="new_n").set_value(5)
    at.number_input(key="new_seed").set_value(3)
    at.number_input(key="new_overlap").set_value(2)
    at.checkbox(key="new_blind").check()
    at.multiselect(key="new_questions").set_value(["genre", "categories"])
    at.text_input(key="new_routes").input("ca_aff=true")
    at.button(key="create_campaign").click().run()
    assert not at.exception, at.exception
    assert plain(at.success[0].value) == "Created 'sample-5' with 5 works (a probability sample)."
    from labeling.campaigns import get_campaign

    info = get_campaign(get_engine(label_db), "sample-5")
    assert (info.strategy, info.overlap, info.blind, info.n_items) == ("random", 2, True, 5)
    assert info.questions == ("genre", "categories") and info.filter == {"routes": {"ca_aff": True}}
    assert info.is_probability_sample and info.sample["seed"] == 3
    assert at.selectbox(key="camp_pick").value == info.id  # the new campaign is selected
    assert "0 of 5 works have all their labels" in at.get("progress")[0].proto.text


def test_campaign_form_errors_are_shown_not_raised(label_db: str) -> None:
    at = login("lead", page="pages/campaigns.py")
    at.text_input(key="new_name").input("top")  # exists already
    at.button(key="create_campaign").click().run()
    assert not at.exception, at.exception
    assert "already exists" in at.error[0].value


def test_a_campaign_asking_two_questions_shows_only_those(label_db: str) -> None:
    from labeling.campaigns import create_campaign

    create_campaign(get_engine(label_db), name="two", strategy="score_gpt",
                    questions=["genre", "about_ca_topic"])
    at = choose_campaign(login("annotator"), "two")
    item = at.session_state["lbl_item"]
    assert [q.name for q in item.questions] == ["about_ca_topic", "genre"]
    at.button(key="opt_0_1").click().run()  # about_ca_topic: no, moves on to genre
    at.button(key="opt_1_2").click().run()  # genre: methods
    submit(at)
    (label,) = labels(label_db)
    assert label.answers == {"about_ca_topic": "no", "genre": "methods"}


# ------------------------------------------------------------------ defined outcomes


def test_a_lease_lost_to_another_annotator_is_said_and_skipped(label_db: str) -> None:
    from sqlalchemy import update

    from db.engine import write_session
    from db.models import Lease, utcnow

    at = login("annotator")
    assert at.session_state["lbl_item"].work_id == "W9000001"
    with write_session(get_engine(label_db)) as session:  # the lease runs out ...
        session.execute(update(Lease).values(expires_at=utcnow()))
    other = login("annotator2")  # ... and the work goes to someone else
    assert other.session_state["lbl_item"].work_id == "W9000001"
    submit(answer_all(at))
    assert labels(label_db) == []
    assert "lease" in at.warning[0].value and "not saved" in at.warning[0].value
    assert at.session_state["lbl_item"].work_id == "W9000002"
    submit(answer_all(other))
    assert [(r.work_id, r.user_id) for r in labels(label_db)] == [
        ("W9000001", other.session_state["lbl_item"].user_id)]


def test_a_submit_right_after_the_item_appeared_is_ignored(
    label_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from labeling import session

    at = answer_all(login("annotator"))
    monkeypatch.setattr(session, "MIN_DWELL", 60.0)  # as if the item had just appeared
    submit(at)
    assert labels(label_db) == [] and not at.error
    monkeypatch.setattr(session, "MIN_DWELL", 0.0)
    submit(at)
    assert len(labels(label_db)) == 1


def test_reload_shows_the_same_work(label_db: str) -> None:
    first = login("annotator")
    again = login("annotator")  # a new browser session: the lease in the database is resumed
    assert first.session_state["lbl_item"].work_id == again.session_state["lbl_item"].work_id


def test_codebook_on_demand(label_db: str) -> None:
    at = login("annotator")
    everything = plain(markdown(at))  # the Codebook popover holds every question's definitions
    assert "Research on research itself" in everything
    assert "Yes when the work studies Canadian research institutions" in everything
    assert not at.info
    at.button(key="codebook").click().run()  # D: the active question's codebook, inline
    shown = plain(at.info[0].value)
    assert "Choose every category the work itself contributes to" in shown
    assert "- *Bibliometrics*: Quantitative analysis of publications" in shown
    at.button(key="goto_4").click().run()
    assert "*simulation_or_modeling*: Results come from" in plain(at.info[0].value)
    at.button(key="codebook").click().run()
    assert not at.info


def test_edit_can_be_left_without_saving(label_db: str) -> None:
    at = login("annotator")
    submit(answer_all(at))
    at.button(key="back").click().run()
    assert at.session_state["lbl_edit"][0].work_id == "W9000001"
    at.button(key="back").click().run()  # nothing older: stays, says so
    assert at.session_state["lbl_edit"][0].work_id == "W9000001"
    assert "No earlier label" in at.info[0].value
    at.button(key="resume").click().run()
    assert at.session_state.get("lbl_edit") is None
    assert at.session_state["lbl_item"].work_id == "W9000002"
    assert len(labels(label_db)) == 1


def test_a_busy_queue_is_said_and_can_be_retried(
    label_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from labeling import session
    from labeling.queue import QueueError

    real = session.claim_next

    def busy(*args: Any, **kwargs: Any) -> Any:
        raise QueueError("could not claim a work after 8 attempts")

    monkeypatch.setattr(session, "claim_next", busy)
    at = login("annotator")
    assert "queue is busy" in plain(at.warning[0].value)
    monkeypatch.setattr(session, "claim_next", real)
    at.button(key="again").click().run()
    assert at.session_state["lbl_item"].work_id == "W9000001"
