"""Frame import edge cases (issue 12): column limits, failures part-way, odd files, odd ids."""

from __future__ import annotations

import codecs
import gzip
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import Engine, func, select, text

from db.engine import make_engine, read_session
from db.models import ImportRun, Work
from labeling.abstracts.openalex import normalize_work_id as openalex_id
from labeling.cli.main import main
from labeling.frames.checks import normalize_work_id
from labeling.frames.importer import import_frame
from labeling.frames.lines import parse_chunk
from labeling.review.label_import import import_labels
from labeling.schema import Schema
from tests.conftest import make_record, write_jsonl
from tests.factories import add_works

PROGRESS = re.compile(r"before the failure (\d+) lines read, (\d+) stored \((\d+) inserted")


def cli(url: str, *args: str) -> Result:
    """Run the CLI; whatever happens, no exception and no traceback reach the user."""
    result = CliRunner().invoke(main, ["--db", url, *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result


def errors(result: Result) -> list[str]:
    """The `error:` lines a command printed."""
    return [line for line in result.output.splitlines() if line.startswith("error:")]


def n_works(engine: Engine) -> int:
    """Works in the database."""
    with read_session(engine) as s:
        return s.scalar(select(func.count()).select_from(Work))


def last_run(engine: Engine) -> SimpleNamespace:
    """The newest import run's row."""
    table = ImportRun.__table__
    with read_session(engine) as s:
        row = s.execute(select(table).order_by(table.c.id.desc()).limit(1)).mappings().one()
    return SimpleNamespace(**row)


def frame(seed: dict[str, Any], n: int, **bad: Any) -> list[dict[str, Any]]:
    """N consistent seed-shaped records W1..Wn; `bad` maps `l<line>` to that record's changes."""
    same = {"prediction__genre_gemma": "methods", "prediction__genre_candidate": "methods"}
    return [make_record(seed, f"W{i}", **same, **bad.get(f"l{i}", {})) for i in range(1, n + 1)]


# ------------------------------------------------------------ column limits (item 2)

LIMITS = [
    ({"id": "W" + "1" * 40}, "id: 41 characters, at most 32"),
    ({"lang": "x" * 17}, "lang: 17 characters, at most 16"),
    ({"type": "t" * 65}, "type: 65 characters, at most 64"),
    ({"field": "f" * 129}, "field: 129 characters, at most 128"),
    ({"doi": "d" * 300}, "doi: 300 characters, at most 255"),
    ({"prediction__model_version": "m" * 129},
     "prediction.model_version: 129 characters, at most 128"),
    ({"prediction__prediction_status": "s" * 65},
     "prediction.prediction_status: 65 characters, at most 64"),
    ({"title": "a\x00b"}, "title: contains a NUL character"),
    ({"cited_by": 2**31}, "cited_by: 2147483648 is outside the storable range"),
    ({"year": -(2**31) - 1}, "year: -2147483649 is outside the storable range"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "message"), LIMITS, ids=[m.split(":")[0] for _, m in LIMITS])
def test_a_value_its_column_cannot_hold_is_a_rejected_line_on_both_engines(
    engine: Engine, schema: Schema, seed_record: dict, tmp_path: Path, change: dict, message: str
) -> None:
    records = frame(seed_record, 30, l25=change)
    summary = import_frame(engine, write_jsonl(tmp_path / "f.jsonl", records), schema,
                           batch_size=10, progress=False)  # fmt: skip
    assert (summary.inserted, summary.rejected, summary.exit_code) == (29, 1, 3)
    [problem] = [p for p in summary.problems if p.kind == "rejected"]
    assert problem.line == 25 and message in problem.reason, problem.reason
    assert n_works(engine) == 29


def test_values_at_the_limit_are_stored(engine: Engine, schema: Schema, seed_record: dict,
                                        tmp_path: Path) -> None:  # fmt: skip
    rec = make_record(seed_record, "W" + "7" * 31, doi="d" * 255, lang="l" * 16,
                      cited_by=2**31 - 1, prediction__model_version="m" * 128)  # fmt: skip
    summary = import_frame(engine, write_jsonl(tmp_path / "f.jsonl", [rec]), schema)
    assert (summary.inserted, summary.rejected) == (1, 0)
    with read_session(engine) as s:
        work = s.get(Work, "W" + "7" * 31)
        assert (len(work.doi), work.cited_by, len(work.model_version)) == (255, 2**31 - 1, 128)


def test_long_id_late_in_the_file_via_the_cli(db_url: str, seed_record: dict,
                                              tmp_path: Path) -> None:  # fmt: skip
    """The issue's case: exit 3 with the line named, everything else stored, run done."""
    path = write_jsonl(tmp_path / "f.jsonl", frame(seed_record, 30, l25={"id": "W" + "9" * 40}))
    result = cli(db_url, "import-frame", str(path), "--batch-size", "10")
    assert result.exit_code == 3, result.output
    assert f"rejected: line 25 (W{'9' * 40}): id: 41 characters, at most 32" in result.output
    assert "done: 30 lines, 29 inserted, 0 updated, 0 unchanged, 1 rejected" in result.output
    engine = make_engine(db_url)
    assert n_works(engine) == 29
    run = last_run(engine)
    assert (run.status, run.error, run.summary["inserted"]) == ("done", None, 29)
    again = cli(db_url, "import-frame", str(path), "--batch-size", "10")
    assert again.exit_code == 3 and "0 inserted, 0 updated, 29 unchanged" in again.output
    engine.dispose()


# ------------------------------------------------------------ failures part-way (items 2, 3)


def _refuse_inserts(engine: Engine, table: str, when: str) -> None:
    """A trigger that makes the database itself refuse some inserts (a real database error)."""
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            conn.execute(
                text(
                    f"CREATE TRIGGER refuse BEFORE INSERT ON {table} WHEN {when} "
                    "BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END"
                )
            )
        else:
            conn.execute(
                text(
                    "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
                    "$$ BEGIN RAISE EXCEPTION 'refused by the test trigger'; END $$"
                )
            )
            conn.execute(text(f"CREATE TRIGGER refuse BEFORE INSERT ON {table} FOR EACH ROW "
                              f"WHEN ({when}) EXECUTE FUNCTION refuse()"))  # fmt: skip


def _allow_inserts(engine: Engine, table: str) -> None:
    with engine.begin() as conn:
        on = "" if engine.dialect.name == "sqlite" else f" ON {table}"
        conn.execute(text(f"DROP TRIGGER refuse{on}"))


def _import_refusing_w25(db_url: str, seed_record: dict, tmp_path: Path,
                         n: int) -> tuple[Engine, Path, str]:  # fmt: skip
    """Import W1..Wn in batches of 10 while the database refuses W25: exit 2, one error line."""
    engine = make_engine(db_url)
    cli(db_url, "init")
    _refuse_inserts(engine, "works", "NEW.id = 'W25'")
    path = write_jsonl(tmp_path / "f.jsonl", frame(seed_record, n))
    result = cli(db_url, "import-frame", str(path), "--batch-size", "10")
    assert result.exit_code == 2
    [line] = errors(result)
    return engine, path, line


def test_database_error_is_one_line_recorded_and_resumable(
    db_url: str, seed_record: dict, tmp_path: Path
) -> None:
    engine, path, line = _import_refusing_w25(db_url, seed_record, tmp_path, 30)
    assert "database error" in line and "refused by the test trigger" in line
    assert "before the failure 30 lines read, 20 stored (20 inserted, 0 updated, 0 unchanged), " \
           "0 rejected; the stored works stay; re-running the repaired file continues " \
           "idempotently" in line  # fmt: skip
    assert n_works(engine) == 20  # the two committed batches, exactly what the message says
    run = last_run(engine)
    assert run.status == "failed" and run.finished_at is not None
    assert run.error == line.removeprefix("error: ")
    assert (run.summary["lines"], run.summary["inserted"], run.summary["failed"]) == (30, 20, True)
    _allow_inserts(engine, "works")
    again = cli(db_url, "import-frame", str(path), "--batch-size", "10")
    assert again.exit_code == 0
    assert "done: 30 lines, 10 inserted, 0 updated, 20 unchanged" in again.output
    assert n_works(engine) == 30 and last_run(engine).status == "done"
    engine.dispose()


def test_no_batch_after_a_refused_one_is_written(db_url: str, seed_record: dict,
                                                tmp_path: Path) -> None:  # fmt: skip
    # Batches are written in a thread while the next one fills (BatchWriter): the batch
    # of W21-W30 fails while W31-W40 are taken, and nothing from W31 on may be stored.
    engine, _, line = _import_refusing_w25(db_url, seed_record, tmp_path, 80)
    assert "refused by the test trigger" in line
    read, stored, inserted = map(int, PROGRESS.search(line).groups())
    assert (stored, inserted) == (20, 20) and 30 <= read <= 40
    with read_session(engine) as s:
        assert set(s.scalars(select(Work.id))) == {f"W{i}" for i in range(1, 21)}
    assert last_run(engine).summary["inserted"] == 20
    engine.dispose()


def test_a_refused_batch_rolls_back_the_batches_of_its_transaction_uncounted(
    db_url: str, seed_record: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Lines reach the writer 3 at a time and a transaction takes 9 of them: W19-W24 are
    # written in the transaction that W25's batch fails, so they are rolled back with it
    # and not counted; the transactions of W1-W18 stay, and the message says so.
    from labeling.frames import importer

    monkeypatch.setattr(importer, "HANDOFF_LINES", 3)
    engine = make_engine(db_url)
    cli(db_url, "init")
    _refuse_inserts(engine, "works", "NEW.id = 'W25'")
    path = write_jsonl(tmp_path / "f.jsonl", frame(seed_record, 40))
    result = cli(db_url, "import-frame", str(path), "--batch-size", "9")
    assert result.exit_code == 2
    [line] = errors(result)
    read, stored, inserted = map(int, PROGRESS.search(line).groups())
    assert (stored, inserted) == (18, 18) and 27 <= read <= 30
    with read_session(engine) as s:
        assert set(s.scalars(select(Work.id))) == {f"W{i}" for i in range(1, 19)}
    assert last_run(engine).summary["inserted"] == 18
    _allow_inserts(engine, "works")
    again = cli(db_url, "import-frame", str(path), "--batch-size", "9", "--json")
    assert again.exit_code == 0
    counts = json.loads(again.stdout)
    assert (counts["inserted"], counts["unchanged"]) == (22, 18)
    engine.dispose()


def _truncated_gzip(tmp_path: Path, records: list[dict]) -> tuple[Path, Path]:
    whole = tmp_path / "frame.jsonl.gz"
    whole.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in records).encode()))
    cut = tmp_path / "cut.jsonl.gz"
    data = whole.read_bytes()
    cut.write_bytes(data[: len(data) * 6 // 10])
    return whole, cut


def test_truncated_gzip_keeps_what_it_stored_and_says_so(
    db_url: str, seed_record: dict, tmp_path: Path
) -> None:
    records = [make_record(seed_record, f"W{i}", title=f"t{i} " + "x" * (i % 97) * 40)
               for i in range(1, 1501)]  # fmt: skip
    whole, cut = _truncated_gzip(tmp_path, records)
    result = cli(db_url, "import-frame", str(cut), "--batch-size", "100")
    assert result.exit_code == 2
    [line] = errors(result)
    assert f"{cut}: cannot read frame after line" in line
    read, stored, inserted = map(int, PROGRESS.search(line).groups())
    assert 0 < stored == inserted == read < 1500  # every line read before the failure
    engine = make_engine(db_url)
    assert n_works(engine) == stored
    run = last_run(engine)
    assert (run.status, run.summary["inserted"], run.summary["lines"]) == ("failed", stored, read)
    again = cli(db_url, "import-frame", str(whole), "--batch-size", "100", "--json")
    assert again.exit_code == 0
    counts = json.loads(again.stdout)
    assert (counts["inserted"], counts["unchanged"]) == (1500 - stored, stored)
    assert n_works(engine) == 1500
    engine.dispose()


def test_truncated_gzip_with_strict_writes_nothing(db_url: str, seed_record: dict,
                                                   tmp_path: Path) -> None:  # fmt: skip
    _, cut = _truncated_gzip(tmp_path, frame(seed_record, 1500))
    result = cli(db_url, "import-frame", str(cut), "--strict", "--batch-size", "100")
    assert result.exit_code == 2
    [line] = errors(result)
    assert "cannot read frame" in line and "0 stored" in line
    assert line.endswith("--strict: nothing was written")
    engine = make_engine(db_url)
    assert n_works(engine) == 0 and last_run(engine).status == "failed"
    engine.dispose()


def test_import_labels_database_error_is_one_line_and_recorded(db_url: str,
                                                               tmp_path: Path) -> None:  # fmt: skip
    engine = make_engine(db_url)
    cli(db_url, "init")
    add_works(engine, 2)
    _refuse_inserts(engine, "labels", "1 = 1")
    path = write_jsonl(tmp_path / "l.jsonl", [
        {"work_id": "W0001", "annotator": "ann", "question": "genre", "value": "methods"},
    ])  # fmt: skip
    result = cli(db_url, "import-labels", str(path))
    assert result.exit_code == 2
    [line] = errors(result)
    assert "database error" in line and "refused by the test trigger" in line
    run = last_run(engine)
    assert (run.kind, run.status, run.error) == ("labels", "failed", line.removeprefix("error: "))
    engine.dispose()


def test_migration_0006_says_how_earlier_runs_ended(engine: Engine) -> None:
    """Runs recorded before the status column: finished ones are done, the others running."""
    from alembic import command

    from db.engine import alembic_config, upgrade

    cfg = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0005_label_summaries")
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO import_runs (kind, path, started_at, finished_at) VALUES "
                          "('frame', 'a', '2026-01-01', '2026-01-01'), "
                          "('frame', 'b', '2026-01-02', NULL)"))  # fmt: skip
    upgrade(engine)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT path, status, error FROM import_runs ORDER BY path"))
        assert [tuple(r) for r in rows] == [("a", "done", None), ("b", "running", None)]


# ------------------------------------------------------------ odd files (items 6, 11)


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_a_utf8_bom_before_line_1_is_accepted(engine: Engine, schema: Schema, seed_record: dict,
                                              tmp_path: Path, gz: bool) -> None:  # fmt: skip
    data = codecs.BOM_UTF8 + b"".join(json.dumps(r).encode() + b"\n"
                                      for r in frame(seed_record, 3))  # fmt: skip
    path = tmp_path / ("f.jsonl.gz" if gz else "f.jsonl")
    path.write_bytes(gzip.compress(data) if gz else data)
    summary = import_frame(engine, path, schema)
    assert (summary.inserted, summary.rejected) == (3, 0)
    with read_session(engine) as s:
        assert s.get(Work, "W1").record == frame(seed_record, 1)[0]


@pytest.mark.parametrize("data", [b"", b"\n  \n\t\n", gzip.compress(b"")],
                         ids=["empty", "blank-lines", "empty-gzip"])  # fmt: skip
def test_a_frame_without_records_says_0_records(db_url: str, tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(data)
    result = cli(db_url, "import-frame", str(path))
    assert result.exit_code == 0
    assert f"{path}: 0 records" in result.stderr
    assert "done: " in result.stdout and "0 inserted" in result.stdout


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8


@pytest.mark.parametrize(("data", "reason"), [
    (PNG, "line 1: not UTF-8 text: byte 0x89 at column 1; 3 lines in a row are not UTF-8 text"),
    ('{"id": "W1"}\n{"id": "W2"}\n'.encode("utf-16"), "line 1: UTF-16 text (byte order mark)"),
    (b"\xff\xfe\xfd", "the only line is not UTF-8 text"),
], ids=["png", "utf-16", "one-line"])  # fmt: skip
def test_a_binary_file_is_one_message_and_exit_2(db_url: str, tmp_path: Path, data: bytes,
                                                 reason: str) -> None:  # fmt: skip
    path = tmp_path / "f.jsonl"
    path.write_bytes(data)
    result = cli(db_url, "import-frame", str(path))
    assert result.exit_code == 2
    assert result.output.count("\n") == 1, result.output  # one line, no line-by-line rejections
    [line] = errors(result)
    assert reason in line and "a binary file? A frame is UTF-8 JSON Lines" in line
    assert "0 stored" in line and line.endswith("nothing was stored")


def test_undecodable_lines_amid_text_are_rejected_then_a_run_of_them_stops(
    db_url: str, seed_record: dict, tmp_path: Path
) -> None:
    good = [json.dumps(r).encode() for r in frame(seed_record, 8)]
    lines = good[:2] + [b"\xff bad"] + good[2:4] + [b"\xc3\x28", b"x\x00y"] + good[4:6]
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    result = cli(db_url, "import-frame", str(path))
    assert result.exit_code == 3
    assert "rejected: line 3: not UTF-8 text: byte 0xff at column 1" in result.output
    assert "rejected: line 6: not UTF-8 text: byte 0xc3 at column 1" in result.output
    assert "rejected: line 7: not text: control byte 0x00 at column 2" in result.output
    run_of_3 = good[:2] + [b"\xff", b"\x1b[0m", b"\xfd"] + good[2:]
    path.write_bytes(b"\n".join(run_of_3) + b"\n")
    stopped = cli(db_url, "import-frame", str(path))
    assert stopped.exit_code == 2
    [line] = errors(stopped)
    assert "line 3: not UTF-8 text: byte 0xff at column 1; 3 lines in a row" in line
    assert "5 lines read, 2 stored (0 inserted, 0 updated, 2 unchanged), 0 rejected" in line
    engine = make_engine(db_url)
    assert n_works(engine) == 6  # W1-W6 from the first run, nothing after the stop
    engine.dispose()


@pytest.mark.parametrize("content", [
    '[\n  {"id": "W1"},\n  {"id": "W2"}\n]\n',
    '[{"id": "W1"}, {"id": "W2"}]\n',
    "[]\n",
    '\n[ {"id": "W1"}\n]',
], ids=["pretty", "one-line", "empty", "blank-first"])  # fmt: skip
def test_a_json_array_file_is_named(db_url: str, tmp_path: Path, content: str) -> None:
    path = tmp_path / "f.json"
    path.write_text(content)
    result = cli(db_url, "import-frame", str(path))
    assert result.exit_code == 2
    [line] = errors(result)
    assert "this is a JSON array; a frame is JSON Lines, one object per line" in line
    engine = make_engine(db_url)
    assert n_works(engine) == 0
    engine.dispose()


def test_a_line_holding_a_list_in_json_lines_is_just_rejected(sqlite_url: str,
                                                              tmp_path: Path) -> None:  # fmt: skip
    path = write_jsonl(tmp_path / "f.jsonl", ["[1, 2]", {"id": "W1"}])
    result = cli(sqlite_url, "import-frame", str(path))
    assert result.exit_code == 3
    assert "rejected: line 1: expected a JSON object, got list" in result.output


@pytest.mark.parametrize(("line", "message"), [
    ('"category_scores_codex": [0.1, NaN, 0.1]',
     "prediction.category_scores_codex[1]: score NaN: a number in [0, 1] expected"),
    ('"teacher_disagreement_score": Infinity',
     "prediction.teacher_disagreement_score: score Infinity: a number in [0, 1] expected"),
    ('"about_ca_topic_score_gemma": -Infinity',
     "prediction.about_ca_topic_score_gemma: score -Infinity: a number in [0, 1] expected"),
    ('"teacher_disagreement_score": 1e400',
     "prediction.teacher_disagreement_score: score 1e400: a number in [0, 1] expected"),
    ('"extra": {"n": [1, NaN]}', "prediction.extra.n[1]: NaN is not a JSON number"),
])  # fmt: skip
def test_nan_and_infinity_are_named_with_their_field(schema: Schema, line: str,
                                                     message: str) -> None:  # fmt: skip
    raw = ('{"id": "W5", "title": "NaN and Infinity", "prediction": {' + line + "}}").encode()
    [parsed] = parse_chunk([(4, raw)], schema)
    assert (parsed.work_id, parsed.errors) == ("W5", [message])


def test_invalid_json_without_nan_keeps_the_parser_message(schema: Schema) -> None:
    [parsed] = parse_chunk([(1, b'{"id": "W1", "title": "NaN",}')], schema)
    assert parsed.errors[0].startswith("invalid JSON: ")


# ------------------------------------------------------------ work ids (item 7)


@pytest.mark.parametrize(("value", "expected"), [
    ("W123", "W123"), ("w123", "W123"), (" https://openalex.org/W42 ", "W42"),
    ("W１０００００4", None), ("W١٢٣", None), ("Ｗ123", None), ("W123\n", "W123"),
    ("W", None), ("W12a", None), ("W123 W4", None), ("https://openalex.org/W1/x", None),
])  # fmt: skip
def test_a_work_id_is_ascii_w_and_ascii_digits(value: str, expected: str | None) -> None:
    assert normalize_work_id(value) == expected
    assert openalex_id(value) == expected


def test_ids_with_non_ascii_digits_are_rejected_everywhere(
    engine: Engine, schema: Schema, tmp_path: Path
) -> None:
    path = write_jsonl(tmp_path / "f.jsonl", [{"id": "W１０００００4"}, {"id": "W1000004"}])
    summary = import_frame(engine, path, schema)
    assert (summary.inserted, summary.rejected) == (1, 1)
    assert ("is not an OpenAlex work id (ASCII W followed by ASCII digits)"
            in summary.problems[0].reason)  # fmt: skip
    labels = write_jsonl(tmp_path / "l.jsonl", [
        {"work_id": "W１０００００4", "annotator": "ann", "question": "genre", "value": "methods"},
    ])  # fmt: skip
    result = import_labels(engine, labels, schema)
    assert result.rejected == 1 and result.imported == 0
    assert "not an OpenAlex work id (ASCII W followed by ASCII digits)" in \
        result.problems[0].reason  # fmt: skip
    assert n_works(engine) == 1
