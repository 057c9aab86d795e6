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
from labeling.campaigns import create_campaign
from labeling.cli import main
from labeling.export import long_path
from labeling.frame import import_frame
from labeling.labels import edit_label
from labeling.schema import Schema
from labeling.users import get_user
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
    frame = write_jsonl(tmp_path / f"frame-{abs(hash(url))}.jsonl",
                        [make_record(seed, w, doi=f"10.1/{w.lower()}") for w in WORKS])
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
    edit_label(engine, campaign_id=a_id, work_id="W101", user_id=get_user(engine, "ann").id,
               answers={**in_a, "categories": ["Metaresearch", "Bibliometrics", "Open science"]},
               note="second thoughts", confidence=2, schema_hash="other-hash",
               scores_visible=False, model_version=None, time_on_item_ms=None,
               submission_id="ann-edit", schema=schema)  # fmt: skip
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
    db_url: str, sqlite_template: Path, seed_record: dict, schema: Schema, tmp_path: Path,
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
