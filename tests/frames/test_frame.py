"""Frame import: the seed record, idempotence, newer frames, bad lines, strict mode, gzip."""

from __future__ import annotations

import gzip
import json

import pytest
from sqlalchemy import func, select

from db.engine import read_session, write_session
from db.models import Campaign, Label, Prediction, StatusEvent, User, Work
from labeling.frames.checks import check_record
from labeling.frames.importer import FrameReadError, import_frame
from labeling.frames.store import prediction_history
from labeling.vocabulary import STATUS_VALIDATED
from tests.conftest import make_record, write_jsonl


def _count(engine, model) -> int:
    with read_session(engine) as s:
        return s.scalar(select(func.count()).select_from(model))


def test_seed_record_is_stored_verbatim_with_its_columns(engine, schema, seed_record, tmp_path):
    path = write_jsonl(tmp_path / "seed.jsonl", [seed_record])
    summary = import_frame(engine, path, schema)
    assert (summary.inserted, summary.rejected, summary.exit_code) == (1, 0, 0)
    with read_session(engine) as s:
        work = s.get(Work, "W4413411773")
        assert work.record == seed_record  # every field preserved
        assert work.title.startswith("Cephalo")
        assert work.year == 2025 and work.venue == "" and work.cited_by == 1
        assert work.routes["ca_fund"] is True
        assert work.model_version == "metacan-v3-hybrid-931329e0061c"
        assert work.score_opus == pytest.approx(0.05453842143186296)
        assert work.score_max == pytest.approx(0.2824619046238849)
        assert work.score_spread == pytest.approx(0.2279234831920219)
        assert work.teacher_disagreement == pytest.approx(0.01479584)
        assert work.status == "machine_predicted_unvalidated"


def test_seed_genre_inconsistency_is_reported_not_hidden(engine, schema, seed_record, tmp_path):
    path = write_jsonl(tmp_path / "seed.jsonl", [seed_record])
    report = tmp_path / "report.jsonl"
    summary = import_frame(engine, path, schema, report_path=report)
    assert summary.warnings == 1 and summary.inserted == 1
    [problem] = summary.problems
    assert problem.kind == "warning" and problem.line == 1 and problem.work_id == "W4413411773"
    assert "genre" in problem.reason and "gemma" in problem.reason and "arg-max" in problem.reason
    lines = [json.loads(x) for x in report.read_text().splitlines()]
    assert lines == [{"line": 1, "work_id": "W4413411773", "kind": "warning",
                      "reason": problem.reason}]  # fmt: skip


def test_reimport_is_idempotent(engine, schema, seed_record, tmp_path):
    records = [make_record(seed_record, f"W{i}") for i in range(1, 6)]
    path = write_jsonl(tmp_path / "f.jsonl", records)
    first = import_frame(engine, path, schema)
    with read_session(engine) as s:
        before = [(w.id, w.record_hash, w.updated_at) for w in s.scalars(select(Work))]
    again = import_frame(engine, path, schema)
    assert (first.inserted, again.inserted, again.updated, again.unchanged) == (5, 0, 0, 5)
    with read_session(engine) as s:
        after = [(w.id, w.record_hash, w.updated_at) for w in s.scalars(select(Work))]
    assert before == after
    assert _count(engine, Prediction) == 0


def test_newer_frame_updates_machine_side_and_keeps_human_side(
    engine, schema, seed_record, tmp_path
):
    old = make_record(seed_record, "W1")
    path = write_jsonl(tmp_path / "old.jsonl", [old])
    import_frame(engine, path, schema)
    with write_session(engine) as s:
        user = User(name="ann", role="annotator")
        camp = Campaign(name="c")
        s.add_all([user, camp])
        s.flush()
        s.add(Label(campaign_id=camp.id, work_id="W1", user_id=user.id, answers={"genre": "x"}))
        s.add(StatusEvent(work_id="W1", to_status=STATUS_VALIDATED, from_status=None))
        w = s.get(Work, "W1")
        w.status, w.final_answers, w.validated_via = STATUS_VALIDATED, {"genre": "x"}, "rule"
    new = make_record(seed_record, "W1", title="Cephalo, revised")
    new["prediction"]["model_version"] = "metacan-v4"
    new["machine_scores"]["score_opus"] = 0.9
    new["machine_scores"]["score_spread"] = 0.9 - new["machine_scores"]["score_gpt"]
    summary = import_frame(engine, write_jsonl(tmp_path / "new.jsonl", [new]), schema)
    assert (summary.updated, summary.inserted) == (1, 0)
    with read_session(engine) as s:
        w = s.get(Work, "W1")
        assert w.title == "Cephalo, revised" and w.model_version == "metacan-v4"
        assert w.score_opus == pytest.approx(0.9) and w.score_max == pytest.approx(0.9)
        assert (w.status, w.final_answers, w.validated_via) == (
            STATUS_VALIDATED, {"genre": "x"}, "rule",
        )  # fmt: skip
        assert s.scalar(select(func.count()).select_from(Label)) == 1
        history = prediction_history(s.connection(), "W1")
    assert set(history) == {"metacan-v3-hybrid-931329e0061c", "metacan-v4"}
    assert history["metacan-v3-hybrid-931329e0061c"]["machine_scores"] == old["machine_scores"]
    # Importing the old frame again later records nothing twice.
    import_frame(engine, path, schema)
    import_frame(engine, path, schema)
    assert _count(engine, Prediction) == 2


def test_a_newer_frame_updates_many_works_at_once(engine, schema, seed_record, tmp_path):
    """New model version, same version retitled, unchanged and new works in one batch; then
    back and forth: each replaced content kept once, none twice."""
    seed_version = seed_record["prediction"]["model_version"]
    old = [make_record(seed_record, f"W{i}") for i in range(1, 9)]
    old_path = write_jsonl(tmp_path / "old.jsonl", old)
    import_frame(engine, old_path, schema)
    new = [json.loads(json.dumps(rec)) for rec in old]
    for i, rec in enumerate(new[:5], start=1):
        rec["title"] = f"T{i} again"
        if i <= 3:
            rec["prediction"]["model_version"] = "metacan-v4"
    new_path = write_jsonl(tmp_path / "new.jsonl", [*new, make_record(seed_record, "W9")])
    summary = import_frame(engine, new_path, schema)
    assert (summary.inserted, summary.updated, summary.unchanged) == (1, 5, 3)
    assert summary.content_changed_same_version == 2  # W4, W5: retitled under the same version
    with read_session(engine) as s:
        works = {w.id: (w.title, w.model_version) for w in s.scalars(select(Work))}
        kept = sorted(tuple(r) for r in s.execute(select(Prediction.work_id,
                                                         Prediction.model_version)))  # fmt: skip
        history = prediction_history(s.connection(), "W2")
    assert works["W1"] == ("T1 again", "metacan-v4")
    assert works["W4"] == ("T4 again", seed_version)
    assert works["W6"] == (old[5]["title"], seed_version)
    assert kept == [(f"W{i}", seed_version) for i in (1, 2, 3, 4, 5)]
    assert history[seed_version]["prediction"] == old[1]["prediction"]
    assert history["metacan-v4"]["prediction"] == new[1]["prediction"]
    # Back to the old frame, then the new one again: the new contents are kept once too.
    assert import_frame(engine, old_path, schema).updated == 5
    assert import_frame(engine, new_path, schema).updated == 5
    with read_session(engine) as s:
        again = sorted(tuple(r) for r in s.execute(select(Prediction.work_id,
                                                          Prediction.model_version)))  # fmt: skip
    assert again == sorted(
        [
            *kept,
            *((f"W{i}", "metacan-v4") for i in (1, 2, 3)),
            *((f"W{i}", seed_version) for i in (4, 5)),
        ]
    )


def _bad_lines(seed: dict) -> list[tuple[str, str]]:
    wrong_len = make_record(seed, "W3")
    wrong_len["prediction"]["category_scores_codex"] = [0.1] * 8
    out_of_range = make_record(seed, "W4")
    out_of_range["machine_scores"]["score_opus"] = 1.5
    wrong_type = make_record(seed, "W5", year="2025")
    bool_score = make_record(seed, "W6")
    bool_score["prediction"]["about_ca_topic_score_gemma"] = True
    return [
        ('{"id": "W1", "title": ', "invalid JSON"),
        (json.dumps({"title": "no id"}), "missing id"),
        (json.dumps(wrong_len), "expected 9 scores (schema), got 8"),
        (json.dumps(out_of_range), "machine_scores.score_opus: score 1.5 outside [0, 1]"),
        (json.dumps(wrong_type), "year: expected an integer, got str"),
        (json.dumps(bool_score), "expected a number in [0, 1], got bool"),
        (json.dumps({"id": "X12"}), "is not an OpenAlex work id"),
        ("[1, 2]", "expected a JSON object"),
        (
            '{"id": "W7", "prediction": {"teacher_disagreement_score": NaN}}',
            "prediction.teacher_disagreement_score: score NaN: a number in [0, 1] expected",
        ),
        (json.dumps({"id": "W2"}), "duplicate id W2 within the file"),
    ]


def test_each_kind_of_bad_line_is_reported_with_line_and_reason(
    engine, schema, seed_record, tmp_path
):
    bad = _bad_lines(seed_record)
    lines = [json.dumps({"id": "W2"})] + [text for text, _ in bad] + ["", "   "]
    path = write_jsonl(tmp_path / "bad.jsonl", lines)
    summary = import_frame(engine, path, schema)
    assert summary.inserted == 1 and summary.rejected == len(bad) and summary.exit_code == 3
    rejected = [p for p in summary.problems if p.kind == "rejected"]
    assert [p.line for p in rejected] == list(range(2, 2 + len(bad)))
    for problem, (_, reason) in zip(rejected, bad, strict=True):
        assert reason in problem.reason
    assert rejected[2].work_id == "W3" and rejected[0].work_id is None
    assert _count(engine, Work) == 1


def test_strict_aborts_and_writes_nothing_but_reports_every_bad_line(
    engine, schema, seed_record, tmp_path
):
    good = [json.dumps(make_record(seed_record, f"W{i}")) for i in range(10, 20)]
    lines = good[:3] + ["{broken"] + good[3:] + ['{"id": 5}']
    summary = import_frame(engine, write_jsonl(tmp_path / "f.jsonl", lines), schema,
                           strict=True, batch_size=2)  # fmt: skip
    assert summary.aborted and summary.exit_code == 3
    assert [p.line for p in summary.problems if p.kind == "rejected"] == [4, 12]
    assert summary.inserted == 0
    assert _count(engine, Work) == 0


def test_strict_with_a_clean_file_imports_everything(engine, schema, seed_record, tmp_path):
    lines = [make_record(seed_record, f"W{i}") for i in range(10, 15)]
    summary = import_frame(engine, write_jsonl(tmp_path / "f.jsonl", lines), schema, strict=True)
    assert (summary.inserted, summary.aborted, summary.exit_code) == (5, False, 0)


def test_gzip_input_and_batches(engine, schema, seed_record, tmp_path):
    path = tmp_path / "frame.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for i in range(1, 26):
            fh.write(json.dumps(make_record(seed_record, f"W{i}")) + "\n")
    summary = import_frame(engine, path, schema, batch_size=7)
    assert summary.inserted == 25 and summary.lines == 25
    assert _count(engine, Work) == 25


def test_parallel_parsing_gives_the_same_result(sqlite_engine, schema, seed_record, tmp_path):
    lines = [json.dumps(make_record(seed_record, f"W{i}")) for i in range(1, 1200)]
    lines[700] = "{nope"
    path = write_jsonl(tmp_path / "f.jsonl", lines)
    summary = import_frame(sqlite_engine, path, schema, workers=2, batch_size=100)
    assert (summary.inserted, summary.rejected) == (1198, 1)
    assert [p.line for p in summary.problems if p.kind == "rejected"] == [701]


def test_only_id_is_required(engine, schema, tmp_path):
    path = write_jsonl(tmp_path / "f.jsonl", [{"id": "https://openalex.org/W9"}])
    summary = import_frame(engine, path, schema)
    assert summary.inserted == 1 and summary.warnings == 0
    with read_session(engine) as s:
        w = s.get(Work, "W9")
        assert w.record == {"id": "https://openalex.org/W9"} and w.score_max is None


def test_unreadable_files_raise_a_clear_error(engine, schema, tmp_path):
    with pytest.raises(FrameReadError, match="cannot open frame"):
        import_frame(engine, tmp_path / "missing.jsonl", schema)
    broken = tmp_path / "broken.jsonl.gz"
    data = gzip.compress(b"".join(b'{"id": "W%d"}\n' % i for i in range(1, 5000)))
    broken.write_bytes(data[: len(data) // 2])
    with pytest.raises(FrameReadError, match="cannot read frame"):
        import_frame(engine, broken, schema)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"prediction__candidate_categories": ["Bibliometrics"]}, "candidate"),
        ({"prediction__about_ca_topic_consensus": True}, "about_ca_topic: consensus"),
        ({"prediction__study_design_consensus": "design_other"}, "consensus"),
        ({"prediction__genre_codex": "no_such_genre"}, "not a label of the schema"),
        ({"prediction__prediction_status": "human_validated"}, "prediction_status"),
        ({"machine_scores__score_spread": 0.5}, "score_spread"),
    ],
)
def test_consistency_warnings(schema, seed_record, change, expected):
    rec = make_record(seed_record, "W1", **change)
    checked = check_record(rec, schema)
    assert not checked.errors
    assert any(expected in w for w in checked.warnings), checked.warnings


def test_consistent_record_has_no_warnings(schema, seed_record):
    rec = make_record(
        seed_record, "W1", prediction__genre_gemma="methods", prediction__genre_candidate="methods"
    )
    assert check_record(rec, schema).warnings == []


def test_migrations_reach_head_on_both_engines(engine):
    from alembic.script import ScriptDirectory

    from db.engine import alembic_config, current_revision

    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    assert head == "0020_frame_revisions"
    assert current_revision(engine) == head
    with read_session(engine) as s:
        assert s.scalar(select(func.count()).select_from(Work)) == 0


def test_a_load_that_found_the_table_empty_still_updates_rows_stored_since(
    engine, schema, seed_record, tmp_path, monkeypatch
):
    """Rows another writer stored after the import found the table empty: updated or
    counted unchanged, as a lookup finds them, not refused by the inserts without one."""
    from labeling.frames import importer

    records = [make_record(seed_record, f"W{i}") for i in range(1, 30)]
    changed = [dict(r) for r in records]
    changed[0]["title"] = "changed"
    import_frame(engine, write_jsonl(tmp_path / "other.jsonl", changed[:10]), schema)
    monkeypatch.setattr(importer, "_any_stored", lambda engine: False)  # empty at the start
    summary = import_frame(engine, write_jsonl(tmp_path / "f.jsonl", records), schema, batch_size=7)
    assert (summary.inserted, summary.updated, summary.unchanged) == (19, 1, 9)
    with read_session(engine) as s:
        assert s.get(Work, "W1").title == records[0]["title"]
        assert len(s.scalars(select(Work.id)).all()) == 29
