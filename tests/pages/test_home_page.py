"""Home: each of the role's pages named with what it is for (not module names)."""

from __future__ import annotations

import pytest

from tests.pages.test_app_shell import app_env, login  # noqa: F401 - fixture


@pytest.mark.parametrize(
    ("role", "listed"),
    [
        ("exporter", ["**Export**: preview and download gold sets"]),
        ("admin", ["**Campaigns**", "**Export**", "**Admin**: users, single sign-on"]),
    ],
)
def test_home_names_each_page_of_the_role_with_what_it_is_for(
    app_env: str,  # noqa: F811
    role: str,
    listed: list[str],
) -> None:
    at = login(role, "pw-" + role).switch_page("pages/home.py").run()
    assert not at.exception, at.exception
    text = "\n".join(m.value for m in at.markdown)
    assert "Your pages, in the menu on the left:" in text
    assert all(item in text for item in listed), text
    assert "**Label**" not in text and "**Monitor**" not in text  # not the role's
