"""User names that render alike are one name: refused when added, matched at sign-in, marked."""

from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine

from db.engine import write_session
from db.models import User
from labeling.auth import sso, sso_mappings
from labeling.auth.sso import SSOError, SSORefused
from labeling.auth.users import AuthError, UserError, add_user, authenticate, name_collisions
from labeling.cli.main import main

NFC_JOSE = unicodedata.normalize("NFC", "josé")
NFD_JOSE = unicodedata.normalize("NFD", "josé")
SPOOFS = {
    "capital": ("lead", "Lead"),
    "cyrillic a": ("lead", "le\u0430d"),
    "full-width": ("lead", "\uff4c\uff45\uff41\uff44"),
    "capital I for l": ("lead", "Iead"),
    "NFD against NFC": (NFC_JOSE, NFD_JOSE),
    "NFC against NFD": (NFD_JOSE, NFC_JOSE),
}


def run(url: str, *args: str, input: str | None = None):
    """Invoke the CLI against `url`."""
    return CliRunner().invoke(main, ["--db", url, *args], input=input, catch_exceptions=False)


def legacy_user(engine: Engine, name: str, role: str = "annotator") -> None:
    """An account stored as it was before names were compared (no check)."""
    with write_session(engine) as session:
        session.add(User(name=name, role=role, active=True, failed_logins=0))


@pytest.mark.parametrize("case", SPOOFS)
def test_users_add_refuses_a_name_that_renders_like_an_existing_one(sqlite_url, case) -> None:
    existing, spoof = SPOOFS[case]
    assert run(sqlite_url, "users", "add", existing, "--role", "lead").exit_code == 0
    result = run(sqlite_url, "users", "add", spoof, "--role", "annotator")
    assert result.exit_code == 2, result.output
    assert f"looks like the existing user {existing!r}" in result.output
    assert "Traceback" not in result.output
    names = run(sqlite_url, "users", "list").output.splitlines()
    assert [line.split("\t")[0] for line in names] == [existing]


def test_unrelated_names_are_still_added(engine: Engine) -> None:
    for name in ("lead", "leads", "lena", "jose", NFC_JOSE, "Zoë"):
        add_user(engine, name, "annotator", "pw")
    with pytest.raises(UserError, match="already exists"):
        add_user(engine, "lead", "annotator", "pw")


def test_sign_in_matches_the_normalised_name(engine: Engine) -> None:
    lead = add_user(engine, "lead", "lead", "secret")
    jose = add_user(engine, NFC_JOSE, "annotator", "secret")
    for typed in ("LEAD", " Lead ", "\uff4c\uff45\uff41\uff44"):
        assert authenticate(engine, typed, "secret") == lead
    assert authenticate(engine, NFD_JOSE, "secret") == jose
    with pytest.raises(AuthError):
        authenticate(engine, "le\u0430d", "secret")  # a confusable is another name, not a spelling
    with pytest.raises(AuthError):
        authenticate(engine, "LEAD", "wrong")


def test_colliding_legacy_accounts_are_marked_and_still_sign_in(sqlite_url, sqlite_engine) -> None:
    add_user(sqlite_engine, "lead", "lead", "one")
    legacy_user(sqlite_engine, "Lead")
    legacy_user(sqlite_engine, "le\u0430d")
    legacy_user(sqlite_engine, NFC_JOSE)
    legacy_user(sqlite_engine, NFD_JOSE)
    legacy_user(sqlite_engine, "bob")
    lines = dict(
        (line.split("\t")[0], line) for line in run(sqlite_url, "users", "list").output.splitlines()
    )
    assert lines["bob"] == "bob\tannotator\tactive"
    assert lines["lead"].endswith("\tlooks like: Lead, le\u0430d")
    assert lines["Lead"].endswith("\tlooks like: lead, le\u0430d")
    assert lines[NFC_JOSE].endswith(f"\tlooks like: {NFD_JOSE}")
    assert name_collisions(["lead", "Lead", "bob"]) == {"lead": ["Lead"], "Lead": ["lead"]}
    # Not locked out: the exact name signs in; an ambiguous variant signs in as neither.
    assert authenticate(sqlite_engine, "lead", "one").name == "lead"
    with pytest.raises(AuthError):
        authenticate(sqlite_engine, "LEAD", "one")


def test_the_admin_page_path_refuses_a_spoof(engine: Engine) -> None:
    # pages/admin.py adds users with add_user and shows a UserError as it is.
    add_user(engine, "lead", "lead", "pw")
    with pytest.raises(UserError, match="looks like the existing user 'lead'"):
        add_user(engine, "\uff2c\uff25\uff21\uff24", "annotator", "pw")


def test_sso_created_users_pass_the_same_check(engine: Engine) -> None:
    add_user(engine, "lead", "lead", "pw")
    with pytest.raises(SSOError, match="looks like the existing user 'lead'"):
        sso_mappings.map_email(engine, "x@example.org", "Lead", role="lead")
    add_user(engine, "\u0430nn@example.org", "annotator", "pw")  # Cyrillic а
    sso_mappings.map_domain(engine, "example.org", "annotator")
    with pytest.raises(SSORefused, match="looks like the existing user"):
        sso.resolve(engine, {"iss": "https://accounts.google.com", "sub": "1001",
                             "email": "ann@example.org", "email_verified": True})  # fmt: skip


def test_import_labels_files_no_label_under_a_look_alike(
    sqlite_url: str, tmp_path: Path, schema: Any
) -> None:
    """import-labels creates users for new annotator names, but not for one that renders
    like an existing user's: its lines are rejected (exit 3), naming the user it looks like."""
    from db.engine import make_engine
    from tests.factories import add_works, answers_for

    engine = make_engine(sqlite_url)
    add_works(engine, 1)
    add_user(engine, "lead", "lead")
    rows = ["work_id,annotator,question,value"]
    for who in ("leаd", "carol"):  # a Cyrillic а, then a new name
        for q, v in answers_for(schema, 0).items():
            rows.append(f"W0001,{who},{q},{';'.join(v) if isinstance(v, list) else v}")
    path = tmp_path / "labels.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    res = CliRunner().invoke(main, ["--db", sqlite_url, "import-labels", str(path)])
    assert res.exit_code == 3, res.output
    assert "looks like the existing user 'lead'" in res.stderr
    assert "1 labels imported" in res.stdout and "1 users created" in res.stdout
    engine.dispose()
