"""Gold-set export: formats, determinism, safety, filters, manifest, roles and the round trip."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest
import streamlit as st
from click.testing import CliRunner
from sqlalchemy import Engine, select
from streamlit.testing.v1 import AppTest

import labeling
from db.engine import make_engine, read_session, upgrade
from db.models import Export
from labeling.cli.export import register
from labeling.cli.main import main
from labeling.export.definitions import Pseudonymizer
from labeling.export.gold_set import ExportError, ExportFilters, export_gold, long_path, preview
from labeling.frames.importer import import_frame
from labeling.review.campaigns import create_campaign
from labeling.review.label_import import import_labels
from labeling.review.labels import LabelSubmission, submit_label
from labeling.review.queue import claim_next
from labeling.review.validation import adjudicate
from labeling.schema import Schema
from tests.conftest import make_record, write_jsonl
from tests.factories import add_user, answers_for

if "export" not in main.commands:
    register(main)

PAGE = Path(__file__).resolve().parents[2] / "pages" / "export.py"
HOSTILE = {
    "W01": '=HYPERLINK("http://x","click")',
    "W02": 'Quotes "inside", commas,\nnewlines and a line\u2028separator',
    "W03": "日本語のタイトル: Ελληνικά и русский",
    "W04": "+1 -2 @sum\ttab",
    "W05": "-minus first",
    "W06": "@at first",
}
VALIDATION_STATUS = "score_only:v0-immature-baseline"


def _frame(tmp_path: Path, seed: dict[str, Any], ids: list[str], name: str) -> Path:
    """A small frame file built from the seed record."""
    recs = [make_record(seed, wid, title=HOSTILE.get(wid, f"Plain title {wid}"),
                        doi=f"10.1/{wid.lower()}") for wid in ids]  # fmt: skip
    return write_jsonl(tmp_path / name, recs)


def _label_all(engine: Engine, schema: Schema, cid: int, uid: int, variant: Any) -> list[str]:
    """Claim and label every work the user is offered; variant(work_id) picks the answers."""
    done = []
    while (claim := claim_next(engine, cid, uid)) is not None:
        submit_label(engine, LabelSubmission(
            campaign_id=cid, work_id=claim.work_id, user_id=uid,
            answers=answers_for(schema, variant(claim.work_id)), schema_hash=schema.hash,
            scores_visible=True, model_version="metacan-v3-hybrid-931329e0061c",
            time_on_item_ms=1500, submission_id=f"{cid}-{uid}-{claim.work_id}",
        ), schema=schema)  # fmt: skip
        done.append(claim.work_id)
    return done


def build_gold_db(engine: Engine, schema: Schema, seed: dict[str, Any], tmp_path: Path) -> None:
    """W01-W04 validated by rule, W05 adjudicated, W06 disputed; a sample over W07-W09."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    import_frame(engine, _frame(tmp_path, seed, [f"W0{i}" for i in range(1, 7)], "a.jsonl"),
                 schema)  # fmt: skip
    alice, bob = add_user(engine, "alice"), add_user(engine, "=bob")
    lead = add_user(engine, "lea", role="lead")
    main_c = create_campaign(engine, name="main", overlap=2)
    _label_all(engine, schema, main_c.id, alice, lambda w: 0)
    _label_all(engine, schema, main_c.id, bob, lambda w: 1 if w in ("W05", "W06") else 0)
    adjudicate(engine, "W05", answers_for(schema, 1), "codebook", lead, main_c.id, schema=schema)
    import_frame(engine, _frame(tmp_path, seed, ["W07", "W08", "W09"], "b.jsonl"), schema)
    sample = create_campaign(
        engine, name="sample", strategy="stratified", sample_size=2, bins=[0, 0.5, 1],
        filter={"status": ["machine_predicted_unvalidated"]}, overlap=1, seed=1,
    )  # fmt: skip
    _label_all(engine, schema, sample.id, add_user(engine, "carol"), lambda w: 2)


@pytest.fixture
def gold(engine: Engine, schema: Schema, seed_record: dict, tmp_path: Path) -> Engine:
    """A database with validated, adjudicated, disputed and sampled works."""
    build_gold_db(engine, schema, seed_record, tmp_path / "frames")
    return engine


def _export(engine: Engine, schema: Schema, out: Path, fmt: str, **kw: Any) -> Any:
    """Export with filters given as keywords."""
    opts = {k: kw.pop(k) for k in ("long", "pseudonymize", "chunk_size", "user_id") if k in kw}
    return export_gold(engine, schema, out, fmt=fmt, filters=ExportFilters(**kw), **opts)


def _read(path: Path, fmt: str) -> pd.DataFrame:
    """A data file back as a DataFrame."""
    if fmt == "csv":
        return pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
    if fmt == "jsonl":
        return pd.read_json(path, lines=True, dtype=False)
    return pq.read_table(path).to_pandas()


def _records(path: Path, fmt: str) -> list[dict[str, Any]]:
    """A CSV or JSONL file back as a list of dicts, without type guessing."""
    with path.open(encoding="utf-8", newline="") as fh:
        if fmt == "csv":
            return list(csv.DictReader(fh))
        return [json.loads(line) for line in fh]


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_each_format_reads_back(gold: Engine, schema: Schema, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"gold.{fmt}"
    result = _export(gold, schema, out, fmt, chunk_size=3)
    df = _read(out, fmt)
    assert result.row_count == len(df) == 7
    assert list(df["work_id"]) == sorted(df["work_id"])
    assert result.counts == {"human_validated": 7}
    by_id = df.set_index("work_id")
    cats = by_id.loc["W01", "human_categories"]
    expected = answers_for(schema, 0)["categories"]
    assert (cats.split(";") if fmt == "csv" else list(cats)) == expected
    assert by_id.loc["W02", "title"] == HOSTILE["W02"]  # quotes, newline, U+2028
    assert by_id.loc["W03", "title"] == HOSTILE["W03"]
    assert set(by_id["validation_status"]) == {VALIDATION_STATUS}
    assert set(by_id["prediction_status"]) == {"machine_predicted_unvalidated"}
    assert by_id.loc["W01", "validation_method"] == "rule"
    assert by_id.loc["W01", "validation_rule"] == "unanimous:k=2"
    assert by_id.loc["W05", "validation_method"] == "adjudicated"
    assert by_id.loc["W05", "validated_by"] == "lea"
    assert str(by_id.loc["W05", "agreement"]) in ("0.0", "0")
    assert float(by_id.loc["W01", "agreement"]) == 1.0
    assert int(by_id.loc["W01", "n_labels"]) == 2
    assert by_id.loc["W01", "machine_study_design_codex"] == "design_other"
    assert by_id.loc["W01", "machine_genre_gemma"] == "empirical"
    assert by_id.loc["W01", "model_version"] == "metacan-v3-hybrid-931329e0061c"
    # Design columns belong to a (work, sample) pair: empty unless the sample is named.
    for col in ("sample_campaign", "stratum", "inclusion_prob", "weight"):
        assert (by_id[col].isna() | (by_id[col] == "")).all(), col
    out = tmp_path / f"sample.{fmt}"
    _export(gold, schema, out, fmt, campaign="sample")
    sampled = _read(out, fmt)
    assert len(sampled) == 2 and set(sampled["sample_campaign"]) == {"sample"}
    assert float(sampled["inclusion_prob"].iloc[0]) == pytest.approx(2 / 3)
    assert float(sampled["weight"].iloc[0]) == pytest.approx(1.5)
    assert all(str(s).startswith("score_max") for s in sampled["stratum"])


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_same_state_exports_identical_bytes(
    gold: Engine, schema: Schema, tmp_path: Path, fmt: str
) -> None:
    a = _export(gold, schema, tmp_path / f"a.{fmt}", fmt, long=True)
    b = _export(gold, schema, tmp_path / f"b.{fmt}", fmt, long=True, chunk_size=2)
    assert a.sha256 == b.sha256
    assert (tmp_path / f"a.{fmt}").read_bytes() == (tmp_path / f"b.{fmt}").read_bytes()
    assert a.long_sha256 == b.long_sha256
    if fmt == "parquet":
        meta = pq.ParquetFile(tmp_path / f"a.{fmt}").metadata
        assert meta.created_by.startswith("parquet-cpp-arrow")
        assert b"pandas" not in (meta.metadata or {})


def test_parquet_row_groups_do_not_depend_on_chunking(
    gold: Engine, schema: Schema, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("labeling.export.gold_set.ROW_GROUP", 3)
    a = _export(gold, schema, tmp_path / "a.parquet", "parquet", chunk_size=2)
    b = _export(gold, schema, tmp_path / "b.parquet", "parquet", chunk_size=5)
    assert a.sha256 == b.sha256
    meta = pq.ParquetFile(tmp_path / "a.parquet").metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [3, 3, 1]
    assert list(pq.read_table(tmp_path / "a.parquet")["work_id"].to_pylist()) == sorted(
        pq.read_table(tmp_path / "b.parquet")["work_id"].to_pylist()
    )


@pytest.mark.parametrize("cell", ["=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx"])
def test_neutralise_each_formula_start(cell: str) -> None:
    import pyarrow as pa

    from labeling.export.gold_set import csv_ready, neutralise

    assert neutralise(cell) == "'" + cell
    assert neutralise("plain =") == "plain ="
    table = pa.table(
        {"text": [cell, "plain =", None, ""], "labels": [[cell, "b"], ["b", cell], None, []]}
    )
    ready = csv_ready(table).to_pydict()
    assert ready["text"] == ["'" + cell, "plain =", None, ""]
    assert ready["labels"] == ["'" + cell + ";b", "b;" + cell, None, ""]


def test_csv_neutralises_formulas(gold: Engine, schema: Schema, tmp_path: Path) -> None:
    out = tmp_path / "gold.csv"
    _export(gold, schema, out, "csv", status="all", long=True)
    with out.open(encoding="utf-8", newline="") as fh:
        rows = {r["work_id"]: r for r in csv.DictReader(fh)}
    assert rows["W01"]["title"] == "'" + HOSTILE["W01"]
    assert rows["W04"]["title"] == "'" + HOSTILE["W04"]
    assert rows["W05"]["title"] == "'-minus first"
    assert rows["W06"]["title"] == "'@at first"
    assert rows["W03"]["title"] == HOSTILE["W03"]
    assert "'=bob" in rows["W01"]["annotators"].split(";")
    for row in rows.values():
        for cell in row.values():
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell
    with long_path(out, "csv").open(encoding="utf-8", newline="") as fh:
        assert {r["annotator"] for r in csv.DictReader(fh)} == {"alice", "'=bob", "carol"}


def test_status_campaign_question_and_date_filters(
    gold: Engine, schema: Schema, tmp_path: Path
) -> None:
    def ids(**kw: Any) -> list[str]:
        out = tmp_path / "f.jsonl"
        _export(gold, schema, out, "jsonl", **kw)
        return list(_read(out, "jsonl")["work_id"]) if out.stat().st_size else []

    validated = ids()
    assert len(validated) == 7 and "W06" not in validated
    labelled = ids(status="labelled")
    assert len(labelled) == 8 and "W06" in labelled
    assert len(ids(status="all")) == 9
    assert ids(campaign="main") == ["W01", "W02", "W03", "W04", "W05"]
    assert ids(campaign="main", status="all") == [f"W0{i}" for i in range(1, 7)]
    assert len(ids(campaign="sample")) == 2
    today = datetime.now(UTC).date()
    assert len(ids(since=today, until=today)) == 7
    assert ids(until=today - timedelta(days=1)) == []
    assert ids(since=today + timedelta(days=1)) == []
    out = tmp_path / "q.parquet"
    _export(gold, schema, out, "parquet", questions=("genre",))
    cols = pq.read_schema(out).names
    assert "human_genre" in cols and "human_categories" not in cols
    assert "machine_genre_codex" in cols and "machine_categories_codex" not in cols
    with pytest.raises(ExportError, match="unknown questions nope"):
        _export(gold, schema, out, "parquet", questions=("nope",))
    with pytest.raises(ExportError, match="no campaign"):
        _export(gold, schema, out, "parquet", campaign="missing")
    with pytest.raises(ExportError, match="status must be"):
        _export(gold, schema, out, "parquet", status="done")
    with pytest.raises(ExportError, match="after until"):
        _export(gold, schema, out, "parquet", since=today, until=today - timedelta(days=1))


def test_manifest_and_export_record(gold: Engine, schema: Schema, tmp_path: Path) -> None:
    out = tmp_path / "gold.parquet"
    result = _export(gold, schema, out, "parquet", status="labelled", long=True,
                     questions=("genre", "categories"), user_id=None)  # fmt: skip
    manifest = json.loads((tmp_path / "gold.parquet.manifest.json").read_text("utf-8"))
    import hashlib

    assert manifest["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest() == result.sha256
    assert manifest["tool_version"] == labeling.__version__
    assert manifest["schema"]["hash"] == schema.hash
    assert manifest["schema"]["questions"] == ["categories", "genre"]
    assert manifest["row_count"] == 8
    assert manifest["counts_per_status"] == {"human_disputed": 1, "human_validated": 7}
    assert manifest["filters"]["status"] == "labelled"
    assert manifest["filters"]["questions"] == ["genre", "categories"]
    assert datetime.fromisoformat(manifest["created_at"])
    assert manifest["labels_file"]["row_count"] == result.long_rows > 0
    with read_session(gold) as session:
        rec = session.execute(
            select(Export.format, Export.row_count, Export.sha256, Export.filters)
        ).one()
    assert (rec.format, rec.row_count, rec.sha256) == ("parquet", 8, result.sha256)
    assert rec.filters["long"] is True and rec.filters["status"] == "labelled"


def test_pseudonyms_are_stable_and_hide_names(gold: Engine, schema: Schema, tmp_path: Path) -> None:
    out = tmp_path / "p.jsonl"
    _export(gold, schema, out, "jsonl", long=True, pseudonymize=True)
    text = out.read_text("utf-8") + long_path(out, "jsonl").read_text("utf-8")
    for name in ("alice", "=bob", "carol", "adjudicated:lea"):
        assert name not in text
    with gold.connect() as conn:
        pseudo = Pseudonymizer.for_database(conn)
    assert pseudo("alice") == Pseudonymizer.for_database(gold.connect())("alice")
    assert pseudo("alice") != pseudo("carol")
    assert pseudo("alice") in text and pseudo("lea") in text
    again = tmp_path / "p2.jsonl"
    _export(gold, schema, again, "jsonl", pseudonymize=True)
    assert again.read_bytes() == out.read_bytes()
    assert Pseudonymizer(b"other")("alice") != pseudo("alice")


def test_preview_counts_and_rows(gold: Engine, schema: Schema) -> None:
    pv = preview(gold, schema, ExportFilters(status="all"), limit=4)
    assert pv.counts == {"human_disputed": 1, "human_validated": 7,
                         "machine_predicted_unvalidated": 1}  # fmt: skip
    assert pv.total == 9
    assert [r["work_id"] for r in pv.rows] == ["W01", "W02", "W03", "W04"]
    assert pv.columns[0] == "work_id"


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_round_trip_through_import_labels(
    gold: Engine, schema: Schema, seed_record: dict, tmp_path: Path, fmt: str
) -> None:
    first = tmp_path / f"first.{fmt}"
    _export(gold, schema, first, fmt, campaign="main", long=True)
    fresh = make_engine(f"sqlite:///{tmp_path / 'fresh.db'}")
    upgrade(fresh)
    frames = tmp_path / "frames2"
    frames.mkdir()
    import_frame(fresh, _frame(frames, seed_record, [f"W0{i}" for i in range(1, 10)], "f.jsonl"),
                 schema)  # fmt: skip
    create_campaign(fresh, name="main", strategy="manual", overlap=2)
    summary = import_labels(fresh, long_path(first, fmt), schema, campaign="main")
    assert summary.rejected == 0, summary.problems
    second = tmp_path / f"second.{fmt}"
    _export(fresh, schema, second, fmt, campaign="main", long=True)
    a, b = (
        (_records(first, fmt), _records(second, fmt))
        if fmt != "parquet"
        else (pq.read_table(first).to_pylist(), pq.read_table(second).to_pylist())
    )
    # W05 was adjudicated (a lead's decision, not a label): the labels alone leave it disputed.
    a = [r for r in a if r["validation_method"] == "rule"]
    assert [r["work_id"] for r in a] == [r["work_id"] for r in b] == ["W01", "W02", "W03", "W04"]
    assert a == b  # answers, provenance, annotators, label times, machine side: all equal
    fresh.dispose()


def test_cli_export_and_bad_input(gold: Engine, schema: Schema, tmp_path: Path) -> None:
    url = gold.url.render_as_string(hide_password=False)
    runner = CliRunner()
    out = tmp_path / "cli.csv"
    res = runner.invoke(main, ["--db", url, "export", "--format", "csv", "--out", str(out),
                               "--status", "all", "--questions", "genre,categories",
                               "--since", "2000-01-01", "--long", "--pseudonymize"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "wrote 8 rows" in res.output  # works with a label since 2000
    assert out.exists() and long_path(out, "csv").exists()
    assert (tmp_path / "cli.csv.manifest.json").exists()
    for args, message in [
        (["--format", "xml"], "Invalid value"),
        (["--questions", "nope"], "unknown questions"),
        (["--campaign", "missing"], "no campaign"),
        (["--since", "yesterday"], "Invalid value"),
        (["--since", "2025-02-01", "--until", "2025-01-01"], "after until"),
        (["--user", "ghost"], "no user named"),
    ]:
        base = ["--db", url, "export", "--out", str(tmp_path / "bad.csv")]
        if "--format" not in args:
            base += ["--format", "csv"]
        res = runner.invoke(main, base + args)
        assert res.exit_code == 2, (args, res.output)
        assert message in res.output


# ------------------------------------------------------------------ the page and roles


@pytest.fixture
def page_env(sqlite_url: str, schema: Schema, seed_record: dict, tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:  # fmt: skip
    """The app's settings pointed at a gold database with one user per role."""
    from labeling.auth.users import add_user as add_account
    from labeling.database import dispose_all, get_engine
    from labeling.settings import get_settings

    monkeypatch.setenv("LABELING_DB_URL", sqlite_url)
    monkeypatch.setenv("LABELING_OPENALEX_OFFLINE", "true")
    get_settings.cache_clear()
    st.cache_resource.clear()
    engine = get_engine(sqlite_url)
    for role in ("annotator", "lead", "exporter", "admin"):
        add_account(engine, f"{role}-user", role, "pw-" + role)
    build_gold_db(engine, schema, seed_record, tmp_path / "frames")
    yield sqlite_url
    st.cache_resource.clear()
    get_settings.cache_clear()
    dispose_all()


def _page_as(url: str, role: str) -> AppTest:
    """Run the export page with a session of the role's user."""
    from labeling.auth.login_sessions import create_session
    from labeling.auth.users import get_user
    from labeling.database import get_engine

    engine = get_engine(url)
    user = get_user(engine, f"{role}-user")
    assert user is not None
    at = AppTest.from_file(str(PAGE), default_timeout=60)
    at.session_state["auth_token"] = create_session(engine, user.id)
    return at.run()


@pytest.mark.parametrize("role", ["exporter", "lead", "admin"])
def test_export_page_opens_for_exporting_roles(page_env: str, role: str) -> None:
    at = _page_as(page_env, role)
    assert not at.exception, at.exception
    assert at.title[0].value == "Export"
    assert "7 works" in at.subheader[0].value
    assert not at.error


def test_export_page_filters_and_annotator_refused(page_env: str) -> None:
    at = _page_as(page_env, "exporter")
    at.selectbox(key="exp_status").set_value("all").run()
    assert not at.exception, at.exception
    assert "9 works" in at.subheader[0].value
    refused = _page_as(page_env, "annotator")
    assert refused.error and "do not have access" in refused.error[0].value
    assert not refused.title


def test_parquet_bytes_do_not_depend_on_chunk_boundaries(tmp_path: Path) -> None:
    """Long unique texts fill data pages; the writer's pages must not follow the chunks."""
    import pyarrow as pa

    from labeling.export.gold_set import _Writer

    n = 150_000
    table = pa.table({"title": [f"A study of thing number {i} " * 3 for i in range(n)]})
    digests = set()
    for size in (20_000, 7_777, n):
        writer = _Writer(tmp_path / f"t{size}.parquet", "parquet", table.schema)
        for start in range(0, n, size):
            writer.write(table.slice(start, size))
        digests.add(writer.close())
    assert len(digests) == 1
