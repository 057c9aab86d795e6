"""Label import: each row into its campaign, whole labels only, exact round trips of an
export's --long file, CSV notes unchanged, and every bad input with a defined outcome."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result
from sqlalchemy import Engine, func, select

from db.engine import make_engine, read_session
from db.models import Campaign, Label, User
from labeling.auth.users import get_user
from labeling.cli.main import main
from labeling.export.gold_set import long_path
from labeling.frames.importer import import_frame
from labeling.review.campaigns import create_campaign
from labeling.review.labels import LabelSubmission, edit_label
from labeling.schema import Schema
from tests.conftest import make_record, write_jsonl
from tests.factories import add_user, answers_for, label_next

WORKS = [f"W10{i}" for i in range(1, 7)]
# Notes a spreadsheet would run as formulas, and ones that look like neutralised formulas.
NOTES = ["=cmd|' /C calc'!A0", "'already quoted", "+1", "-x", "@x", "\tx", "\rx", "'=x",
         "''+y", "'", "plain"]  # fmt: skip


def cli(url: str, *args: str) -> Result:
    """Run the labeling CLI on a database."""
    return CliRunner().invoke(main, ["--db", url, *args])


def frame_db(url: str, seed: dict[str, Any], tmp_path: Path, schema: Schema) -> Engine:
    """An engine on `url` with the test frame imported."""
    engine = make_engine(url)
    frame = write_jsonl(
        tmp_path / f"frame-{abs(hash(url))}.jsonl",
        [make_record(seed, w, doi=f"10.1/{w.lower()}") for w in WORKS],
    )
    import_frame(engine, frame, schema)
    return engine


def source_db(sqlite_template: Path, seed: dict[str, Any], tmp_path: Path,
              schema: Schema) -> tuple[str, Engine]:  # fmt: skip
    """The issue's database: ann labels W101 in campaigns a and b differently, edits one
    label (version 2); '=bob' labels every work of a with notes spreadsheets would run."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "source.db"
    shutil.copyfile(sqlite_template, path)
    url = f"sqlite:///{path}"
    engine = frame_db(url, seed, tmp_path, schema)
    for name in ("a", "b"):
        create_campaign(engine, name=name, strategy="score_max", overlap=2)
    add_user(engine, "ann")
    add_user(engine, "=bob")
    in_a = {**answers_for(schema, 0), "categories": ["Metaresearch", "Open science"],
            "genre": "methods"}  # fmt: skip
    in_b = {**answers_for(schema, 1), "categories": ["Bibliometrics"], "genre": "empirical"}
    assert label_next(engine, schema, "a", "ann", in_a, confidence=3, note="first") == "W101"
    assert label_next(engine, schema, "b", "ann", in_b, note="=2+2") == "W101"
    a_id = engine.connect().execute(select(Campaign.id).where(Campaign.name == "a")).scalar()
    edit_label(engine, LabelSubmission(
        campaign_id=a_id, work_id="W101", user_id=get_user(engine, "ann").id,
        answers={**in_a, "categories": ["Metaresearch", "Bibliometrics", "Open science"]},
        note="second thoughts", confidence=2, schema_hash="other-hash", scores_visible=False,
        model_version=None, time_on_item_ms=None, submission_id="ann-edit",
    ), schema=schema)  # fmt: skip
    for k, note in enumerate(NOTES[: len(WORKS)]):
        label_next(engine, schema, "a", "=bob", answers_for(schema, k), note=note)
    for note in NOTES[len(WORKS) :]:  # more notes: =bob's labels in b
        label_next(engine, schema, "b", "=bob", answers_for(schema, 2), note=note)
    return url, engine


def current(engine: Engine) -> list[tuple[str, str, str, dict, str | None, int]]:
    """(campaign, work, annotator, answers, note, version) of every latest label version."""
    with read_session(engine) as session:
        rows = session.execute(
            select(Campaign.name, Label.work_id, User.name, Label.answers, Label.note,
                   Label.version)
            .join(Campaign, Campaign.id == Label.campaign_id).join(User, User.id == Label.user_id)
            .order_by(Campaign.name, Label.work_id, User.name, Label.version)
        ).all()  # fmt: skip
    latest = {(c, w, u): (c, w, u, a, n, v) for c, w, u, a, n, v in rows}
    return sorted(latest.values(), key=lambda r: r[:3])


def count(engine: Engine, model: Any) -> int:
    """Rows of a table."""
    with read_session(engine) as session:
        return session.execute(select(func.count()).select_from(model)).scalar_one()


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_multi_campaign_long_export_round_trips_exactly(
    db_url: str,
    sqlite_template: Path,
    seed_record: dict,
    schema: Schema,
    tmp_path: Path,
    fmt: str,
) -> None:
    """Issue 12.1: export --long --status all of two campaigns, import into a fresh database
    with the same frame: every label back in its own campaign; exporting again gives the
    same labels file byte for byte (versions, times, notes, provenance)."""
    src_url, src = source_db(sqlite_template, seed_record, tmp_path / "src", schema)
    out = tmp_path / f"x.{fmt}"
    res = cli(src_url, "export", "--format", fmt, "--out", str(out), "--long", "--status", "all")
    assert res.exit_code == 0, res.output
    dst = frame_db(db_url, seed_record, tmp_path, schema)
    res = cli(db_url, "import-labels", str(long_path(out, fmt)))
    assert res.exit_code == 0, res.output
    assert current(dst) == current(src)
    ann_a = [r for r in current(dst) if r[:3] == ("a", "W101", "ann")][0]
    assert ann_a[3]["categories"] == ["Metaresearch", "Bibliometrics", "Open science"]
    assert ann_a[3]["genre"] == "methods" and ann_a[5] == 2
    ann_b = [r for r in current(dst) if r[:3] == ("b", "W101", "ann")][0]
    assert ann_b[3]["categories"] == ["Bibliometrics"] and ann_b[3]["genre"] == "empirical"
    assert ann_b[4] == "=2+2"
    with read_session(dst) as session:
        made = session.execute(select(Campaign.name, Campaign.strategy)).all()
    assert sorted(made) == [("a", "manual"), ("b", "manual")]
    again = tmp_path / f"again.{fmt}"
    res = cli(db_url, "export", "--format", fmt, "--out", str(again), "--long", "--status", "all")
    assert res.exit_code == 0, res.output
    first, second = long_path(out, fmt), long_path(again, fmt)
    if fmt == "parquet":
        assert pq.read_table(first).equals(pq.read_table(second))
    assert first.read_bytes() == second.read_bytes()
    labels = count(dst, Label)
    res = cli(db_url, "import-labels", str(first))  # idempotent
    assert res.exit_code == 0, res.output
    assert count(dst, Label) == labels
    src.dispose()
    dst.dispose()


def write_csv(path: Path, header: str, rows: list[str]) -> Path:
    """A labels CSV from a header and raw lines."""
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def full_rows(schema: Schema, wid: str, who: str, variant: int, campaign: str = "") -> list[str]:
    """CSV lines (work_id,annotator,question,value,campaign) of one complete label."""
    out = []
    for question, value in answers_for(schema, variant).items():
        value = ";".join(value) if isinstance(value, list) else value
        out.append(f"{wid},{who},{question},{value},{campaign}")
    return out


def test_rows_go_into_the_campaign_their_file_names(
    db_url: str, seed_record: dict, schema: Schema, tmp_path: Path
) -> None:
    """Issue 12.1: without --campaign each row goes into its campaign (an existing one, or a
    new manual one); --campaign C puts every label into C; two labels of one annotator on
    one work from two campaigns are never merged into C: both are rejected, saying why."""
    engine = frame_db(db_url, seed_record, tmp_path, schema)
    create_campaign(engine, name="a", strategy="score_max")
    rows = (full_rows(schema, "W101", "ann", 0, "a") + full_rows(schema, "W101", "ann", 1, "b")
            + full_rows(schema, "W102", "ann", 2, ""))  # fmt: skip
    path = write_csv(tmp_path / "l.csv", "work_id,annotator,question,value,campaign", rows)
    res = cli(db_url, "import-labels", str(path))
    assert res.exit_code == 0, res.output
    assert "3 labels imported" in res.stdout and "2 campaigns created" in res.stdout
    got = {(c, w, u): a for c, w, u, a, _, _ in current(engine)}
    assert got == {("a", "W101", "ann"): answers_for(schema, 0),
                   ("b", "W101", "ann"): answers_for(schema, 1),
                   ("imported", "W102", "ann"): answers_for(schema, 2)}  # fmt: skip
    one = write_csv(tmp_path / "one.csv", "work_id,annotator,question,value,campaign",
                    full_rows(schema, "W103", "ann", 0, "a")
                    + full_rows(schema, "W104", "ann", 1, "b"))  # fmt: skip
    res = cli(db_url, "import-labels", str(one), "--campaign", "forced")
    assert res.exit_code == 0, res.output
    assert {(w, u) for c, w, u, *_ in current(engine) if c == "forced"} == {
        ("W103", "ann"),
        ("W104", "ann"),
    }
    labels = count(engine, Label)
    res = cli(db_url, "import-labels", str(path), "--campaign", "forced")
    assert res.exit_code == 3
    assert (
        "rejected: line 2 (W101): labels of ann from campaigns 'a', 'b' would both go "
        "into campaign 'forced'"
    ) in res.stderr
    assert "1 labels imported" in res.stdout  # W102's: nothing merged, the rest stored
    assert count(engine, Label) == labels + 1
    engine.dispose()


def test_missing_columns_with_a_new_campaign_create_nothing(
    db_url: str, seed_record: dict, schema: Schema, tmp_path: Path
) -> None:
    """Issue 12.8a: --campaign typo with a file missing required columns exits 2 and creates
    no campaign (nor anything else); so does a truncated .gz or a broken Parquet file."""
    import gzip

    engine = frame_db(db_url, seed_record, tmp_path, schema)
    before = [count(engine, m) for m in (Campaign, Label, User)]
    bad = write_csv(tmp_path / "bad.csv", "work_id,annotator,value", ["W101,ann,methods"])
    res = cli(db_url, "import-labels", str(bad), "--campaign", "typo")
    assert res.exit_code == 2
    assert res.stderr.strip() == f"error: {bad}: missing columns question"
    whole = "\n".join(
        ["work_id,annotator,question,value"] + [f"W101,ann{i},genre,methods" for i in range(3000)]
    ).encode()
    cut = tmp_path / "cut.csv.gz"
    cut.write_bytes(gzip.compress(whole)[:-40])
    res = cli(db_url, "import-labels", str(cut), "--campaign", "typo")
    assert res.exit_code == 2 and "cannot read after line" in res.stderr, res.output
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 not really parquet PAR1")
    res = cli(db_url, "import-labels", str(broken), "--campaign", "typo")
    assert res.exit_code == 2 and "cannot read" in res.stderr, res.output
    res = cli(db_url, "import-labels", str(bad), "--campaign", "x" * 129)
    assert res.exit_code == 2 and "at most 128" in res.stderr
    assert [count(engine, m) for m in (Campaign, Label, User)] == before
    engine.dispose()


def test_a_label_with_a_bad_answer_is_rejected_whole(
    db_url: str, seed_record: dict, schema: Schema, tmp_path: Path
) -> None:
    """Issue 12.8b/c: an unknown question or label rejects every row of that (work,
    annotator) label, naming the bad answer; problems print as import-frame prints them."""
    engine = frame_db(db_url, seed_record, tmp_path, schema)
    header = "work_id,annotator,question,value,campaign"
    rows = (full_rows(schema, "W101", "ann", 0) + ["W101,ann,mood,happy,"]
            + full_rows(schema, "W102", "ann", 1)[:-1] + ["W102,ann,genre,sonnet,"]
            + full_rows(schema, "W103", "ann", 2))  # fmt: skip
    path = write_csv(tmp_path / "l.csv", header, rows)
    res = cli(db_url, "import-labels", str(path))
    assert res.exit_code == 3
    n = len(schema.questions)
    mood, sonnet = n + 2, 2 * n + 2  # their line numbers (the header is line 1)
    lines = res.stderr.splitlines()
    assert len(lines) == 2 * n + 1 and "ImportProblem" not in res.output
    assert lines[0] == (f"rejected: line 2 (W101): part of a rejected label (line {mood}: "
                        "unknown question 'mood')")  # fmt: skip
    assert lines[n] == f"rejected: line {mood} (W101): unknown question 'mood'"
    assert lines[-1] == (f"rejected: line {sonnet} (W102): question 'genre': 'sonnet' is not "
                         "one of its labels")  # fmt: skip
    assert " ".join(res.stdout.split()) == (  # the closing line, wrapped at 120 characters
        f"done: {3 * n + 1} rows, 1 labels imported, 0 already present, {2 * n + 1} rows "
        "rejected, 1 works added to campaigns, 1 users created, 1 campaigns created, "
        "0 validated works corroborated, 0 disputes opened across campaigns"
    )
    assert [(w, u) for _, w, u, *_ in current(engine)] == [("W103", "ann")]
    engine.dispose()


@pytest.mark.parametrize(
    "cell",
    [
        "=cmd|' /C calc'!A0",
        "+1",
        "-x",
        "@x",
        "\tx",
        "\rx",
        "'=x",
        "''@y",
        "'already quoted",
        "'",
        "''",
        "plain",
        "",
        "a=b",
    ],
)
def test_neutralise_and_its_inverse(cell: str) -> None:
    """Issue 12.9: the export's rule and the importer's inverse, cell by cell."""
    import pyarrow as pa

    from labeling.export.csv_cells import FORMULA_START, neutralise, neutralised, unneutralise

    out = neutralise(cell)
    assert unneutralise(out) == cell
    assert not out.startswith(FORMULA_START)
    assert out == ("'" + cell if cell.lstrip("'").startswith(FORMULA_START) else cell)
    assert neutralised(pa.array([cell, None, "x"])).to_pylist() == [out, None, "x"]


def test_csv_notes_round_trip_unchanged(
    db_url: str, sqlite_template: Path, seed_record: dict, schema: Schema, tmp_path: Path
) -> None:
    """Issue 12.9: a --long CSV keeps spreadsheets from running notes and annotator names,
    and import-labels gives back exactly the notes and names that were exported."""
    import csv

    src_url, src = source_db(sqlite_template, seed_record, tmp_path / "src", schema)
    out = tmp_path / "x.csv"
    res = cli(src_url, "export", "--format", "csv", "--out", str(out), "--long", "--status", "all")
    assert res.exit_code == 0, res.output
    with long_path(out, "csv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["note"] for r in rows} >= {"'=cmd|' /C calc'!A0", "''=x", "'''+y", "'already quoted"}
    assert all(not c.startswith(("=", "+", "-", "@", "\t", "\r")) for r in rows for c in r.values())
    dst = frame_db(db_url, seed_record, tmp_path, schema)
    res = cli(db_url, "import-labels", str(long_path(out, "csv")))
    assert res.exit_code == 0, res.output
    notes = {(c, w, u): n for c, w, u, _, n, _ in current(dst)}
    assert notes == {(c, w, u): n for c, w, u, _, n, _ in current(src)}
    assert set(NOTES) <= set(notes.values()) and ("a", "W101", "=bob") in notes
    src.dispose()
    dst.dispose()


def test_sample_design_only_for_the_sample_named(
    db_url: str, seed_record: dict, schema: Schema, tmp_path: Path
) -> None:
    """Issue 12.10: a work labelled only in a score-ordered campaign gets no sample design in
    an export of all campaigns (nor of that campaign); an export of the sample gives each
    of its works its stratum, inclusion probability and weight; the manifest says which."""
    import json

    from db.models import CampaignItem

    engine = frame_db(db_url, seed_record, tmp_path, schema)
    create_campaign(engine, name="top", strategy="score_max")
    sample = create_campaign(engine, name="sample", strategy="stratified", sample_size=3,
                             bins=[0, 0.5, 1], seed=3)  # fmt: skip
    with read_session(engine) as session:
        drawn = sorted(session.execute(select(CampaignItem.work_id).where(
            CampaignItem.campaign_id == sample.id)).scalars())  # fmt: skip
    labelled = drawn[0]
    path = write_csv(tmp_path / "l.csv", "work_id,annotator,question,value,campaign",
                     full_rows(schema, labelled, "ann", 0, "top"))  # fmt: skip
    assert cli(db_url, "import-labels", str(path)).exit_code == 0

    def export(*args: str) -> tuple[dict[str, dict], dict]:
        out = tmp_path / "g.jsonl"
        res = cli(db_url, "export", "--format", "jsonl", "--out", str(out), "--status", "all",
                  *args)  # fmt: skip
        assert res.exit_code == 0, res.output
        rows = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
        manifest = json.loads((tmp_path / "g.jsonl.manifest.json").read_text("utf-8"))
        return {r["work_id"]: r for r in rows}, manifest

    design = ("sample_campaign", "stratum", "inclusion_prob", "weight")
    for args in ((), ("--campaign", "top")):
        rows, manifest = export(*args)
        assert labelled in rows
        assert all(r[c] is None for r in rows.values() for c in design), args
        assert (
            "filled only when --campaign names a probability-sample" in (manifest["sample_design"])
        )
    rows, manifest = export("--campaign", "sample")
    assert sorted(rows) == drawn
    for row in rows.values():
        assert row["sample_campaign"] == "sample" and row["stratum"].startswith("score_max")
        assert row["inclusion_prob"] == pytest.approx(0.5) and row["weight"] == pytest.approx(2)
    assert "probability sample 'sample'" in manifest["sample_design"]
    engine.dispose()
