"""Issue 50: the export names the human outcome unmistakably and describes every column.

`human_status` (the human outcome) comes right after the work id; the frame's
`prediction_status` and `validation_status` ship verbatim; the manifest describes every
column of both files, README's table matches the descriptions, and the export page's preview
shows the work id, title and human answers first.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine

from labeling.cli.export import register
from labeling.cli.main import main
from labeling.export.column_docs import markdown
from labeling.export.gold_set import long_path, manifest_path
from labeling.schema import Schema
from labeling.vocabulary import STATUSES
from tests.export.test_export import VALIDATION_STATUS, _page_as, build_gold_db, page_env

if "export" not in main.commands:
    register(main)

README = Path(__file__).resolve().parents[2] / "README.md"
__all__ = ["page_env"]  # the export page's fixture, shared with test_export


def cli(url: str, *args: str) -> Any:
    """Run the CLI on a database; fail with its output if it does not exit 0."""
    res = CliRunner().invoke(main, ["--db", url, *args])
    assert res.exit_code == 0, res.output
    return res


def _header(path: Path) -> list[str]:
    """The first line of a CSV file, as column names."""
    with path.open(encoding="utf-8", newline="") as fh:
        return next(csv.reader(fh))


def _manifest(out: Path) -> dict[str, Any]:
    """The manifest written beside an export."""
    return json.loads(manifest_path(out).read_text("utf-8"))


@pytest.fixture(scope="module")
def demo_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo database (the real schema and every column) exported with --long, as CSV."""
    folder = tmp_path_factory.mktemp("demo-export")
    url = f"sqlite:///{folder / 'demo.db'}"
    cli(url, "demo")
    out = folder / "gold.csv"
    cli(url, "export", "--format", "csv", "--out", str(out), "--status", "all", "--long")
    return out


def test_every_exported_column_is_described(demo_export: Path) -> None:
    """A column added without a description fails here (the manifest gives it none)."""
    manifest = _manifest(demo_export)
    header = _header(demo_export)
    assert [c["name"] for c in manifest["columns"]] == header
    for column in manifest["columns"]:
        assert set(column) == {"name", "type", "description"}
        assert column["description"], f"column {column['name']} has no description"
    labels = manifest["labels_file"]["columns"]
    assert [c["name"] for c in labels] == _header(long_path(demo_export, "csv"))
    for column in labels:
        assert column["description"], f"labels file column {column['name']} has no description"
    # The demo's columns include today's provenance and the stored record's machine columns.
    assert {"dispute_open", "corroborated_by", "model_version_current"} <= set(header)
    assert any(c.startswith("machine_") and c.endswith("_current") for c in header)


def test_human_status_comes_right_after_the_work_id(demo_export: Path) -> None:
    header = _header(demo_export)
    assert header[:2] == ["work_id", "human_status"]
    assert "status" not in header  # the ambiguous name is gone
    # The frame's own statuses still ship, verbatim, and say they are the machine's.
    described = {c["name"]: c["description"] for c in _manifest(demo_export)["columns"]}
    assert "human outcome" in described["human_status"]
    assert "verbatim from the frame" in described["prediction_status"]
    assert "never a human outcome" in described["prediction_status"]
    assert "verbatim from the frame" in described["validation_status"]
    assert "every row" in described["validation_status"]


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_human_status_and_the_frame_statuses_in_each_row(
    engine: Engine, schema: Schema, seed_record: dict, tmp_path: Path, fmt: str
) -> None:
    build_gold_db(engine, schema, seed_record, tmp_path / "frames")
    url = engine.url.render_as_string(hide_password=False)
    out = tmp_path / f"gold.{fmt}"
    cli(url, "export", "--format", fmt, "--out", str(out), "--status", "all")
    with out.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh)) if fmt == "csv" else [json.loads(line) for line in fh]
    assert {r["human_status"] for r in rows} <= set(STATUSES)
    assert all(r["prediction_status"] == "machine_predicted_unvalidated" for r in rows)
    assert all(r["validation_status"] == VALIDATION_STATUS for r in rows)
    # The manifest's counts per status count the human outcome, as before the rename.
    counts = Counter(r["human_status"] for r in rows)
    assert _manifest(out)["counts_per_status"] == dict(counts) == {
        "human_disputed": 1, "human_validated": 7, "machine_predicted_unvalidated": 1}  # fmt: skip
    # The --status filter keeps its values.
    validated = tmp_path / f"validated.{fmt}"
    cli(url, "export", "--format", fmt, "--out", str(validated), "--status", "validated")
    assert _manifest(validated)["counts_per_status"] == {"human_validated": 7}


def test_readme_holds_the_column_tables() -> None:
    """README's tables are labeling.export.column_docs.markdown() (python -m prints them)."""
    assert markdown() in README.read_text("utf-8")


def test_export_page_preview_shows_work_title_and_human_answers_first(
    page_env: str, schema: Schema
) -> None:
    at = _page_as(page_env, "exporter")
    assert not at.exception, at.exception
    order = list(at.dataframe[0].proto.column_order)
    first = ["work_id", "title", *(f"human_{q.name}" for q in schema.questions)]
    assert order[: len(first)] == first
    assert order[len(first)] == "human_status"
    assert sorted(order) == sorted(at.dataframe[0].value.columns)  # every column, once
