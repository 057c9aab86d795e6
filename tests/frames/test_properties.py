"""Bad input, property-based: the frame importer, the labels importer and the schema loader."""

from __future__ import annotations

import codecs
import csv
import io
import itertools
import json
import math
import random
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, func, select

from db.engine import make_engine, read_session, upgrade
from db.models import Work
from labeling.frames.importer import FrameReadError, ImportFailed, import_frame
from labeling.review.label_import import import_labels
from labeling.review.labels import LabelError
from labeling.schema import Schema, SchemaError, load_schema
from labeling.settings import DEFAULT_SCHEMA
from tests.conftest import FIXTURES, examples, make_record
from tests.factories import add_works

SEED: dict[str, Any] = json.loads((FIXTURES / "seed_record.json").read_text(encoding="utf-8"))
SCHEMA: Schema = load_schema(DEFAULT_SCHEMA)
PROPS = settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
_ids = itertools.count(int(uuid.uuid4().int % 10**8) * 10**6)


def fresh_id() -> str:
    """An OpenAlex-like work id never used before in this test session."""
    return f"W9{next(_ids):015d}"


@pytest.fixture(scope="module")
def shared_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """One migrated SQLite database for every example of the module (fresh ids per example)."""
    path = tmp_path_factory.mktemp("props") / "props.db"
    engine = make_engine(f"sqlite:///{path}")
    upgrade(engine)
    add_works(engine, 400, prefix="W8")  # W80001..: ids a labels file may name
    yield engine
    engine.dispose()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A scratch directory for the generated files (each example writes its own name)."""
    path = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def n_works(engine: Engine) -> int:
    """How many works the database holds."""
    with read_session(engine) as session:
        return session.execute(select(func.count()).select_from(Work)).scalar_one()


def ids_present(engine: Engine, ids: list[str]) -> set[str]:
    """Which of `ids` are works in the database."""
    with read_session(engine) as session:
        return set(session.execute(select(Work.id).where(Work.id.in_(ids))).scalars())


# ------------------------------------------------------------------ frame lines

GOOD, BAD, MAYBE, BLANK = "good", "bad", "maybe", "blank"
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
JSONISH = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
# fields whose type the importer checks, with a value of a wrong type for each
TYPED = {
    "title": st.integers() | st.lists(st.text(max_size=3), max_size=2) | st.booleans(),
    "year": st.text(max_size=5) | st.floats(allow_nan=False) | st.booleans(),
    "cited_by": st.text(max_size=5) | st.lists(st.integers(), max_size=2),
    "is_retracted": st.text(min_size=1, max_size=5) | st.integers(),
    "routes": st.text(max_size=5) | st.integers() | st.lists(st.booleans(), max_size=2),
}


@st.composite
def frame_line(draw: st.DrawFn) -> tuple[str, bytes]:
    """(kind, raw line without newline): good, surely bad, maybe bad, or blank."""
    kind = draw(st.sampled_from([
        "good", "bytes", "truncated", "typed", "any_field", "nan", "deep", "dupkey",
        "utf8", "blank", "scalar",
    ]))  # fmt: skip
    rec = make_record(SEED, fresh_id())
    text = json.dumps(rec)
    if kind == "good":
        return GOOD, text.encode()
    if kind == "bytes":
        raw = draw(st.binary(min_size=1, max_size=200)).replace(b"\n", b"")
        if raw.startswith(b"\x1f\x8b"):  # gzip magic: the whole file would be a (bad) gzip
            raw = b"x" + raw
        return (BLANK if not raw.strip() else BAD), raw
    if kind == "truncated":
        cut = draw(st.integers(1, len(text) - 1))
        raw = text[:cut].encode()
        return (BLANK if not raw.strip() else BAD), raw
    if kind == "typed":
        key = draw(st.sampled_from(sorted(TYPED)))
        rec[key] = draw(TYPED[key])
        return BAD, json.dumps(rec).encode()
    if kind == "any_field":  # any value at any field, top level or inside prediction
        node = rec if draw(st.booleans()) else rec["prediction"]
        key = draw(st.sampled_from(sorted(node)))
        node[key] = draw(JSONISH)
        return MAYBE, json.dumps(rec).encode()
    if kind == "nan":  # NaN / Infinity literals are not JSON
        literal = draw(st.sampled_from(["NaN", "Infinity", "-Infinity"]))
        scores = rec["prediction"]["category_scores_codex"]
        pos = draw(st.integers(0, len(scores) - 1))
        scores[pos] = 12345.5
        return BAD, json.dumps(rec).replace("12345.5", literal).encode()
    if kind == "deep":
        depth = draw(st.integers(600, 5000))
        opener = draw(st.sampled_from(["[", '{"a":']))
        closer = "]" if opener == "[" else "}"
        return BAD, (opener * depth + "1" + closer * depth).encode()
    if kind == "dupkey":  # duplicate keys: the parser keeps one; never a crash
        dup = draw(st.sampled_from(['"id": "W1"', '"title": 3', '"year": 2020', '"id": "x"']))
        return MAYBE, (text[:-1] + ", " + dup + "}").encode()
    if kind == "utf8":
        bad = draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xe2\x82"]))
        raw = text.encode()
        i = raw.index(b'"title": "') + len(b'"title": "')
        return BAD, raw[:i] + bad + raw[i:]
    if kind == "blank":
        return BLANK, draw(st.sampled_from([b"", b"   ", b"\t", b"\r"]))
    return BAD, json.dumps(draw(SCALARS | st.lists(SCALARS, max_size=3))).encode()


def write_lines(path: Path, lines: list[bytes]) -> Path:
    """Join raw lines with newlines into `path`."""
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def not_text(raw: bytes) -> bool:
    """A line that is not UTF-8 text: invalid UTF-8, or a control byte JSON never allows."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return any(b < 0x20 and b not in b"\t\r\n" for b in raw)


def expected_stop(raws: list[bytes]) -> int | None:
    """Where the importer must stop reading (README): the line of a JSON array's start, or the
    first of 3 non-text lines in a row (or of a file with no text line at all)."""
    cleaned = [(n, (raw.removeprefix(codecs.BOM_UTF8) if n == 1 else raw).strip())
               for n, raw in enumerate(raws, start=1)]  # fmt: skip
    nonblank = [(n, raw) for n, raw in cleaned if raw]
    if not nonblank:
        return None
    first_no, first = nonblank[0]
    after = first[1:].lstrip()
    if first.startswith(b"[") and (after in (b"", b"]") or after.startswith(b"{")):
        return first_no
    run: list[int] = []
    for n, raw in nonblank:
        run = [*run, n] if not_text(raw) else []
        if len(run) == 3:
            return run[0]
    return run[0] if run and len(run) == len(nonblank) else None


def _frame_check(
    engine: Engine, workdir: Path, lines: list[tuple[str, bytes]], strict: bool
) -> None:
    before = n_works(engine)
    path = write_lines(workdir / f"{uuid.uuid4().hex}.jsonl", [raw for _, raw in lines])
    stop = expected_stop([raw for _, raw in lines])
    try:
        summary = import_frame(engine, path, SCHEMA, strict=strict, progress=False)
        assert stop is None, f"expected a stop at line {stop}"
    except ImportFailed as exc:
        assert stop is not None and f": line {stop}: " in str(exc), (stop, str(exc))
        summary = exc.summary
        lines = lines[: stop - 1]  # what was read before the stop is imported as usual
    rejected = {p.line for p in summary.problems if p.kind == "rejected"}
    numbered = list(enumerate(lines, start=1))
    bad = {n for n, (kind, _) in numbered if kind == BAD}
    good = {n for n, (kind, _) in numbered if kind == GOOD}
    nonblank = sum(kind != BLANK for _, (kind, _) in numbered)
    assert bad <= rejected, f"bad lines not reported: {sorted(bad - rejected)}"
    assert not (good & rejected), f"good lines rejected: {summary.problems}"
    assert all(1 <= n <= len(lines) for n in rejected)
    assert summary.rejected == len(rejected)  # one problem per rejected line
    good_ids = [json.loads(raw)["id"] for kind, raw in lines if kind == GOOD]
    if strict and (summary.rejected or stop is not None):
        assert summary.aborted or summary.failed
        assert summary.inserted + summary.updated + summary.unchanged == 0
        assert n_works(engine) == before, "strict import wrote part of the file"
        assert not ids_present(engine, good_ids)
    else:
        assert not summary.aborted
        total = summary.inserted + summary.updated + summary.unchanged + summary.rejected
        assert total == nonblank
        assert ids_present(engine, good_ids) == set(good_ids)
        assert n_works(engine) == before + summary.inserted


@PROPS
@given(lines=st.lists(frame_line(), min_size=1, max_size=12))
def test_frame_import_never_crashes_and_reports_every_bad_line(
    shared_engine: Engine, workdir: Path, lines: list[tuple[str, bytes]]
) -> None:
    """Mixed good and malformed lines: good imported, bad reported by number, counts add up."""
    _frame_check(shared_engine, workdir, lines, strict=False)


@PROPS
@given(lines=st.lists(frame_line(), min_size=1, max_size=12))
def test_frame_import_strict_writes_all_or_nothing(
    shared_engine: Engine, workdir: Path, lines: list[tuple[str, bytes]]
) -> None:
    """Strict mode: one bad line aborts the whole file and nothing is written."""
    _frame_check(shared_engine, workdir, lines, strict=True)


@PROPS
@given(raw=st.binary(max_size=300))
def test_frame_import_of_arbitrary_bytes(shared_engine: Engine, workdir: Path, raw: bytes) -> None:
    """Any file content at all: a summary, or ImportFailed naming the file, never a crash."""
    path = workdir / f"{uuid.uuid4().hex}.jsonl"
    path.write_bytes(raw)
    before = n_works(shared_engine)
    try:
        summary = import_frame(shared_engine, path, SCHEMA, progress=False)
    except ImportFailed as exc:
        assert str(exc).startswith(f"{path}: ")
        # an unreadable gzip stream, or a file that is no frame (binary, a JSON array)
        gz = raw.startswith(b"\x1f\x8b")
        assert gz or expected_stop(raw.split(b"\n")) is not None, str(exc)
        assert n_works(shared_engine) == before + exc.summary.inserted
        return
    lines = raw.split(b"\n")
    if raw.endswith(b"\n"):
        lines.pop()
    nonblank = sum(bool(line.removeprefix(codecs.BOM_UTF8 if i == 0 else b"").strip())
                   for i, line in enumerate(lines))  # fmt: skip
    total = summary.inserted + summary.updated + summary.unchanged + summary.rejected
    assert total == nonblank
    assert n_works(shared_engine) == before + summary.inserted


def test_frame_import_of_a_10_mb_title(shared_engine: Engine, tmp_path: Path) -> None:
    """A 10 MB title is stored whole next to a normal line; nothing is truncated."""
    big_id, small_id = fresh_id(), fresh_id()
    big = make_record(SEED, big_id, title="x" * (10 * 1024 * 1024))
    path = write_lines(
        tmp_path / "big.jsonl",
        [json.dumps(big).encode(), json.dumps(make_record(SEED, small_id)).encode()],
    )
    summary = import_frame(shared_engine, path, SCHEMA, progress=False)
    assert (summary.inserted, summary.rejected) == (2, 0)
    with read_session(shared_engine) as session:
        title = session.execute(select(Work.title).where(Work.id == big_id)).scalar_one()
    assert len(title) == 10 * 1024 * 1024


def test_frame_import_of_a_missing_file(shared_engine: Engine, tmp_path: Path) -> None:
    """An unreadable file is a FrameReadError naming it."""
    with pytest.raises(FrameReadError, match="nope.jsonl"):
        import_frame(shared_engine, tmp_path / "nope.jsonl", SCHEMA, progress=False)


# ------------------------------------------------------------------ labels importer

QUESTIONS = {q.name: q for q in SCHEMA.questions}
LABEL_WORKS = [f"W8{i:04d}" for i in range(1, 401)]


def _good_value(q: Any, rng: random.Random) -> str:
    if q.kind == "multi":
        return ";".join(rng.sample(list(q.labels), rng.randint(0, 2)))
    if q.kind == "binary":
        return rng.choice(["yes", "no", "YES"])
    return rng.choice(list(q.labels))


@st.composite
def label_row(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """(kind, row) of a labels file: good, or bad in one of many ways."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    qname = draw(st.sampled_from(sorted(QUESTIONS)))
    row: dict[str, Any] = {
        "work_id": "",
        "annotator": "",
        "question": qname,
        "value": _good_value(QUESTIONS[qname], rng),
    }
    kind = draw(
        st.sampled_from(
            [
                "good",
                "good",
                "no_work",
                "unknown_work",
                "no_annotator",
                "unknown_question",
                "bad_value",
                "bad_confidence",
                "bad_created",
            ]
        )
    )
    if kind == "no_work":
        row["work_id"] = None
    elif kind == "unknown_work":
        row["work_id"] = fresh_id()
    elif kind == "no_annotator":
        row["annotator"] = draw(st.sampled_from(["  ", None, "\t"]))
    elif kind == "unknown_question":
        row["question"] = "no_such_" + draw(st.text("abc", min_size=1, max_size=5))
    elif kind == "bad_value":
        q = QUESTIONS[qname]
        junk = draw(st.text(st.characters(blacklist_categories=("Cs",)), max_size=15))
        if q.kind == "multi":  # a part that is no label ("" would mean: none chosen)
            row["value"] = "zz" + junk.replace(";", "")
        elif (
            draw(st.booleans()) or junk.strip() in q.labels or junk.strip().lower() in ("yes", "no")
        ):
            row["value"] = ""
        else:
            row["value"] = junk
    elif kind == "bad_confidence":
        row["confidence"] = draw(st.sampled_from(["abc", "1.5", "x"]))
    elif kind == "bad_created":
        row["created_at"] = draw(st.sampled_from(["yesterday", "2024-13-45", "1/2/2024"]))
    return ("good" if kind == "good" else "bad"), row


def _fill(rows: list[tuple[str, dict[str, Any]]], who: str) -> None:
    works = iter(random.Random(who).sample(LABEL_WORKS, len(rows)))
    for _, row in rows:
        work = next(works)
        if row["work_id"] == "":
            row["work_id"] = work
        if row["annotator"] == "":
            row["annotator"] = who


def _labels_check(
    engine: Engine, path: Path, rows: list[tuple[str, dict[str, Any]]], lines: list[int]
) -> None:
    summary = import_labels(engine, path, SCHEMA, campaign="props")
    reported = [p.line for p in summary.problems]
    bad = {n for n, (kind, _) in zip(lines, rows, strict=True) if kind == "bad"}
    good = {n for n, (kind, _) in zip(lines, rows, strict=True) if kind == "good"}
    assert bad == set(reported), summary.problems
    assert len(reported) == len(set(reported)) == summary.rejected
    assert summary.rows == len(rows)
    assert summary.imported + summary.duplicates == len(good)


@PROPS
@given(rows=st.lists(label_row(), min_size=1, max_size=10), blanks=st.booleans())
def test_labels_import_jsonl_reports_bad_rows_by_line(
    shared_engine: Engine, workdir: Path, rows: list[tuple[str, dict[str, Any]]], blanks: bool
) -> None:
    """JSONL labels: good rows imported, each bad row reported once with its line number."""
    _fill(rows, f"ann_{uuid.uuid4().hex[:8]}")
    out, lines, n = [], [], 0
    for _, row in rows:
        if blanks:
            out.append("")
            n += 1
        out.append(json.dumps({k: v for k, v in row.items()}))
        n += 1
        lines.append(n)
    path = workdir / f"{uuid.uuid4().hex}.jsonl"
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    _labels_check(shared_engine, path, rows, lines)


@PROPS
@given(rows=st.lists(label_row(), min_size=1, max_size=10))
def test_labels_import_csv_reports_bad_rows_by_line(
    shared_engine: Engine, workdir: Path, rows: list[tuple[str, dict[str, Any]]]
) -> None:
    """CSV labels (quoted cells, commas, quotes): bad rows reported with their line numbers."""
    _fill(rows, f'ann, "{uuid.uuid4().hex[:8]}"')
    buf = io.StringIO()
    cols = ["work_id", "annotator", "question", "value", "confidence", "created_at"]
    writer = csv.DictWriter(buf, cols)  # "\r\n" rows; cells with "\r" or "\n" get quoted
    writer.writeheader()
    for _, row in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    text = buf.getvalue()
    # cells with newlines span lines: the reported number is the row's last physical line
    lines, n = [], 1
    reader = csv.reader(io.StringIO(text, newline=""))
    next(reader)
    for _ in reader:
        n = reader.line_num
        lines.append(n)
    path = workdir / f"{uuid.uuid4().hex}.csv"
    path.write_text(text, encoding="utf-8", newline="")
    _labels_check(shared_engine, path, rows, lines)


@PROPS
@given(
    lines=st.lists(
        st.one_of(
            st.binary(max_size=60).map(
                lambda b: b.decode("utf-8", "replace").replace("\n", "").encode()
            ),
            st.sampled_from(
                [
                    b"NaN",
                    b'{"work_id": NaN}',
                    b"[" * 50,
                    b'{"a": 1, "a": 2}',
                    b"{",
                    b'{"work_id": "W80001", "annotator": "x", "question": "genre", '
                    b'"value": Infinity}',
                ]
            ),
            JSONISH.map(lambda v: json.dumps(v).encode()),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_labels_import_jsonl_junk_never_crashes(
    shared_engine: Engine, workdir: Path, lines: list[bytes]
) -> None:
    """Junk JSONL (bytes, NaN, some nesting, duplicate keys): a summary or a LabelError.

    The bytes are valid UTF-8 and nesting is shallow here; invalid UTF-8 and deep nesting have
    their own (currently failing) tests below.
    """
    path = workdir / f"{uuid.uuid4().hex}.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    try:
        summary = import_labels(shared_engine, path, SCHEMA, campaign="props")
    except LabelError as exc:
        assert str(path) in str(exc)
        return
    # the importer reads text with universal newlines: a lone "\r" ends a line too
    n_lines = len(io.BytesIO(b"\n".join(lines) + b"\n").read().decode().splitlines())
    n_text = len(list(io.StringIO(path.read_text(encoding="utf-8-sig"), newline=None)))
    assert all(1 <= p.line <= max(n_lines, n_text) for p in summary.problems)
    assert summary.imported + summary.duplicates + summary.rejected <= summary.rows


@PROPS
@given(
    text=st.text(st.characters(blacklist_categories=("Cs",)), max_size=300), header=st.booleans()
)
def test_labels_import_csv_junk_never_crashes(
    shared_engine: Engine, workdir: Path, text: str, header: bool
) -> None:
    """Junk CSV text, with or without a valid header: a summary or a LabelError naming it."""
    path = workdir / f"{uuid.uuid4().hex}.csv"
    path.write_text(
        ("work_id,annotator,question,value\n" if header else "") + text, encoding="utf-8"
    )
    try:
        summary = import_labels(shared_engine, path, SCHEMA, campaign="props")
    except LabelError as exc:
        assert str(path) in str(exc)
        return
    assert all(p.line >= 1 for p in summary.problems)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_labels_import_of_invalid_utf8(shared_engine: Engine, tmp_path: Path, suffix: str) -> None:
    """A labels file in the wrong encoding: a LabelError naming it, or the line rejected."""
    path = tmp_path / f"latin1{suffix}"
    row = {"work_id": "W80001", "annotator": "Jos\u00e9", "question": "genre", "value": "x"}
    if suffix == ".csv":
        text = "work_id,annotator,question,value\nW80001,Jos\u00e9,genre,x\n"
    else:
        text = json.dumps(row, ensure_ascii=False) + "\n"
    path.write_bytes(text.encode("latin-1"))
    try:
        summary = import_labels(shared_engine, path, SCHEMA, campaign="props")
    except LabelError as exc:
        assert str(path) in str(exc)
        return
    assert [p.line for p in summary.problems] == [2 if suffix == ".csv" else 1]


def test_labels_import_of_deeply_nested_jsonl(shared_engine: Engine, tmp_path: Path) -> None:
    """A line nested 100 000 deep: that line rejected with its number, the import goes on."""
    path = tmp_path / "deep.jsonl"
    path.write_text("[" * 100_000 + "\n", encoding="utf-8")
    summary = import_labels(shared_engine, path, SCHEMA, campaign="props")
    assert [p.line for p in summary.problems] == [1]


# ------------------------------------------------------------------ schema loader


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"


TOML_SCALAR = st.one_of(
    st.booleans(),
    st.integers(-10, 10),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(["yes", "no", "a", "b", "c", "genre", "x;y"]),
)
TOML_VALUE = st.recursive(
    TOML_SCALAR,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["codex", "gemma", "a", "b", "yes", "x y"]), inner, max_size=3
        )
    ),
    max_leaves=6,
)
QUESTION_KEYS = [
    "name",
    "kind",
    "labels",
    "threshold",
    "key",
    "prompt",
    "definition",
    "scores",
    "calls",
    "definitions",
    "extra",
]


@st.composite
def schema_text(draw: st.DrawFn) -> str:
    """TOML text of a plausible-but-wrong schema, or a mangled copy of the default one."""
    if draw(st.booleans()):
        base = Path(DEFAULT_SCHEMA).read_text(encoding="utf-8")
        lines = base.splitlines()
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(lines) - 1))
            op = draw(st.sampled_from(["drop", "dup", "junk", "value"]))
            if op == "drop":
                del lines[i]
            elif op == "dup":
                lines.insert(i, lines[i])
            elif op == "junk":
                lines[i] = draw(st.text(max_size=30))
            elif "=" in lines[i]:
                lines[i] = lines[i].split("=")[0] + "= " + _toml_value(draw(TOML_VALUE))
            if not lines:
                break
        return "\n".join(lines)
    out = []
    if draw(st.booleans()):
        out.append(f"teachers = {_toml_value(draw(TOML_VALUE))}")
    for _ in range(draw(st.integers(0, 3))):
        out.append("[[question]]")
        good_kind = draw(st.sampled_from(["single", "multi", "binary", "other"]))
        fields: dict[str, Any] = {
            "name": "q" + draw(st.text("abc_", max_size=3)),
            "kind": good_kind,
            "labels": ["yes", "no"] if good_kind == "binary" else ["a", "b"],
        }
        for key in draw(st.lists(st.sampled_from(QUESTION_KEYS), max_size=4, unique=True)):
            fields[key] = draw(TOML_VALUE)
        for key, value in fields.items():
            out.append(f"{key} = {_toml_value(value)}")
    return "\n".join(out) + "\n"


@PROPS
@given(text=st.one_of(schema_text(), st.text(max_size=200)))
def test_schema_loader_gives_a_schema_or_a_schema_error(workdir: Path, text: str) -> None:
    """Generated TOML: a Schema, or a SchemaError whose message names the file."""
    path = workdir / f"schema-{uuid.uuid4().hex}.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        schema = load_schema(path)
    except SchemaError as exc:
        assert str(path) in str(exc)
        return
    assert isinstance(schema, Schema) and schema.questions


@PROPS
@given(raw=st.binary(max_size=200))
def test_schema_loader_of_arbitrary_bytes(workdir: Path, raw: bytes) -> None:
    """Any bytes (wrong encodings included): a SchemaError naming the file, or a Schema."""
    path = workdir / f"schema-{uuid.uuid4().hex}.toml"
    path.write_bytes(raw)
    try:
        load_schema(path)
    except SchemaError as exc:
        assert str(path) in str(exc)
