"""Text a person types never changes a query: filters, names, ids, notes, on both engines.

Every place where typed text reaches the database (login name, user names, campaign names
and filters, export filters, work ids typed by a lead, reasons and notes, label imports, the
CLI's options) gets classic injection payloads. Each must give a clear error or an empty or
literal result, leave every table in place, and never return a password hash.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import Engine, func, inspect, select

from db.engine import read_session
from db.models import Base
from labeling.auth.users import (
    GENERIC_AUTH_ERROR,
    AuthError,
    UserError,
    add_user,
    authenticate,
    get_user,
    list_users,
    set_active,
    set_role,
)
from labeling.cli.main import main
from labeling.database import dispose_all
from labeling.export.gold_set import ExportError, ExportFilters, export_gold, preview
from labeling.review.campaigns import CampaignError, create_campaign, find_campaign, get_campaign
from labeling.review.disputes import mark_gold, parse_work_ids, unmark_gold, work_status
from labeling.review.labels import LabelSubmission, edit_label, user_labels
from labeling.review.validation import ValidationError, adjudicate, reopen
from labeling.schema import Schema, load_schema
from labeling.settings import DEFAULT_SCHEMA, get_settings
from labeling.vocabulary import STATUS_DISPUTED
from tests.factories import answers_for
from tests.pages.test_label_page import PASSWORD, build_label_db
from tests.pages.test_lead_pages import label_pair

LONG = "x' OR 'a'='a" * 10_000  # 120 000 characters
PAYLOADS = [
    "' OR 1=1 --",
    "x' OR '1'='1",
    '"; DROP TABLE labels; --',
    "'; DELETE FROM users; --",
    "%",
    "_",
    "\\",
    "') UNION SELECT password_hash FROM users --",
    '" UNION SELECT password_hash FROM users --',
    "W%",
    LONG,
]
SHORT = [p for p in PAYLOADS if len(p) <= 128]  # fits a user or campaign name
NUL = "annotator\x00' OR 1=1 --"
HASH_MARK = "$argon2"


def pg(url: str) -> bool:
    """Whether a database URL is PostgreSQL."""
    return url.startswith("postgresql")


def counts(engine: Engine) -> dict[str, int]:
    """Rows per table, for every table the models define (a dropped table fails here)."""
    tables = set(inspect(engine).get_table_names())
    assert set(Base.metadata.tables) <= tables
    with read_session(engine) as session:
        return {
            name: int(session.scalar(select(func.count()).select_from(table)) or 0)
            for name, table in Base.metadata.tables.items()
        }


@pytest.fixture
def world(db_url: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A database with works, one user per role (argon2 passwords), labels and a dispute."""
    engine = build_label_db(db_url, tmp_path, n=6)
    schema = load_schema(DEFAULT_SCHEMA)
    disputed = label_pair(engine, schema, "top", (0, 1), note="a note")
    validated = label_pair(engine, schema, "top", (0, 0))
    yield {
        "url": db_url,
        "engine": engine,
        "schema": schema,
        "disputed": disputed,
        "validated": validated,
        "lead": get_user(engine, "lead").id,
        "annotator": get_user(engine, "annotator").id,
        "before": counts(engine),
    }
    dispose_all()


def no_hash(*values: Any) -> None:
    """No value (nor its repr) carries a password hash."""
    for value in values:
        assert HASH_MARK not in repr(value) and HASH_MARK not in str(value)


# ------------------------------------------------------------------ the domain calls


def test_login_and_user_lookups_are_literal(world: dict[str, Any]) -> None:
    """Sign-in, user lookups and admin actions with payload names: refused or literal."""
    engine = world["engine"]
    for p in PAYLOADS:
        with pytest.raises(AuthError) as err:
            authenticate(engine, p, p)
        assert str(err.value) == GENERIC_AUTH_ERROR
        with pytest.raises(AuthError):
            authenticate(engine, p, PASSWORD)  # the real password of every test user
        assert get_user(engine, p) is None
        with pytest.raises(UserError, match="no user called|longer than"):
            set_role(engine, p, "admin")
        with pytest.raises(UserError, match="no user called|longer than"):
            set_active(engine, p, False)
    assert counts(engine) == world["before"]
    assert all(u.active for u in list_users(engine))
    assert {u.name: u.role for u in list_users(engine)}["annotator"] == "annotator"


def test_payload_user_names_are_stored_and_matched_literally(world: dict[str, Any]) -> None:
    """An admin may name a user "%" or "' OR 1=1 --": stored as typed, matched exactly."""
    engine = world["engine"]
    for p in SHORT:
        made = add_user(engine, p, "annotator", "pw-" + p)
        assert made.name == p.strip()
        no_hash(made)
    with pytest.raises(UserError, match="longer than 128"):
        add_user(engine, LONG, "annotator", "pw")
    names = [u.name for u in list_users(engine)]
    for p in SHORT:
        assert names.count(p) == 1
        found = get_user(engine, p)
        assert found is not None and found.name == p  # "%" finds "%" and nothing else
        assert authenticate(engine, p, "pw-" + p).name == p
        with pytest.raises(AuthError):
            authenticate(engine, p, "pw-" + SHORT[0] if p != SHORT[0] else "pw-x")
    # Wildcards are not wildcards: "_" and "%" match only themselves.
    assert get_user(engine, "_").name == "_" and get_user(engine, "a_notator") is None
    assert get_user(engine, "annot%") is None and get_user(engine, "W_") is None
    no_hash(list_users(engine), [get_user(engine, n) for n in names])
    after = counts(engine)
    assert after["users"] == world["before"]["users"] + len(SHORT)
    assert {k: v for k, v in after.items() if k != "users"} == {
        k: v for k, v in world["before"].items() if k != "users"
    }


def test_campaign_names_and_filters_are_literal(world: dict[str, Any]) -> None:
    """Campaign lookups, names and filter values: no match, a clear error, or the literal."""
    engine, schema = world["engine"], world["schema"]
    for p in PAYLOADS:
        assert find_campaign(engine, p) is None
        with pytest.raises(CampaignError, match="no campaign"):
            get_campaign(engine, p)
        # A filter value is a value: no work has such a field, so the queue is empty.
        info = create_campaign(
            engine,
            name=f"f{PAYLOADS.index(p)}",
            strategy="score_opus",
            filter={"field": [p]},
            schema=schema,
        )
        assert info.n_items == 0
        with pytest.raises(CampaignError):
            create_campaign(
                engine,
                name=f"s{PAYLOADS.index(p)}",
                strategy="score_opus",
                filter={"status": [p]},
                schema=schema,
            )
        with pytest.raises(CampaignError):
            create_campaign(
                engine,
                name=f"q{PAYLOADS.index(p)}",
                strategy="score_opus",
                questions=[p],
                schema=schema,
            )
    # Route names are JSON keys: refused unless plain; a plain unknown one matches nothing.
    for route in ('a" OR 1=1 --', "$.x", "a.b", "a[0]", "a'b"):
        with pytest.raises(CampaignError):
            create_campaign(
                engine,
                name="route-" + route[:5],
                strategy="score_opus",
                filter={"routes": {route: True}},
                schema=schema,
            )
    assert (
        create_campaign(
            engine,
            name="r-ok",
            strategy="score_opus",
            filter={"routes": {"no_such_route": True}},
            schema=schema,
        ).n_items
        == 0
    )
    # Payload names are stored as typed and found only by themselves.
    for p in SHORT:
        made = create_campaign(engine, name=p, strategy="score_opus", schema=schema)
        assert made.name == p.strip() and get_campaign(engine, p).id == made.id
    create_campaign(engine, name="abc", strategy="score_opus", schema=schema)
    create_campaign(engine, name="a%c", strategy="score_opus", schema=schema)
    assert get_campaign(engine, "a%c").name == "a%c"
    assert find_campaign(engine, "a_c") is None and find_campaign(engine, "ab%") is None
    assert counts(engine)["works"] == world["before"]["works"]
    assert counts(engine)["labels"] == world["before"]["labels"]


def test_export_filters_are_literal(world: dict[str, Any], tmp_path: Path) -> None:
    """Export campaign and question filters: a clear ExportError, nothing written."""
    engine, schema = world["engine"], world["schema"]
    for p in PAYLOADS:
        for filters in (
            ExportFilters(status="all", campaign=p),
            ExportFilters(status="all", questions=(p,)),
            ExportFilters(status=p),
        ):
            with pytest.raises(ExportError):
                preview(engine, schema, filters)
            out = tmp_path / "gold.csv"
            with pytest.raises(ExportError):
                export_gold(engine, schema, out, fmt="csv", filters=filters)
            assert not out.exists()
    # The honest filter still works and returns no hash.
    pv = preview(engine, schema, ExportFilters(status="all", campaign="top"), limit=50)
    assert pv.total >= 2
    no_hash(pv.rows)
    assert counts(engine) == world["before"]


def test_lead_typed_work_ids_and_reasons_are_literal(world: dict[str, Any]) -> None:
    """Work ids typed on the Adjudicate page (reopen, gold): unknown works, nothing changed."""
    engine, lead = world["engine"], world["lead"]
    for p in PAYLOADS:
        assert work_status(engine, p) is None
        ids = parse_work_ids(p)
        with pytest.raises(ValidationError, match="unknown work"):
            mark_gold(engine, ids, lead)
        with pytest.raises(ValidationError, match="unknown work"):
            unmark_gold(engine, [*ids, world["validated"]], lead)
        with pytest.raises(ValidationError):
            reopen(engine, p, lead, p, schema=world["schema"])
        with pytest.raises(ValidationError, match="unknown work"):
            mark_gold(engine, [world["validated"], p], lead)  # all or nothing
    assert counts(engine) == world["before"]
    # A payload as the reason of a real reopen is stored as text (and the reopen happens).
    verdict = reopen(engine, world["validated"], lead, PAYLOADS[2], schema=world["schema"])
    assert verdict.status != "validated"
    assert set(inspect(engine).get_table_names()) >= set(Base.metadata.tables)


def test_label_notes_are_stored_verbatim(world: dict[str, Any]) -> None:
    """A note is text: each payload comes back exactly, as a new version of the label."""
    engine, schema = world["engine"], world["schema"]
    cid = get_campaign(engine, "top").id
    me = world["annotator"]
    work = world["disputed"]
    for i, p in enumerate(PAYLOADS):
        edit_label(
            engine,
            LabelSubmission(
                campaign_id=cid,
                work_id=work,
                user_id=me,
                answers=user_labels(engine, cid, me)[-1].answers,
                note=p,
                flagged=True,
                schema_hash=schema.hash,
                scores_visible=True,
                model_version="m",
                time_on_item_ms=1,
                submission_id=f"edit-{i}",
            ),
            schema=schema,
        )
        mine = {v.work_id: v for v in user_labels(engine, cid, me)}
        assert mine[work].note == p
    after = counts(engine)
    assert after["labels"] == world["before"]["labels"] + len(PAYLOADS)
    assert after["users"] == world["before"]["users"] and after["works"] == world["before"]["works"]


# ------------------------------------------------------------------ the CLI


def cli(url: str, *args: str, input: str | None = None) -> Result:
    """Run the CLI; an uncaught exception (a traceback for the user) fails the test."""
    result = CliRunner().invoke(main, ["--db", url, *args], input=input)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        args[:3],
        repr(result.exception),
        result.output[-1500:],
    )
    no_hash(result.output)
    return result


def test_cli_options_are_literal(world: dict[str, Any], tmp_path: Path) -> None:
    """Every CLI option that names a campaign, user, question or date: a plain refusal."""
    url, engine = world["url"], world["engine"]
    out = str(tmp_path / "gold.csv")
    for p in PAYLOADS:
        r = cli(url, "export", "--format", "csv", "--out", out, "--campaign", p)
        assert r.exit_code == 2 and "no campaign named" in r.output
        r = cli(url, "export", "--format", "csv", "--out", out, "--questions", p + ",genre")
        assert r.exit_code == 2 and "unknown question" in r.output
        r = cli(url, "export", "--format", "csv", "--out", out, "--user", p)
        assert r.exit_code == 2 and "no user named" in r.output
        for option in ("--since", "--until"):
            r = cli(url, "export", "--format", "csv", "--out", out, option, "2024-01-01" + p)
            assert r.exit_code == 2  # click refuses a date that is not YYYY-MM-DD
        assert not Path(out).exists()
        for command in (["agreement", "--n-boot", "0"], ["estimates"], ["machines"]):
            r = cli(url, *command, "--campaign", p)
            assert r.exit_code == 2 and "no campaign" in r.output, (command, r.output)
        r = cli(url, "abstracts", "prefetch", "--campaign", p)
        assert r.exit_code == 2 and "no campaign" in r.output
        r = cli(url, "users", "set-role", p, "admin")
        assert r.exit_code == 2 and "no user called" in r.output
        r = cli(url, "users", "deactivate", p)
        assert r.exit_code == 2 and "no user called" in r.output
    assert counts(engine) == world["before"]
    r = cli(url, "export", "--format", "csv", "--out", out, "--campaign", "top", "--status", "all")
    assert r.exit_code == 0 and Path(out).exists()  # the honest call works
    listed = cli(url, "users", "list").output
    assert "\tadmin\tactive" in listed and "inactive" not in listed


def test_cli_filter_json_and_names(world: dict[str, Any]) -> None:
    """`campaigns create NAME --filter JSON`: payloads in values give empty queues or errors."""
    url, engine = world["url"], world["engine"]
    for i, p in enumerate(SHORT):
        r = cli(
            url,
            "campaigns",
            "create",
            f"c{i}",
            "--filter",
            f'{{"field": ["{p.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"]}}',  # noqa: E501
        )
        assert r.exit_code == 0 and ": 0 works" in r.output, r.output
        r = cli(url, "campaigns", "create", p, "--strategy", "score_opus")
        assert r.exit_code == 0 and f"created campaign {p.strip()} " in r.output
    r = cli(url, "campaigns", "create", "one", "--filter", '{"field": "x\' OR 1=1"}')
    assert r.exit_code == 0 and ": 0 works" in r.output  # one field, compared as a value
    for bad in (
        '{"year_min": "2000 OR 1=1"}',
        '{"status": ["validated\' OR 1=1 --"]}',
        '{"score_max": ["0 OR 1=1", 1]}',
        '{"routes": {"x\\" OR 1=1 --": true}}',
        '{"x; DROP TABLE works": 1}',
        "{'field': 1}",
    ):
        r = cli(url, "campaigns", "create", "bad", "--filter", bad)
        assert r.exit_code == 2, (bad, r.output)
    listed = cli(url, "campaigns", "list").output
    assert all(f"\t{p.strip()}\t" in listed for p in SHORT)
    assert find_campaign(engine, "bad") is None
    before = world["before"]
    assert counts(engine)["works"] == before["works"]
    assert counts(engine)["labels"] == before["labels"]


def test_cli_user_names(world: dict[str, Any]) -> None:
    """`users add` with payload names stores them literally; `users list` shows no hash."""
    url, engine = world["url"], world["engine"]
    for p in SHORT:
        r = cli(url, "users", "add", p, "--role", "annotator", "--password-stdin", input="secret\n")
        assert r.exit_code == 0 and f"added {p.strip()} (annotator)" in r.output
    r = cli(url, "users", "add", LONG, "--role", "admin", "--password-stdin", input="s\n")
    assert r.exit_code == 2 and "longer than 128" in r.output
    listed = cli(url, "users", "list").output
    for p in SHORT:
        assert f"{p.strip()}\tannotator\tactive" in listed
    assert counts(engine)["users"] == world["before"]["users"] + len(SHORT)
    assert get_user(engine, "admin").role == "admin"


def write_labels_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    """A long-format labels CSV."""
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, ["work_id", "annotator", "question", "value", "note"])
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_import_labels_with_payloads(world: dict[str, Any], tmp_path: Path) -> None:
    """Payload work ids, questions and values are rejected per line; names and notes literal."""
    url, engine, schema = world["url"], world["engine"], world["schema"]
    work = world["validated"]
    rows = []
    for p in SHORT:
        rows += [
            {
                "work_id": p,
                "annotator": "annotator",
                "question": "genre",
                "value": "methods",
                "note": "",
            },
            {
                "work_id": work,
                "annotator": "annotator",
                "question": p,
                "value": "methods",
                "note": "",
            },
            {
                "work_id": work,
                "annotator": "annotator",
                "question": "genre",
                "value": p,
                "note": "",
            },
        ]
    path = write_labels_csv(tmp_path / "bad.csv", rows)
    r = cli(url, "import-labels", str(path), "--campaign", "imported-x")
    assert r.exit_code == 3, r.output
    c = counts(engine)
    assert c["labels"] == world["before"]["labels"] and c["users"] == world["before"]["users"]
    # A payload annotator name and note are data: stored as typed, one label each.
    good = []
    for p in SHORT[:4]:
        good += [
            {
                "work_id": work,
                "annotator": p,
                "question": q.name,
                "value": schema_value(schema, q.name),
                "note": p,
            }
            for q in schema.questions
        ]
    path = write_labels_csv(tmp_path / "names.csv", good)
    r = cli(url, "import-labels", str(path), "--campaign", "' OR 1=1 --")
    assert r.exit_code == 0, r.output
    cid = get_campaign(engine, "' OR 1=1 --").id
    for p in SHORT[:4]:
        user = get_user(engine, p)
        assert user is not None and user.name == p
        (label,) = user_labels(engine, cid, user.id)
        assert label.note == p
    assert counts(engine)["works"] == world["before"]["works"]


def schema_value(schema: Schema, question: str) -> str:
    """A valid CSV value for a question (its first label; "yes" for binary)."""
    q = next(q for q in schema.questions if q.name == question)
    return "yes" if q.kind == "binary" else q.labels[0]


def test_abstracts_show_with_payload_ids(world: dict[str, Any]) -> None:
    """`abstracts show` with payload ids (offline): said per id, no error, nothing written."""
    url, engine = world["url"], world["engine"]
    for p in SHORT:
        r = cli(url, "abstracts", "show", p)
        assert r.exit_code in (0, 1) and f"== {p}" in r.output
    assert counts(engine)["works"] == world["before"]["works"]


# ------------------------------------------------------------------ odd characters

DIGITS = ["²", "٣", "9" * 30, "-1", " 1", "1.0", "0x1"]


def test_odd_campaign_ids_are_refused_plainly(world: dict[str, Any], tmp_path: Path) -> None:
    """Unicode digits and huge numbers as a campaign "id": not found, never a crash."""
    engine, schema, url = world["engine"], world["schema"], world["url"]
    for p in DIGITS:
        try:
            found = find_campaign(engine, p)
        except Exception as exc:  # noqa: BLE001 - the point: no exception at all
            pytest.fail(f"find_campaign({p!r}) raised {exc!r}")
        assert found is None or p == "٣"
        with pytest.raises(ExportError):
            preview(engine, schema, ExportFilters(status="all", campaign=p + "x"))
        try:
            preview(engine, schema, ExportFilters(status="all", campaign=p))
        except ExportError:
            pass
        r = cli(url, "export", "--format", "csv", "--out", str(tmp_path / "g.csv"), "--campaign", p)
        assert r.exit_code in (0, 2)


def test_nul_byte_in_lead_typed_work_ids(world: dict[str, Any]) -> None:
    """A NUL in a typed work id: an unknown work on both engines (PostgreSQL refuses NUL)."""
    engine, lead = world["engine"], world["lead"]
    for p in (NUL, "W9000001\x00", "\x00"):
        assert work_status(engine, p) is None
        with pytest.raises(ValidationError, match="unknown work"):
            mark_gold(engine, parse_work_ids(p), lead)
        with pytest.raises(ValidationError):
            reopen(engine, p, lead, "reason", schema=world["schema"])
    # A NUL in a reason: refused before anything is written.
    with pytest.raises(ValidationError, match="NUL"):
        reopen(engine, world["validated"], lead, "see\x00notes", schema=world["schema"])
    with pytest.raises(ValidationError, match="NUL"):
        adjudicate(
            engine,
            world["disputed"],
            answers_for(world["schema"], 0),
            "a\x00b",
            lead,
            schema=world["schema"],
        )
    assert counts(engine) == world["before"]
    assert work_status(engine, world["disputed"]) == STATUS_DISPUTED


def test_nul_byte_in_a_label_note(world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The label page's save: a NUL in the note is said, nothing stored, the draft kept."""
    from labeling.review import flow

    monkeypatch.setattr(flow, "MIN_DWELL", 0.0)
    engine, schema = world["engine"], world["schema"]
    item = flow.next_item(
        engine, get_campaign(engine, "top").id, world["annotator"], schema, settings=get_settings()
    )
    draft = flow.Draft.fresh(item.questions)
    draft.answers.update(answers_for(schema, 0))
    draft.note = NUL
    out = flow.save(engine, item, draft, user_id=world["annotator"], schema=schema)
    assert not out.saved and not out.advance and "NUL" in out.message
    assert counts(engine)["labels"] == world["before"]["labels"]
    draft.note = LONG  # the same draft with a long payload note is stored verbatim
    out = flow.save(engine, item, draft, user_id=world["annotator"], schema=schema)
    assert out.saved and out.result is not None and out.result.created
    cid = get_campaign(engine, "top").id
    assert {v.work_id: v.note for v in user_labels(engine, cid, world["annotator"])}[
        item.work_id
    ] == LONG


def test_nul_byte_in_login(world: dict[str, Any], request: pytest.FixtureRequest) -> None:
    """A NUL in a login or user name: the generic refusal, never a database error."""
    engine, url = world["engine"], world["url"]
    with pytest.raises(AuthError) as err:
        authenticate(engine, NUL, PASSWORD)
    assert str(err.value) == GENERIC_AUTH_ERROR
    assert get_user(engine, NUL) is None
    r = cli(url, "users", "set-role", NUL, "admin")
    assert r.exit_code == 2
    assert counts(engine) == world["before"]


def test_nul_byte_in_a_new_user_name(world: dict[str, Any]) -> None:
    """A user name with a NUL is refused plainly, the same on both engines."""
    with pytest.raises(UserError):
        add_user(world["engine"], NUL, "annotator", "pw")
    assert counts(world["engine"]) == world["before"]


def test_nul_byte_in_campaign_lookups(
    world: dict[str, Any], request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """A NUL in a campaign name typed on the CLI: not found, never a database error."""
    engine, url = world["engine"], world["url"]
    assert find_campaign(engine, NUL) is None
    with pytest.raises(ExportError):
        preview(engine, world["schema"], ExportFilters(status="all", campaign=NUL))
    r = cli(url, "export", "--format", "csv", "--out", str(tmp_path / "g.csv"), "--campaign", NUL)
    assert r.exit_code == 2


def test_import_labels_refuses_unstorable_annotator_names(
    world: dict[str, Any], tmp_path: Path
) -> None:
    """Annotator names too long for a user name, or with a NUL: rejected lines, no crash."""
    url, engine = world["url"], world["engine"]
    rows = [
        {
            "work_id": world["validated"],
            "annotator": name,
            "question": "genre",
            "value": "methods",
            "note": "",
        }
        for name in ("a" * 200, "x\x00y")
    ]
    r = cli(url, "import-labels", str(write_labels_csv(tmp_path / "n.csv", rows)))
    assert r.exit_code == 3, r.output
    assert counts(engine)["users"] == world["before"]["users"]
