"""The campaigns page in AppTest: a lead creates a campaign; annotators are kept out."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from labeling.database import get_engine
from tests.pages.test_label_page import APP, label_db, login, plain  # noqa: F401 - label_db: fixture


@pytest.fixture
def db(label_db: str) -> str:  # noqa: F811 - the label page's database fixture, renamed
    """The label page's database (works, users, campaigns)."""
    return label_db


def test_annotator_cannot_open_the_campaigns_page(db: str) -> None:
    at = login("annotator", page=None)
    with pytest.raises(ValueError, match="Could not find a navigation page"):
        at.switch_page("pages/campaigns.py")
    page = AppTest.from_file(str(APP.parent / "pages" / "campaigns.py"), default_timeout=30)
    page.session_state["auth_token"] = at.session_state["auth_token"]
    page.run()
    assert page.error and "do not have access" in page.error[0].value


def test_lead_creates_a_campaign_and_sees_its_progress(db: str) -> None:
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
    from labeling.review.campaigns import get_campaign

    info = get_campaign(get_engine(db), "sample-5")
    assert (info.strategy, info.overlap, info.blind, info.n_items) == ("random", 2, True, 5)
    assert info.questions == ("genre", "categories") and info.filter == {"routes": {"ca_aff": True}}
    assert info.is_probability_sample and info.sample["seed"] == 3
    assert at.selectbox(key="camp_pick").value == info.id  # the new campaign is selected
    assert "0 of 5 works have all their labels" in at.get("progress")[0].proto.text


def test_lead_creates_a_campaign_with_randomised_arms(db: str) -> None:
    """A share below 1 of scores shown is stored as the assist rate (seeded); 0 means blind."""
    at = login("lead", page="pages/campaigns.py")
    at.text_input(key="new_name").input("arms")
    at.number_input(key="new_seed").set_value(4)
    at.number_input(key="new_assist_rate").set_value(0.5)
    at.button(key="create_campaign").click().run()
    assert not at.exception, at.exception
    at.text_input(key="new_name").input("never")
    at.number_input(key="new_assist_rate").set_value(0.0)
    at.button(key="create_campaign").click().run()
    assert not at.exception, at.exception
    from labeling.review.campaigns import get_campaign

    arms, never = get_campaign(get_engine(db), "arms"), get_campaign(get_engine(db), "never")
    assert (arms.assist_rate, arms.blind) == (0.5, False)
    assert (never.assist_rate, never.blind) == (None, True)


def test_campaign_form_errors_are_shown_not_raised(db: str) -> None:
    at = login("lead", page="pages/campaigns.py")
    at.text_input(key="new_name").input("top")  # exists already
    at.button(key="create_campaign").click().run()
    assert not at.exception, at.exception
    assert "already exists" in at.error[0].value
