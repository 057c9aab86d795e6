"""Frame revisions end to end: content compared as parsed JSON, every replaced revision kept,
labels naming theirs, and machines, anchoring and the export reading the one labelled."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from sqlalchemy import Engine, select

from db.engine import read_session
from db.models import Label, Prediction, Work
from labeling.cli.main import main
from labeling.frames.demo import DEMO_FRAME
from labeling.review import flow
from labeling.review.campaigns import create_campaign
from labeling.schema import Schema
from labeling.settings import get_settings
from tests.conftest import make_record, write_jsonl
from tests.factories import add_user

BIB = "Bibliometrics"
AT = 3  # Bibliometrics' place in the category vectors


def _cli(url: str, *args: str) -> Any:
    """Run the CLI on a database; the result."""
    return CliRunner().invoke(main, ["--db", url, *args])


def _json(url: str, *args: str) -> dict[str, Any]:
    """Run a CLI command with --json; its output parsed."""
    result = _cli(url, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _number(x: float) -> str:
    """A float spelled another way that parses to the same float: 0.5 as 5e-1."""
    mantissa, exponent = f"{x:.17e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


def _respelled(value: Any) -> str:
    """JSON text of a value with keys reversed, other spacing, numbers and escapes."""
    if isinstance(value, dict):
        items = [f"{json.dumps(k)} :  {_respelled(v)}" for k, v in reversed(value.items())]
        return "{ " + " ,\t".join(items) + " }"
    if isinstance(value, list):
        return "[ " + " , ".join(_respelled(v) for v in value) + " ]"
    if isinstance(value, float):
        return _number(value)
    return json.dumps(value, ensure_ascii=True)


def test_a_reserialised_demo_frame_is_unchanged(db_url: str, tmp_path: Path) -> None:
    """Other whitespace, key order, number spelling and escapes: the same content, and no
    work is updated (before, all 153 were and the predictions table kept nothing of it)."""
    with gzip.open(DEMO_FRAME, "rt", encoding="utf-8") as fh:
        lines = [line for line in fh.read().splitlines() if line.strip()]
    respelled = [_respelled(json.loads(line)) for line in lines]
    assert respelled[0] != lines[0] and "e-" in respelled[0]
    path = write_jsonl(tmp_path / "respelled.jsonl", respelled)
    first = _json(db_url, "import-frame", str(DEMO_FRAME))
    assert first["inserted"] == len(lines) == 153
    engine_hashes = _hashes(db_url)
    again = _json(db_url, "import-frame", str(path))
    assert (again["inserted"], again["updated"], again["unchanged"]) == (0, 0, 153)
    assert again["content_changed_same_version"] == 0
    assert _hashes(db_url) == engine_hashes  # the stored rows, and so their revisions, stay
    assert _predictions(db_url) == []
    # A real change among re-spelled lines is still one.
    changed = json.loads(lines[5])
    changed["title"] = "A title changed"
    path = write_jsonl(tmp_path / "one.jsonl", [*respelled[:5], json.dumps(changed)])
    third = _json(db_url, "import-frame", str(path))
    assert (third["updated"], third["unchanged"], third["content_changed_same_version"]) == (
        1, 5, 1,
    )  # fmt: skip
    assert [p[0] for p in _predictions(db_url)] == [changed["id"]]


def _engine(url: str) -> Engine:
    from db.engine import make_engine

    return make_engine(url)


def _hashes(url: str) -> dict[str, str]:
    engine = _engine(url)
    try:
        with read_session(engine) as session:
            return dict(session.execute(select(Work.id, Work.record_hash)).all())
    finally:
        engine.dispose()


def _predictions(url: str) -> list[tuple[Any, ...]]:
    """(work, model version, revision, record) of every kept revision, in order kept."""
    engine = _engine(url)
    try:
        with read_session(engine) as session:
            rows = session.execute(select(Prediction.work_id, Prediction.model_version,
                                          Prediction.revision, Prediction.record)
                                   .order_by(Prediction.id)).all()  # fmt: skip
        return [tuple(r) for r in rows]
    finally:
        engine.dispose()


def _frame(seed: dict[str, Any], bib: float, opus: float, title: str) -> list[dict[str, Any]]:
    """Three works whose codex scores Bibliometrics high; W1 with `bib`, `opus`, `title`."""
    out = []
    for i in (1, 2, 3):
        rec = make_record(seed, f"W{i}")
        scores = [0.01] * 9
        scores[AT] = bib if i == 1 else 0.9
        rec["prediction"]["category_scores_codex"] = scores
        if i == 1:
            rec["title"] = title
            ms = rec["machine_scores"]
            ms["score_opus"], ms["score_spread"] = opus, abs(opus - ms["score_gpt"])
        out.append(rec)
    return out


def _label_everything(engine: Engine, schema: Schema) -> int:
    """An annotator says Bibliometrics on every work of a campaign with arms (validated by
    the one label); the campaign's id."""
    camp = create_campaign(engine, name="arms", strategy="score_max", overlap=1,
                           assist_rate=0.5, seed=1, questions=["categories"])  # fmt: skip
    uid = add_user(engine, "ann")
    while True:
        item = flow.next_item(engine, camp.id, uid, schema, settings=get_settings())
        if item.work_id is None:
            return camp.id
        draft = flow.Draft.fresh(item.questions)
        draft.answers["categories"] = [BIB]
        assert flow.save(engine, item, draft, user_id=uid, schema=schema).saved


def _codex_bib(report: dict[str, Any]) -> dict[str, Any]:
    """The machines report's numbers for codex on Bibliometrics."""
    question = report["questions"]["categories"]
    return question["systems"]["codex"]["labels"][BIB]


def test_labels_are_compared_with_the_revision_they_were_made_on(
    engine: Engine, schema: Schema, seed_record: dict[str, Any], tmp_path: Path
) -> None:
    """W1 labelled on its first content, then changed twice under the same model_version:
    both replaced revisions are kept, the import says so, and machines, anchoring and the
    export compare the label with the content it was made on (the export also gives the
    current one in *_current)."""
    url = engine.url.render_as_string(hide_password=False)
    version = seed_record["prediction"]["model_version"]
    v1 = write_jsonl(tmp_path / "v1.jsonl", _frame(seed_record, 0.9, 0.8, "First title"))
    v2 = write_jsonl(tmp_path / "v2.jsonl", _frame(seed_record, 0.2, 0.3, "Second title"))
    v3 = write_jsonl(tmp_path / "v3.jsonl", _frame(seed_record, 0.1, 0.2, "Third title"))
    assert _json(url, "import-frame", str(v1))["inserted"] == 3
    first = _hashes(url)
    cid = _label_everything(engine, schema)
    with read_session(engine) as session:
        labels = dict(session.execute(select(Label.work_id, Label.revision)).all())
    assert labels == first  # each label names the revision it was made on
    changed = _json(url, "import-frame", str(v2))
    assert (changed["updated"], changed["unchanged"], changed["content_changed_same_version"]) \
        == (1, 2, 1)  # fmt: skip
    text = _cli(url, "import-frame", str(v3)).output.splitlines()[-1]
    assert text.startswith("done: 3 lines, 0 inserted, 1 updated, 2 unchanged, 0 rejected, ")
    assert text.endswith(" warnings; 1 work changed content under an unchanged model_version "
                         "(the earlier revision kept in predictions)")  # fmt: skip
    again = _json(url, "import-frame", str(v3))
    assert (again["updated"], again["unchanged"], again["content_changed_same_version"]) \
        == (0, 3, 0)  # fmt: skip
    kept = _predictions(url)
    assert [(w, v, r) for w, v, r, _ in kept] == [("W1", version, first["W1"]),
                                                  ("W1", version, _second(v2))]  # fmt: skip
    assert [rec["title"] for *_, rec in kept] == ["First title", "Second title"]

    # machines: codex called Bibliometrics on all three works the labels were made on.
    codex = _codex_bib(_json(url, "machines"))
    assert (codex["tp"], codex["fn"], codex["fp"]) == (3, 0, 0), codex
    assert _codex_bib(_json(url, "machines", "--campaign", "arms"))["tp"] == 3

    # anchoring: every label agrees with codex's call on the content it was made on.
    anchoring = _json(url, "anchoring", "--campaign", str(cid))
    arms = anchoring["questions"]["categories"]["teachers"]["codex"]
    assert arms["agree_shown"] + arms["agree_hidden"] == 3

    # export: the labelled revision's calls and scores, the stored record's in *_current.
    out = tmp_path / "gold.csv"
    result = _cli(url, "export", "--format", "csv", "--out", str(out))
    assert result.exit_code == 0, result.output
    with out.open(encoding="utf-8", newline="") as fh:
        rows = {r["work_id"]: r for r in csv.DictReader(fh)}
    w1, w2 = rows["W1"], rows["W2"]
    assert w1["title"] == "Third title"
    assert BIB in w1["machine_categories_codex"]
    assert BIB not in w1["machine_categories_codex_current"]
    assert float(w1["score_opus"]) == 0.8 and float(w1["score_opus_current"]) == 0.2
    assert BIB in w2["machine_categories_codex"] and BIB in w2["machine_categories_codex_current"]
    assert w2["score_opus"] == w2["score_opus_current"]
    copy = tmp_path / "again.csv"
    assert _cli(url, "export", "--format", "csv", "--out", str(copy)).exit_code == 0
    assert copy.read_bytes() == out.read_bytes()  # the same state, the same bytes


def _second(path: Path) -> str:
    """The sha256 of W1's line in a frame file (its revision once stored)."""
    import hashlib

    line = path.read_bytes().splitlines()[0].strip()
    return hashlib.sha256(line).hexdigest()
