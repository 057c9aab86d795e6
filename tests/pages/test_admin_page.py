"""The admin page: users and frame import, admin only."""

from __future__ import annotations

import gzip
import json

import pytest
from streamlit.testing.v1 import AppTest

from labeling.auth.users import get_user
from labeling.database import get_engine
from tests.conftest import make_record
from tests.pages.test_app_shell import APP, app_env, login  # noqa: F401 - fixture

ADMIN_PAGE = "pages/admin.py"


def test_admin_adds_a_user_and_changes_a_role(app_env: str) -> None:  # noqa: F811
    at = login("admin", "pw-admin")
    at.switch_page(ADMIN_PAGE).run()
    assert not at.exception
    at.text_input(key="new_name").input("newbie")
    at.selectbox(key="new_role").select("annotator")
    at.text_input(key="new_password").input("pw")
    at.button[0].click().run()
    assert any("Added newbie" in s.value for s in at.success)
    assert get_user(get_engine(app_env), "newbie").role == "annotator"
    at.selectbox(key="edit_user").select("newbie")
    at.selectbox(key="edit_role").select("lead")
    at.button(key="change_role").click().run()
    assert get_user(get_engine(app_env), "newbie").role == "lead"
    at.selectbox(key="edit_user").select("newbie")
    at.button(key="toggle_active").click().run()
    assert get_user(get_engine(app_env), "newbie").active is False


def test_duplicate_user_shows_an_error(app_env: str) -> None:  # noqa: F811
    at = login("admin", "pw-admin")
    at.switch_page(ADMIN_PAGE).run()
    at.text_input(key="new_name").input("lead")
    at.button[0].click().run()
    assert at.error and "lead" in at.error[0].value


def test_non_admins_cannot_open_the_admin_page(app_env: str) -> None:  # noqa: F811
    for role in ("annotator", "lead", "exporter"):
        at = login(role, "pw-" + role)
        with pytest.raises(ValueError, match="Could not find a navigation page"):
            at.switch_page(ADMIN_PAGE)  # not in this role's navigation
        # Run directly with this role's session, the page still refuses on the server.
        page = AppTest.from_file(str(APP.parent / ADMIN_PAGE), default_timeout=30)
        page.session_state["auth_token"] = at.session_state["auth_token"]
        page.run()
        assert page.error and "do not have access" in page.error[0].value
        assert not page.dataframe  # the user list never renders


def test_uploaded_frame_goes_through_the_importer(app_env, seed_record) -> None:  # noqa: F811
    from labeling.frames.upload import import_uploaded_frame
    from labeling.schema import load_schema
    from labeling.settings import DEFAULT_SCHEMA

    lines = [json.dumps(make_record(seed_record, "W77")), "{bad"]
    data = gzip.compress(("\n".join(lines) + "\n").encode())
    result = import_uploaded_frame(get_engine(app_env), load_schema(DEFAULT_SCHEMA),
                                   "frame.jsonl.gz", data)  # fmt: skip
    assert result.exit_code == 3
    assert "1 inserted" in result.headline and "1 rejected" in result.headline
    assert {p["kind"] for p in result.problems} == {"rejected", "warning"}


@pytest.mark.parametrize(("batch_size", "stored"), [(10, 20), (None, 0)])
def test_an_uploaded_frame_is_written_in_transactions_of_the_batch_size(
    app_env, seed_record, batch_size: int | None, stored: int  # noqa: F811
) -> None:  # fmt: skip
    # The page passes LABELING_IMPORT_BATCH_SIZE, as the CLI does: with 10, W1-W20 are
    # committed before W25 is refused; with the default (20,000) the one transaction is not.
    from labeling.frames.upload import import_uploaded_frame
    from labeling.schema import load_schema
    from labeling.settings import DEFAULT_SCHEMA
    from tests.frames.test_frame_failures import _refuse_inserts

    engine = get_engine(app_env)
    _refuse_inserts(engine, "works", "NEW.id = 'W25'")
    data = "".join(json.dumps(make_record(seed_record, f"W{i}")) + "\n" for i in range(1, 41))
    result = import_uploaded_frame(engine, load_schema(DEFAULT_SCHEMA), "frame.jsonl",
                                   data.encode(), batch_size=batch_size)  # fmt: skip
    assert result.exit_code == 2 and "refused by the test trigger" in result.headline
    assert f", {stored} stored (" in result.headline
