"""Flags in the gold set: `flags` and `flag_notes` per work in every format, `flagged` in the
--long file, which still imports back exactly; a flag never changes validated answers."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from sqlalchemy import Engine, select

from db.engine import make_engine, read_session
from db.models import Label, Work
from labeling.auth.users import get_user
from labeling.export.gold_set import long_path
from labeling.review.campaigns import create_campaign, get_campaign
from labeling.review.labels import LabelSubmission, edit_label
from labeling.schema import Schema
from labeling.vocabulary import STATUS_VALIDATED
from tests.factories import add_user, answers_for, label_next
from tests.review.test_label_import import cli, frame_db


def flagged_db(sqlite_template: Path, seed: dict[str, Any], tmp: Path, schema: Schema) -> str:
    """Campaign a (k=2): W101 validated with ann's flag; W102 validated, ann's flag withdrawn
    by an edit. Campaign b (k=1): bob flags W101 and skips W102 with a flag and no note."""
    tmp.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(sqlite_template, tmp / "flags.db")
    url = f"sqlite:///{tmp / 'flags.db'}"
    engine = frame_db(url, seed, tmp, schema)
    create_campaign(engine, name="a", strategy="score_max", overlap=2)
    create_campaign(engine, name="b", strategy="score_max", overlap=1)
    add_user(engine, "ann")
    add_user(engine, "bob")
    zero, one = answers_for(schema, 0), answers_for(schema, 1)
    first = label_next(engine, schema, "a", "ann", zero, flagged=True, note="unclear scope")
    assert first == "W101"
    assert label_next(engine, schema, "a", "bob", zero) == "W101"
    assert label_next(engine, schema, "a", "ann", one, flagged=True, note="wrong field") == "W102"
    edit_label(engine, LabelSubmission(
        campaign_id=get_campaign(engine, "a").id, work_id="W102",
        user_id=get_user(engine, "ann").id, answers=one, flagged=False, note="fine after all",
        schema_hash=schema.hash, scores_visible=True, model_version="m", time_on_item_ms=10,
        submission_id="ann-unflag",
    ), schema=schema)  # fmt: skip
    assert label_next(engine, schema, "a", "bob", one) == "W102"
    again = label_next(engine, schema, "b", "bob", zero, flagged=True, note="check year")
    assert again == "W101"
    assert label_next(engine, schema, "b", "bob", {}, skipped=True, skip_reason="other",
                      flagged=True) == "W102"  # fmt: skip
    engine.dispose()
    return url


def rows(path: Path, fmt: str) -> dict[str, dict[str, Any]]:
    """The rows of a gold-set file by work id, as read back from its format."""
    if fmt == "csv":
        with path.open(encoding="utf-8", newline="") as fh:
            found = list(csv.DictReader(fh))
    elif fmt == "jsonl":
        found = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    else:
        found = pq.read_table(path).to_pylist()
    return {r["work_id"]: r for r in found}


def final(engine: Engine, work_id: str) -> tuple[str, dict]:
    """A work's status and validated answers."""
    with read_session(engine) as session:
        row = session.execute(
            select(Work.status, Work.final_answers).where(Work.id == work_id)
        ).one()
    return row.status, row.final_answers


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_flags_and_notes_in_every_format(
    sqlite_template: Path, seed_record: dict, schema: Schema, tmp_path: Path, fmt: str
) -> None:
    """Each work's flags on current labels (skips too, withdrawn ones not), with --campaign
    only that campaign's; --long says which label is flagged; validated answers stand."""
    url = flagged_db(sqlite_template, seed_record, tmp_path / "src", schema)
    out = tmp_path / f"gold.{fmt}"
    res = cli(url, "export", "--format", fmt, "--out", str(out), "--status", "all", "--long")
    assert res.exit_code == 0, res.output
    got = rows(out, fmt)
    notes = {w: got[w]["flag_notes"] for w in ("W101", "W102", "W103")}
    if fmt == "csv":  # a list is ';'-joined, a whole number is text
        assert [got[w]["flags"] for w in ("W101", "W102", "W103")] == ["2", "1", "0"]
        assert notes == {"W101": "ann: unclear scope;bob: check year",
                         "W102": "bob: (no note)", "W103": ""}  # fmt: skip
    else:
        assert [got[w]["flags"] for w in ("W101", "W102", "W103")] == [2, 1, 0]
        assert notes == {"W101": ["ann: unclear scope", "bob: check year"],
                         "W102": ["bob: (no note)"], "W103": []}  # fmt: skip
    labels = rows_long(long_path(out, fmt), fmt)
    flagged = {(r["campaign"], r["work_id"], r["annotator"]): r["flagged"] for r in labels}
    yes, no = (True, False) if fmt != "csv" else ("true", "false")
    assert flagged == {("a", "W101", "ann"): yes, ("a", "W101", "bob"): no,
                       ("a", "W102", "ann"): no, ("a", "W102", "bob"): no,
                       ("b", "W101", "bob"): yes}  # fmt: skip
    manifest = json.loads(out.with_name(out.name + ".manifest.json").read_text("utf-8"))
    names = [c["name"] for c in manifest["columns"]]
    assert {"flags", "flag_notes"} <= set(names)
    one = tmp_path / f"a.{fmt}"
    res = cli(url, "export", "--format", fmt, "--out", str(one), "--campaign", "a")
    assert res.exit_code == 0, res.output
    in_a = rows(one, fmt)
    assert str(in_a["W101"]["flags"]) == "1" and str(in_a["W102"]["flags"]) == "0"
    if fmt == "jsonl":  # pseudonyms in the notes as everywhere, in a chunk of one work
        hidden = tmp_path / "p.jsonl"
        res = cli(url, "export", "--format", fmt, "--out", str(hidden), "--status", "all",
                  "--pseudonymize")  # fmt: skip
        assert res.exit_code == 0, res.output
        pseudo = rows(hidden, fmt)["W101"]
        assert {n.split(": ", 1)[0] for n in pseudo["flag_notes"]} == set(pseudo["annotators"])
        assert all(n.startswith("annotator-") for n in pseudo["annotators"])
    # A flag is a note for the lead: W101 stays validated with its answers.
    engine = make_engine(url)
    assert final(engine, "W101") == (STATUS_VALIDATED, answers_for(schema, 0))
    engine.dispose()


def rows_long(path: Path, fmt: str) -> list[dict[str, Any]]:
    """The rows of a --long labels file."""
    if fmt == "csv":
        with path.open(encoding="utf-8", newline="") as fh:
            return list(csv.DictReader(fh))
    if fmt == "jsonl":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return pq.read_table(path).to_pylist()


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_a_long_file_with_flags_imports_back_exactly(
    db_url: str,
    sqlite_template: Path,
    seed_record: dict,
    schema: Schema,
    tmp_path: Path,
    fmt: str,
) -> None:
    """import-labels reads the --long file's `flagged`: the labels come back flagged as they
    were, and exporting again gives the same labels file byte for byte."""
    src = flagged_db(sqlite_template, seed_record, tmp_path / "src", schema)
    out = tmp_path / f"x.{fmt}"
    res = cli(src, "export", "--format", fmt, "--out", str(out), "--long", "--status", "all")
    assert res.exit_code == 0, res.output
    dst = frame_db(db_url, seed_record, tmp_path, schema)
    res = cli(db_url, "import-labels", str(long_path(out, fmt)))
    assert res.exit_code == 0, res.output
    assert "0 rows rejected" in res.output
    with read_session(dst) as session:
        flagged = session.execute(
            select(Label.work_id, Label.note).where(Label.flagged.is_(True)).order_by(Label.note)
        ).all()
    assert [tuple(r) for r in flagged] == [("W101", "check year"), ("W101", "unclear scope")]
    again = tmp_path / f"again.{fmt}"
    res = cli(db_url, "export", "--format", fmt, "--out", str(again), "--long", "--status", "all")
    assert res.exit_code == 0, res.output
    assert long_path(out, fmt).read_bytes() == long_path(again, fmt).read_bytes()
    dst.dispose()
