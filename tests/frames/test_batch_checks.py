"""The typed, per-chunk path gives exactly what the per-record checks give, line by line."""

from __future__ import annotations

import copy
import json
import random
import tomllib
from typing import Any

import msgspec
import orjson
import pytest

from labeling.frames import lines
from labeling.frames.batch_checks import batch_warnings
from labeling.frames.checks import check_record
from labeling.frames.lines import parse_chunk
from labeling.frames.record_model import record_model
from labeling.frames.synth import iter_synthetic_records
from labeling.frames.typed import typed_chunk
from labeling.schema import Schema, get_path, parse_schema
from labeling.settings import DEFAULT_SCHEMA

# Changes to a record, each at a dotted path: most keep it valid (and may raise warnings),
# some make it invalid (it must then take the detailed path and be worded as before).
DAMAGE: list[tuple[str, Any]] = [
    ("prediction.genre_codex", "no_such_label"),
    ("prediction.genre_codex", None),
    ("prediction.genre_candidate", "no_such_label"),  # two strings that are no label: the
    ("prediction.genre_gemma", "another_non_label"),  # calls are compared as strings
    ("prediction.domain_consensus", "no_such_label"),
    ("prediction.genre_candidate", "empirical"),
    ("prediction.genre_consensus", "methods"),
    ("prediction.study_design_candidate", None),
    ("prediction.domain_consensus", "health_sciences"),
    ("prediction.candidate_categories", ["Bibliometrics"]),
    ("prediction.consensus_categories", ["Open science", "Open science"]),
    ("prediction.candidate_categories", ["not a label"]),
    ("prediction.category_scores_codex", [0.5] * 9),
    ("prediction.category_scores_gemma", None),
    ("prediction.category_scores_codex", [1, 0, 1, 0, 1, 0, 1, 0, 1]),
    ("prediction.genre_scores_codex", [0.2] * 9),
    ("prediction.domain_scores_gemma", None),
    ("prediction.about_ca_system_candidate", True),
    ("prediction.about_ca_topic_consensus", True),
    ("prediction.about_ca_system_score_codex", 0.5),
    ("prediction.about_ca_system_score_gemma", 1),
    ("prediction.about_ca_topic_score_codex", None),
    ("prediction.prediction_status", "validated"),
    ("prediction.model_version", None),
    ("prediction.teacher_disagreement_score", 0),
    ("machine_scores.score_spread", 0.5),
    ("machine_scores.score_opus", None),
    ("machine_scores.validation_status", None),
    ("machine_scores.note", "x" * 5000),
    ("prediction", None),
    ("machine_scores", None),
    ("routes", None),
    ("routes", {"ca_aff": None}),
    ("year", None),
    ("title", "caf\u00e9 \U0001f600"),
    ("doi", "d" * 255),
    ("id", "https://openalex.org/w123"),
    ("extra", {"nested": [1, 2.5, "x", None]}),
    # invalid: each must be rejected with check_record's words
    ("doi", "d" * 256),
    ("title", "nul\x00"),
    ("lang", 5),
    ("year", 2020.0),
    ("year", True),
    ("cited_by", 2**40),
    ("is_retracted", 1),
    ("routes", {"ca_aff": "yes"}),
    ("direct_labels", {}),
    ("prediction.category_scores_codex", [0.5] * 8),
    ("prediction.category_scores_codex", [0.5] * 8 + [1.5]),
    ("prediction.category_scores_codex", [[0.5]] * 9),  # nested: its numbers alone would do
    ("prediction.domain_scores_gemma", [0.5, None, 0.5, 0.5, 0.5, 0.5]),
    ("prediction.genre_scores_gemma", 0.5),
    ("prediction.genre_codex", 3),
    ("prediction.candidate_categories", "Bibliometrics"),
    ("prediction.about_ca_system_candidate", "yes"),
    ("prediction.about_ca_system_score_codex", -0.1),
    ("prediction.model_version", "m" * 129),
    ("machine_scores.score_opus", "0.5"),
    ("machine_scores.provisional", "true"),
    ("prediction", []),
    ("id", "W" + "1" * 40),
    ("id", " W12 "),
    ("id", None),
]


def _set(rec: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    rec = copy.deepcopy(rec)
    *parents, last = path.split(".")
    node = rec
    for part in parents:
        if not isinstance(node.get(part), dict):
            return rec
        node = node[part]
    node[last] = value
    return rec


def _frame(seed_record: dict[str, Any]) -> list[bytes]:
    """Synthetic records, the seed, every damage alone and random pairs of them, as lines."""
    base = [*iter_synthetic_records(150, seed=5), seed_record]
    rng = random.Random(7)
    records = list(base)
    for i, (path, value) in enumerate(DAMAGE):
        records.append(_set(base[i % len(base)], path, value))
    for _ in range(300):
        rec = rng.choice(base)
        for path, value in rng.sample(DAMAGE, 2):
            rec = _set(rec, path, value)
        records.append(rec)
    out = [orjson.dumps(r) for r in records]
    out += [json.dumps(r).encode() for r in records[:20]]  # other spacing
    out += [b'{"id": "W9", "x": 1e400}', b'{"id": "W9", "title": "\xff"}', b'{"id": "W9"} x']
    return out


def test_batch_warnings_on_calls_that_are_no_label_are_check_record_s(
    schema: Schema, seed_record: dict
) -> None:
    """With any str as a call (the floor's model), such calls reach batch_warnings."""
    model = record_model(schema, floor=True)
    assert model is not None
    records, expected = [], []
    for number, line in enumerate(_frame(seed_record), start=2):
        try:
            record = model.decoder.decode(line)
        except (msgspec.MsgspecError, RecursionError):
            continue
        slow = lines._parse_line(number, line, schema, None)
        if not slow.errors:  # the model is no stricter than check_record but for raw fields
            records.append(record)
            expected.append(slow.warnings)
    got = batch_warnings(schema, model.columns(records))
    assert got == expected
    assert sum("is not a label of the schema" in w for ws in got for w in ws) >= 3


def test_the_typed_path_gives_what_check_record_gives(schema: Schema, seed_record: dict) -> None:
    frame = _frame(seed_record)
    chunk = list(enumerate(frame, start=2))
    fast = typed_chunk(chunk, schema)
    taken = sum(f is not None for f in fast)
    assert taken > len(frame) / 2  # most lines take the fast path
    kinds = {w.split(" ")[1] for f in fast if f is not None for w in f[2]}
    # Many kinds of warning are compared; a call that is no label takes check_record (the
    # model's calls are the labels): the next test compares batch_warnings on those.
    assert len(kinds) >= 5, kinds
    for (number, line), result in zip(chunk, fast, strict=True):
        slow = lines._parse_line(number, line, schema, None)
        if result is None:
            continue  # the detailed path words it
        assert not slow.errors, (line, slow.errors)
        work_id, columns, warnings, text, digest, row = result
        assert row is None  # no encoder: the columns
        assert (work_id, warnings, text, digest) == (slow.work_id, slow.warnings, slow.text,
                                                     slow.digest)  # fmt: skip
        assert slow.columns is not None and list(columns) == list(slow.columns)
        assert _same_but_int_scores(columns, slow.columns)


def _same_but_int_scores(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """A score written as 0 or 1 is an int to orjson and a float to the model: equal values."""
    numbers = {int, float}
    return all(a[k] == b[k] and (type(a[k]) is type(b[k]) or {type(a[k]), type(b[k])} <= numbers)
               for k in a)  # fmt: skip


def test_parse_chunk_is_unchanged_by_the_fast_path(
    schema: Schema, seed_record: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole chunk, with and without the typed path: the same Parsed lines."""
    chunk = list(enumerate([b"", *_frame(seed_record), b"  "], start=1))
    with_fast = parse_chunk(chunk, schema)
    monkeypatch.setattr(lines, "typed_chunk", lambda todo, schema, encoder: [None] * len(todo))
    assert with_fast == parse_chunk(chunk, schema)


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_with_an_encoder_the_fast_path_gives_the_rows_of_the_detailed_one(
    schema: Schema, seed_record: dict, dialect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The works rows the workers send back, with and without the typed path (same stamp)."""
    from datetime import UTC, datetime

    from db.bulk import RowEncoder
    from db.models import Work
    from labeling.frames import store, typed

    now = datetime(2026, 12, 5, 8, 0, tzinfo=UTC)
    monkeypatch.setattr(typed, "utcnow", lambda: now)
    monkeypatch.setattr(store, "utcnow", lambda: now)
    encoder = RowEncoder(Work.__table__, dialect)
    chunk = list(enumerate(_frame(seed_record), start=2))
    fast = parse_chunk(chunk, schema, None, encoder)
    with monkeypatch.context() as patch:
        patch.setattr(lines, "typed_chunk", lambda todo, schema, encoder: [None] * len(todo))
        slow = parse_chunk(chunk, schema, None, encoder)
    assert sum(p.row is not None for p in fast) > len(chunk) / 2
    for a, b in zip(fast, slow, strict=True):  # a score 0 or 1 may be an int in b: equal
        assert (a.line, a.work_id, a.row, a.digest) == (b.line, b.work_id, b.row, b.digest)


def test_invalid_lines_never_take_the_fast_path(schema: Schema, seed_record: dict) -> None:
    for path, value in DAMAGE:
        rec = _set(seed_record, path, value)
        line = orjson.dumps(rec)
        [fast] = typed_chunk([(2, line)], schema)
        if check_record(rec, schema).errors or "\x00" in str(get_path(rec, path)):
            assert fast is None, (path, value)


def test_the_model_needs_the_schema_to_be_one_tree(schema: Schema) -> None:
    assert record_model(schema) is not None


def test_a_seed_shaped_record_has_no_field_the_strict_model_does_not_know(
    schema: Schema, seed_record: dict[str, Any]
) -> None:
    """So that its line is not scanned for numbers too large (bench/RESULTS.md, issue 16,
    nineteenth pass): the seed, the synthetic frame's records, and the OpenAlex fields the
    model keeps raw."""
    model = record_model(schema)
    assert model is not None
    for rec in [seed_record, *iter_synthetic_records(50, seed=3)]:
        model.strict.decode(orjson.dumps(rec))
    with pytest.raises(msgspec.ValidationError, match="Object contains unknown field `x`"):
        model.strict.decode(orjson.dumps({**seed_record, "x": 1}))


def _deep(seed: dict[str, Any]) -> tuple[Schema, dict[str, Any]]:
    """The default schema with the categories' scores three levels down, and a record to match."""
    text = DEFAULT_SCHEMA.read_text(encoding="utf-8")
    for teacher in ("codex", "gemma"):
        text = text.replace(f'"prediction.category_scores_{teacher}"',
                            f'"prediction.teachers.{teacher}.categories"')  # fmt: skip
    rec = copy.deepcopy(seed)
    pred = rec["prediction"]
    pred["teachers"] = {t: {"categories": pred.pop(f"category_scores_{t}")}
                        for t in ("codex", "gemma")}  # fmt: skip
    return parse_schema(tomllib.loads(text)), rec


@pytest.mark.parametrize(
    "change",
    [
        {},  # every level there
        {"prediction.teachers.gemma": None},  # a nested object null: its fields read as absent
        {"prediction.teachers": None},  # two levels of objects null
        {"prediction.teachers.codex.categories": [0.9] * 9},  # warnings from the deep scores
    ],
)
def test_the_typed_path_reads_paths_nested_three_deep(seed_record: dict, change: dict) -> None:
    schema, rec = _deep(seed_record)
    for path, value in change.items():
        rec = _set(rec, path, value)
    chunk = [(2, orjson.dumps(rec)), (3, orjson.dumps({**rec, "id": "W77"}))]
    fast = typed_chunk(chunk, schema)
    for (number, line), result in zip(chunk, fast, strict=True):
        assert result is not None  # the typed model takes it
        slow = lines._parse_line(number, line, schema, None)
        assert not slow.errors and slow.columns is not None
        assert result[2] == slow.warnings
        assert _same_but_int_scores(result[1], slow.columns)


def test_the_seed_record_takes_the_typed_path(schema: Schema, seed_record: dict) -> None:
    """Every line of the real frame shares its model version, a hex digest with "e0061" in it:
    a string, not a number, so it must not send the line the slow way."""
    assert "931329e0061c" in seed_record["prediction"]["model_version"]
    [fast] = typed_chunk([(2, orjson.dumps(seed_record))], schema)
    assert fast is not None


@pytest.mark.parametrize(
    "number",
    [b"1e400", b"1E+400", b"-1e0400", b"2.5e308", b"9" * 400, b"1e999999"],
)
@pytest.mark.parametrize("after", [b",", b"}", b"]", b" ", b"\t", b"\n"])
@pytest.mark.parametrize(
    "field", ["unknown", "retraction", "screen", "direct_labels", "prediction.unknown"]
)
def test_a_number_too_large_for_a_double_never_takes_the_typed_path(
    schema: Schema, number: bytes, after: bytes, field: str
) -> None:
    """Wherever it is (a field the model does not know, which msgspec skips unread; a field
    it keeps raw; an unknown field inside a known object), and whatever follows it: orjson
    refuses it, so the detailed path must say so."""
    value = {b",": b"[N,1]", b"}": b'{"k":N}', b"]": b"[N]"}.get(after, b"[N" + after + b"]")
    value = value.replace(b"N", number)
    if "." in field:  # inside a known object
        outer, inner = field.split(".")
        line = b'{"id": "W9", "%s": {"%s": %s}}' % (outer.encode(), inner.encode(), value)
    else:
        line = b'{"id": "W9", "%s": %s}' % (field.encode(), value)
    assert orjson.loads(line.replace(number, b"1")) is not None  # valid JSON but for the number
    [fast] = typed_chunk([(2, line)], schema)
    assert fast is None
    assert lines._parse_line(2, line, schema, None).errors


@pytest.mark.parametrize("field", ["retraction", "screen"])
@pytest.mark.parametrize("number", [b"1e400", b"-1E+0400", b"9" * 400])
def test_a_raw_field_that_is_only_a_number_too_large_is_found(
    schema: Schema, field: str, number: bytes
) -> None:
    """A raw field's value alone: its number ends where the value ends, with no comma."""
    line = b'{"id": "W9", "%s": %s}' % (field.encode(), number)
    assert typed_chunk([(2, line)], schema) == [None]
    assert lines._parse_line(2, line, schema, None).errors


@pytest.mark.parametrize(
    ("extra", "fast", "rejected"),
    [
        (b'"retraction": {"date": "2020", "score": 1.5e30, "n": 12}', True, False),
        (b'"screen": [1, 2.5, {"a": null}], "retraction": null', True, False),
        (b'"direct_labels": [{"q": "genre", "v": 3}]', True, False),
        (b'"direct_labels": null', True, False),
        (b'"direct_labels": []', True, False),  # the usual value, passed on sight
        (b'"direct_labels": [ ]', True, False),
        (b'"screen": [], "retraction": []', True, False),
        (b'"unknown": {"deep": [1, 2e10]}', True, False),  # decoded skipping it, then scanned
        (b'"prediction": {"unknown": 1}', True, False),
        # An exponent of three digits may overflow: the detailed path looks (and takes it).
        (b'"retraction": {"score": 1.5e300}', False, False),
        (b'"direct_labels": "genre"', False, True),  # not a list: check_record words it
        (b'"direct_labels": 5', False, True),
    ],
)
def test_raw_and_unknown_fields_take_the_typed_path_when_check_record_takes_them(
    schema: Schema, extra: bytes, fast: bool, rejected: bool
) -> None:
    line = b'{"id": "W9", ' + extra + b"}"
    [result] = typed_chunk([(2, line)], schema)
    slow = lines._parse_line(2, line, schema, None)
    assert (result is not None, bool(slow.errors)) == (fast, rejected)
    if result is not None:
        assert (result[0], result[2]) == (slow.work_id, slow.warnings)


def test_a_number_too_large_after_a_hex_digest_is_still_found(schema: Schema) -> None:
    """An "e000" that ends no number (a digest in a string) hides no later one that does."""
    line = b'{"id": "W9", "v": "hybrid-931329e0061c", "w": "e000x", "unknown": [1e400]}'
    assert typed_chunk([(2, line.replace(b"1e400", b"1"))], schema) != [None]
    assert typed_chunk([(2, line)], schema) == [None]


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_with_an_encoder_a_line_must_still_be_utf8(
    schema: Schema, seed_record: dict, dialect: str
) -> None:
    """An encoder's rows keep the line's bytes, not its text: non-ASCII UTF-8 is taken, and
    a line that is not UTF-8 still goes the detailed way."""
    from db.bulk import RowEncoder
    from db.models import Work

    encoder = RowEncoder(Work.__table__, dialect)
    accented = orjson.dumps({**seed_record, "title": "Études über Zählungen"})
    [fast] = typed_chunk([(2, accented)], schema, encoder)
    assert fast is not None and fast[3] is None and fast[5] is not None
    broken = accented.replace("É".encode(), b"\xff")
    assert typed_chunk([(2, broken)], schema, encoder) == [None]
