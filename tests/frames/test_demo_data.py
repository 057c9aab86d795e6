"""The bundled demo frame and abstracts: real OpenAlex fields, seed-shaped, reproducible."""

from __future__ import annotations

import gzip
import importlib.util
import json
import math
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from labeling.schema import Schema, get_path
from labeling.settings import PACKAGE_DIR

ROOT = Path(__file__).resolve().parents[2]
DATA = PACKAGE_DIR / "data"
FRAME = DATA / "demo_frame.jsonl.gz"
ABSTRACTS = DATA / "demo_abstracts.json"
OPENALEX = Path(__file__).resolve().parents[1] / "fixtures" / "openalex"
SEED_ID = "W4413411773"


def _load_script() -> ModuleType:
    """The demo-data script, imported from scripts/ (not a package)."""
    path = ROOT / "scripts" / "make_demo_data.py"
    spec = importlib.util.spec_from_file_location("make_demo_data", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def lines() -> list[str]:
    """The bundled frame's lines (split on newlines only)."""
    text = gzip.decompress(FRAME.read_bytes()).decode("utf-8")
    assert text.endswith("\n")
    return text[:-1].split("\n")


@pytest.fixture(scope="module")
def frame(lines: list[str]) -> dict[str, dict[str, Any]]:
    """The bundled frame's records by id."""
    return {rec["id"]: rec for rec in map(json.loads, lines)}


@pytest.fixture(scope="module")
def abstracts() -> dict[str, str | None]:
    """The bundled abstracts file."""
    return json.loads(ABSTRACTS.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def openalex() -> dict[str, dict[str, Any]]:
    """The OpenAlex fixture works by short id."""
    works = {}
    for page in sorted(OPENALEX.glob("*.json")):
        for work in json.loads(page.read_text(encoding="utf-8"))["results"]:
            works[work["id"].rsplit("/", 1)[-1]] = work
    return works


def test_files_are_small() -> None:
    """Both bundled files stay at a few hundred KB at most."""
    assert FRAME.stat().st_size < 300_000
    assert ABSTRACTS.stat().st_size < 400_000


def test_frame_lines_parse_with_unique_ids(lines: list[str], frame: dict) -> None:
    """At least 150 lines, each a JSON object, ids unique."""
    assert len(lines) >= 153
    assert len(frame) == len(lines)
    assert all(rec["id"].startswith("W") and rec["id"][1:].isdigit() for rec in frame.values())


def test_seed_record_is_present_verbatim(lines: list[str]) -> None:
    """The seed record is one line of the frame, byte for byte."""
    seed_text = (DATA / "seed_record.json").read_text(encoding="utf-8").strip()
    assert seed_text in lines
    assert json.loads(seed_text)["id"] == SEED_ID


def test_every_openalex_work_with_real_fields(frame: dict, openalex: dict) -> None:
    """Every fixture work is in the frame with its real title, year, DOI and counts."""
    assert set(openalex) <= set(frame)
    assert len(openalex) == 152
    for wid, work in openalex.items():
        rec = frame[wid]
        assert rec["title"] == work["title"]
        assert rec["year"] == work["publication_year"]
        assert rec["lang"] == work["language"] and rec["type"] == work["type"]
        assert rec["cited_by"] == work["cited_by_count"]
        assert rec["has_abstract"] == (work["abstract_inverted_index"] is not None)
        if work.get("doi"):
            assert f"https://doi.org/{rec['doi']}" == work["doi"]
        assert rec["topic"] == (work.get("primary_topic") or {}).get("display_name", "")
    oa = frame["W2741809807"]
    assert oa["doi"] == "10.7717/peerj.4375" and oa["year"] == 2018
    assert "Université de Montréal" in oa["ca_institutions"].split("; ")
    assert oa["routes"]["ca_aff"] is True
    assert frame["W1934649023"]["title"].startswith("Governance Matters IV")


def test_records_are_seed_shaped(frame: dict, seed_record: dict, schema: Schema) -> None:
    """Every record has the seed's keys and schema-length score vectors."""
    for rec in frame.values():
        assert list(rec) == list(seed_record)
        assert set(rec["prediction"]) == set(seed_record["prediction"])
        assert set(rec["routes"]) == set(seed_record["routes"])
        assert rec["machine_scores"]["validation_status"] == "score_only:v0-immature-baseline"
        for q in schema.questions:
            for path in q.scores.values():
                value = get_path(rec, path)
                if q.kind == "binary":
                    assert 0.0 <= value <= 1.0
                else:
                    assert len(value) == len(q.labels)


def test_queue_top_is_plausible(frame: dict) -> None:
    """Most works score low; the top of a score queue is about research and publishing."""

    def score(rec: dict) -> float:
        return max(rec["machine_scores"]["score_opus"], rec["machine_scores"]["score_gpt"])

    ranked = sorted(frame.values(), key=score, reverse=True)
    top = [rec["id"] for rec in ranked[:8]]
    assert top[0] == "W2741809807"  # state of OA
    # bibliometrix is about bibliometrics but has no abstract: it comes after works that do
    assert "W2755950973" in top and all(frame[w]["has_abstract"] for w in top[:5])
    scores = sorted(score(rec) for rec in frame.values())
    assert scores[len(scores) // 2] < 0.2
    assert "Open science" in frame["W2741809807"]["prediction"]["consensus_categories"]


def test_abstracts_cover_every_work(frame: dict, abstracts: dict, openalex: dict) -> None:
    """Every frame id has an entry: text where OpenAlex has an abstract, null where not."""
    assert set(abstracts) == set(frame)
    for wid, work in openalex.items():
        assert (abstracts[wid] is None) == (work["abstract_inverted_index"] is None)
    assert abstracts["W2755950973"] is None and abstracts["W2041234663"] is None
    assert abstracts[SEED_ID].startswith("The ability to scale out training workloads")
    assert abstracts[SEED_ID].endswith("similar computational envelopes.")


def test_abstracts_are_deinverted(abstracts: dict, openalex: dict) -> None:
    """Abstracts are the words ordered by position, joined by single spaces (long ones cut)."""
    script = _load_script()
    for wid, work in openalex.items():
        index = work["abstract_inverted_index"]
        if index is None:
            continue
        pairs = sorted((p, w) for w, ps in index.items() for p in ps)
        full = " ".join(w for _, w in pairs)
        text = abstracts[wid]
        if len(full) <= script.ABSTRACT_CAP:
            assert text == full
        else:
            assert text.endswith(" […]") and full.startswith(text[: -len(" […]")])
    assert script.deinvert({"b": [1], "a": [0, 2], "": [3]}) == "a b a "
    assert script.deinvert(None) is None


def _same(a: Any, b: Any) -> bool:
    """Equal JSON values, floats to 1e-12 relative (numpy's math may differ in the last bit
    between versions and CPUs)."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-300)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def test_script_reproduces_bundled_files(tmp_path: Path) -> None:
    """Running the script again gives the bundled files: the same records in the same order
    (scores equal to 12 significant digits) and the same abstracts byte for byte."""
    script = _load_script()
    frame_path, abstracts_path = script.build(OPENALEX, tmp_path)
    new = gzip.decompress(frame_path.read_bytes()).decode("utf-8").split("\n")
    old = gzip.decompress(FRAME.read_bytes()).decode("utf-8").split("\n")
    assert len(new) == len(old)
    for got, want in zip(new, old, strict=True):
        assert _same(json.loads(got) if got else None, json.loads(want) if want else None), got
    assert abstracts_path.read_bytes() == ABSTRACTS.read_bytes()
    assert not _same(1.0, 1.0 + 1e-9)  # the comparison is not vacuous


# The score queues open on five works with an abstract; the sample's order is its random draw.
@pytest.mark.parametrize(
    ("campaign", "n"), [("demo-top", 5), ("demo-blind", 5), ("demo-sample", 2)]
)
def test_demo_queues_open_on_works_with_an_abstract(tmp_path: Path, campaign: str, n: int) -> None:
    """The first works an annotator meets in each demo campaign have an abstract to read."""
    from sqlalchemy import select

    from db.engine import read_session
    from db.models import AbstractCache, Campaign, CampaignItem
    from labeling.database import init_db
    from labeling.frames.demo import build_demo
    from labeling.schema import load_schema
    from labeling.settings import DEFAULT_SCHEMA

    engine = init_db(f"sqlite:///{tmp_path / 'demo.db'}")
    build_demo(engine, load_schema(DEFAULT_SCHEMA))
    with read_session(engine) as session:
        states = (
            session.execute(
                select(AbstractCache.state)
                .join(CampaignItem, CampaignItem.work_id == AbstractCache.work_id)
                .join(Campaign, Campaign.id == CampaignItem.campaign_id)
                .where(Campaign.name == campaign)
                .order_by(CampaignItem.position)
                .limit(n)
            )
            .scalars()
            .all()
        )
    engine.dispose()
    assert states == ["ok"] * n


def test_reset_deletes_the_database_and_its_journal_files(tmp_path: Path) -> None:
    """`labeling demo --reset`: the file, its WAL files and a rollback journal (a bulk
    import killed in rollback mode leaves one, db/wal.py) all go; other files stay."""
    from labeling.frames.demo import reset_sqlite

    db = tmp_path / "demo.db"
    names = ["demo.db", "demo.db-wal", "demo.db-shm", "demo.db-journal", "demo.db-writelock",
             "other.db"]  # fmt: skip
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    reset_sqlite(f"sqlite:///{db}", force=True)  # b"x" is no database: only --force deletes it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.db-writelock", "other.db"]
    with pytest.raises(ValueError, match="only deletes SQLite files"):
        reset_sqlite("postgresql+psycopg://postgres@127.0.0.1:5432/labeling")
