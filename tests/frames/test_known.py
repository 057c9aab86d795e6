"""Re-import: unchanged lines are skipped by their stored hash, with the same outcome as before."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select, update

from db.engine import make_engine, read_session, upgrade, write_connection
from db.models import Work
from labeling.frames import frame_file, lines
from labeling.frames.importer import ImportSummary, import_frame
from labeling.frames.known import line_id
from labeling.frames.synth import iter_synthetic_records
from labeling.schema import Schema
from tests.conftest import make_record, write_jsonl


def _decodes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the id of every line the (in-process) parser decodes from here on."""
    seen: list[str] = []
    real = lines.typed_chunk

    def counting(todo: list[tuple[int, bytes]], schema: Schema, encoder: Any = None) -> Any:
        seen.extend(str(line_id(number, line)) for number, line in todo)
        return real(todo, schema, encoder)

    monkeypatch.setattr(lines, "typed_chunk", counting)
    return seen


def _outcome(s: ImportSummary) -> tuple[Any, ...]:
    """What an import reported: counts and every problem (path and timings aside)."""
    d = s.as_dict()
    d.pop("path")
    return tuple(sorted(d.items())), [asdict(p) for p in s.problems]


def _frame(seed: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """Synthetic records plus the seed record (which carries a consistency warning)."""
    records = list(iter_synthetic_records(n, seed=3))
    return [*records, make_record(seed, "W4413411773")]


def test_unchanged_reimport_decodes_no_line_and_reports_the_same_warnings(
    engine: Engine, schema: Schema, seed_record: dict, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    path = write_jsonl(tmp_path / "f.jsonl", _frame(seed_record, 60))
    first = import_frame(engine, path, schema)
    assert first.inserted == 61 and first.warnings >= 1
    decoded = _decodes(monkeypatch)
    again = import_frame(engine, path, schema)
    assert decoded == []
    assert (again.inserted, again.updated, again.unchanged, again.rejected) == (0, 0, 61, 0)
    assert [asdict(p) for p in again.problems] == [asdict(p) for p in first.problems]


def test_a_stale_schema_or_unknown_warnings_decode_the_line_once(
    engine: Engine, schema: Schema, seed_record: dict, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    path = write_jsonl(tmp_path / "f.jsonl", _frame(seed_record, 20))
    import_frame(engine, path, schema)
    with read_session(engine) as s:
        before = {
            w.id: (w.machine, w.machine_hash, w.import_warnings) for w in s.scalars(select(Work))
        }
    ids = sorted(before)
    with write_connection(engine) as conn:
        conn.execute(update(Work).where(Work.id == ids[0]).values(machine_hash="0" * 16))
        conn.execute(update(Work).where(Work.id == "W4413411773").values(import_warnings=None))
    decoded = _decodes(monkeypatch)
    again = import_frame(engine, path, schema)
    assert sorted(decoded) == sorted([ids[0], "W4413411773"])
    assert (again.unchanged, again.warnings) == (21, 1)
    with read_session(engine) as s:
        after = {
            w.id: (w.machine, w.machine_hash, w.import_warnings) for w in s.scalars(select(Work))
        }
    assert after == before  # recomputed as they were
    decoded.clear()
    import_frame(engine, path, schema)
    assert decoded == []


def _fresh(tmp_path: Path, name: str) -> Engine:
    engine = make_engine(f"sqlite:///{tmp_path / name}")
    upgrade(engine)
    return engine


def test_skipping_by_hash_reports_exactly_what_decoding_every_line_does(
    schema: Schema, seed_record: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Changed, unchanged, duplicated, bad and oddly written lines: the same counts and problems."""
    base = _frame(seed_record, 40)
    path = write_jsonl(tmp_path / "base.jsonl", base)
    changed = [dict(r) for r in base]
    changed[3]["title"] = "changed"
    text = [json.dumps(r) for r in changed]
    text[5] = json.dumps({"title": changed[5]["title"], **changed[5]})  # id not the first key
    text[7] = text[7].replace('"id": "W', '"id": "https://openalex.org/W', 1)  # another spelling
    text += [text[1], text[3], '{"id": "W1", "year": "x"}', "not json", json.dumps(base[9])]
    text.insert(0, "")
    second = write_jsonl(tmp_path / "second.jsonl", text)
    outcomes = []
    # In-process, in 2 worker processes that look the hashes up themselves, decoding all.
    for name, skip, workers in (("a.db", True, 0), ("c.db", True, 2), ("b.db", False, 0)):
        engine = _fresh(tmp_path, name)
        import_frame(engine, path, schema)
        if not skip:
            monkeypatch.setattr("labeling.frames.importer.known_hashes", lambda *a: {})
        outcomes.append(_outcome(import_frame(engine, second, schema, workers=workers)))
        with read_session(engine) as s:
            outcomes.append(
                [tuple(w.record_hash for w in s.scalars(select(Work).order_by(Work.id)))]
            )
        engine.dispose()
    assert outcomes[0] == outcomes[2] == outcomes[4] and outcomes[1] == outcomes[3] == outcomes[5]
    counts = dict(outcomes[0][0])
    # Line 6, its keys in another order, is the stored content: unchanged (compared as JSON).
    assert (counts["updated"], counts["rejected"], counts["unchanged"]) == (2, 5, 39)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b'{"id": "W12", "x": 1}', "W12"),
        (b'  {"id":"https://openalex.org/w7"}', "W7"),
        (b'\xef\xbb\xbf{"id": "W5"}', "W5"),  # line 1 only
        (b'{"x": 1, "id": "W12"}', None),
        (b'{"id": "W1\\u0032"}', None),
        (b'{"id": "X12"}', None),
    ],
)
def test_line_id_reads_a_leading_id_or_gives_up(line: bytes, expected: str | None) -> None:
    assert line_id(1, line) == expected


@pytest.mark.parametrize("ending", [b"", b"\n", b"\r\n"])
def test_a_plain_file_read_in_blocks_gives_the_lines_of_line_by_line_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ending: bytes
) -> None:
    data = b"\n".join([b'{"id": "W1"}', b"", b"  ", b"x" * 40, b'{"a": 1}\r', b"last"]) + ending
    path = tmp_path / "f.jsonl"
    path.write_bytes(data)
    expected = [(n, line.rstrip(b"\n")) for n, line in enumerate(data.splitlines(True), 1)]
    monkeypatch.setattr(frame_file, "BLOCK_BYTES", 7)  # lines cross block boundaries
    got = [item for chunk, _ in frame_file.iter_chunks(path, size=2) for item in chunk]
    assert got == expected


def test_workers_look_the_hashes_up_and_skip_unchanged_lines(
    schema: Schema, seed_record: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from labeling.frames import batch_writer

    path = write_jsonl(tmp_path / "f.jsonl", _frame(seed_record, 1200))
    engine = _fresh(tmp_path, "w.db")
    first = import_frame(engine, path, schema, workers=2)
    known: list[bool] = []
    real = batch_writer.write_batch

    def spying(conn: Any, batch: list[Any], counts: Any, fresh: bool = False, *rest: Any) -> None:
        known.extend(p.known for p in batch)
        real(conn, batch, counts, fresh, *rest)

    monkeypatch.setattr(batch_writer, "write_batch", spying)
    again = import_frame(engine, path, schema, workers=2, batch_size=100)
    assert len(known) == 1201 and all(known)  # none decoded: each found by its stored hash
    assert (again.unchanged, again.inserted, again.updated) == (1201, 0, 0)
    assert [asdict(p) for p in again.problems] == [asdict(p) for p in first.problems]
    engine.dispose()


@pytest.mark.parametrize("block", [1, 3, 7, 64, 1 << 20])
@pytest.mark.parametrize("ending", [b"", b"\n", b"\r\n"])
@pytest.mark.parametrize("spans", [False, True])
def test_blocks_sent_to_the_workers_hold_the_lines_of_line_by_line_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int, ending: bytes, spans: bool
) -> None:
    data = b"\n".join([b"", b'{"id": "W1"}', b"", b"x" * 40, b"\xff\xfe", b"last"]) + ending
    path = tmp_path / "f.jsonl"
    path.write_bytes(data)
    expected = [(n, line.rstrip(b"\n")) for n, line in enumerate(data.splitlines(True), 1)]
    monkeypatch.setattr(frame_file, "BLOCK_BYTES", block)
    got: list[tuple[int, bytes]] = []
    for chunk, _ in frame_file.iter_blocks(path, spans=spans):
        assert isinstance(chunk, frame_file.Span if spans else frame_file.Block)
        numbered = [lines.Parsed(n, None, [], [], text=line.decode("latin-1"))
                    for n, line in chunk.lines()]  # fmt: skip
        frame_file.renumber(numbered, chunk, len(got) + 1)  # as the importer does, in file order
        got += [(p.line, p.text.encode("latin-1")) for p in numbered]  # type: ignore[union-attr]
    assert got == expected


def test_a_span_of_a_file_that_shrank_is_a_read_error_naming_its_line(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"id": "W1"}\n{"id": "W2"}\n')
    spans = [chunk for chunk, _ in frame_file.iter_blocks(path, spans=True)]
    path.write_bytes(b'{"id": "W1"}')
    with pytest.raises(
        frame_file.FrameReadError, match=r"f\.jsonl: cannot read frame at line 1 \(the file changed"
    ):
        spans[0].lines()
    path.unlink()
    with pytest.raises(frame_file.FrameReadError, match=r"at line 1 \(.*No such file"):
        spans[0].lines()


def test_only_the_first_span_is_counted_and_a_later_one_names_its_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The importing process no longer counts lines (it reads only around each span's end):
    # a worker that cannot read a later span names its byte; the importer words it again
    # with the line (test_a_frame_that_shrinks_under_the_workers_fails_naming_the_line).
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"id": "W1"}\n{"id": "W2"}\n{"id": "W3"}\n')
    monkeypatch.setattr(frame_file, "BLOCK_BYTES", 8)
    spans = [chunk for chunk, _ in frame_file.iter_blocks(path, spans=True)]
    assert [(s.first, s.offset, s.length) for s in spans] == [(1, 0, 12), (None, 13, 12),
                                                              (None, 26, 12)]  # fmt: skip
    assert spans[1].lines() == [(frame_file.UNCOUNTED_FIRST, b'{"id": "W2"}')]
    path.write_bytes(b'{"id": "W1"}')
    with pytest.raises(frame_file.SpanReadError, match=r"at byte 13 \(the file changed") as caught:
        spans[1].lines()
    assert caught.value.detail == "the file changed while it was imported"


def test_a_frame_that_shrinks_under_the_workers_fails_naming_the_line(
    schema: Schema, seed_record: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workers read their spans themselves: a file cut short meanwhile stops the import
    with a message naming the first line they could not read, and what was read stays."""
    from labeling.frames import importer
    from labeling.frames.importer import ImportFailed

    monkeypatch.setattr(frame_file, "BLOCK_BYTES", 64 * 1024)
    path = write_jsonl(tmp_path / "f.jsonl", _frame(seed_record, 400))
    data = path.read_bytes()
    real = importer.iter_blocks
    cut_at: list[int] = []

    def then_cut(*args: Any, **kwargs: Any) -> Any:
        spans = list(real(*args, **kwargs))
        assert len(spans) > 3 and all(isinstance(s, frame_file.Span) for s, _ in spans)
        offset = spans[2][0].offset
        path.write_bytes(data[: offset + 10])  # the third span is cut short
        cut_at.append(data[:offset].count(b"\n") + 1)  # the number of its first line
        yield from spans

    monkeypatch.setattr(importer, "iter_blocks", then_cut)
    engine = _fresh(tmp_path, "cut.db")
    with pytest.raises(ImportFailed, match=r"the file changed while it was imported") as failed:
        import_frame(engine, path, schema, workers=2, batch_size=10_000)
    assert f"cannot read frame at line {cut_at[0]} (" in str(failed.value)
    engine.dispose()


def test_a_parsed_line_comes_back_from_a_worker_with_every_field() -> None:
    import pickle

    names = lines.Parsed.__struct_fields__
    values = {name: f"value of {name}" for name in names}
    parsed = lines.Parsed(**values)  # type: ignore[arg-type]
    again = pickle.loads(pickle.dumps(parsed))
    assert {name: getattr(again, name) for name in names} == values
