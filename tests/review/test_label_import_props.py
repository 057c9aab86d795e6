"""`labeling import-labels` on arbitrary bytes and arbitrary rows (hypothesis), both engines:
the exit code is always 0, 2 or 3, there is never a traceback, and the database changes by
exactly what the closing summary line says was stored (nothing at all on exit 2)."""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, func, select

from db.engine import make_engine, read_session
from db.models import Campaign, CampaignItem, Label, User
from labeling.cli.main import main
from labeling.review.campaigns import create_campaign
from labeling.schema import load_schema
from labeling.settings import DEFAULT_SCHEMA
from tests.conftest import examples
from tests.factories import add_works

SCHEMA = load_schema(DEFAULT_SCHEMA)
DONE = re.compile(r"done: (\d+) rows, (\d+) labels imported, (\d+) already present, (\d+) rows "
                  r"rejected, (\d+) works added to campaigns, (\d+) users created, (\d+) "
                  r"campaigns created, (\d+) validated works corroborated, (\d+) disputes opened "
                  r"across campaigns")  # fmt: skip
TABLES = (Label, User, Campaign, CampaignItem)
COLUMNS = ("work_id", "annotator", "question", "value", "campaign", "version", "created_at",
           "confidence", "note", "time_on_item_ms", "model_version", "scores_visible",
           "schema_hash", "extra")  # fmt: skip
WORKS = ["W0001", "W0002", "W0003", "W9999", "w0001", " W0002", "W" + "1" * 40]
LABELS = sorted({lab for q in SCHEMA.questions for lab in q.labels} | {"yes", "no", "YES"})
ANY_TEXT = st.text(st.characters(codec=None), max_size=12)  # lone surrogates included
ANY = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(), ANY_TEXT,
                st.lists(st.sampled_from(LABELS), max_size=3), st.text(min_size=130,
                                                                      max_size=140))  # fmt: skip
PLAUSIBLE: dict[str, Any] = {
    "work_id": st.sampled_from(WORKS),
    "annotator": st.sampled_from(["ann", "bob", "=eve", " ann", "a" * 129, "x\x00y", "\n"]),
    "question": st.sampled_from([*SCHEMA.names, "mood", ""]),
    "value": st.one_of(
        st.sampled_from([*LABELS, "", "Bibliometrics;Open science", "zz"]),
        st.lists(st.sampled_from(LABELS), max_size=3),
    ),
    "campaign": st.sampled_from(["a", "b", "", "x" * 129, "c\x00", "'=c", "1"]),
    "version": st.sampled_from([1, 2, "3", 0, -1, 2**31, "x", 1.5, None]),
    "created_at": st.sampled_from(
        [
            "2024-05-01T10:00:00Z",
            "2024-05-01T10:00:00.123456+02:00",
            "0001-01-01T00:00:00+01:00",
            "9999-12-31T23:59:59-01:00",
            "yesterday",
            "",
        ]
    ),
    "confidence": st.sampled_from([1, 3, "2", -5, 2**31, "1.5", True, ""]),
    "note": st.sampled_from(["=cmd|x", "'=x", "'q", "a\x00b", "", "n" * 300]),
    "time_on_item_ms": st.sampled_from([1500, -1, 2**31, "12", ""]),
    "model_version": st.sampled_from(["m1", "m" * 129, ""]),
    "scores_visible": st.sampled_from([True, False, "true", "FALSE", "maybe", ""]),
    "schema_hash": st.sampled_from(["h1", "h" * 65, ""]),
    "extra": ANY,
}
JUNK_ROW = st.fixed_dictionaries({}, optional={c: st.one_of(PLAUSIBLE[c], PLAUSIBLE[c], ANY)
                                               for c in COLUMNS})  # fmt: skip


@st.composite
def whole_label(draw: st.DrawFn) -> list[dict[str, Any]]:
    """The rows of one complete, plausible label (sometimes with one field spoilt)."""
    base = {"work_id": draw(st.sampled_from(WORKS[:3])), "annotator": draw(
        st.sampled_from(["ann", "bob", "=eve"])), "campaign": draw(st.sampled_from(["a", "b", "",
                                                                                 "b"])),
        "version": draw(st.sampled_from([1, 2, ""])),
        "note": draw(st.sampled_from(["", "=cmd|x", "'=x", "'q", "n" * 300]))}  # fmt: skip
    rows = []
    for q in SCHEMA.questions:
        value: Any = draw(st.sampled_from(q.labels))
        value = [value] if q.kind == "multi" else value
        rows.append({**base, "question": q.name, "value": value})
    if draw(st.integers(0, 3)) == 0:
        spoilt = draw(st.integers(0, len(rows) - 1))
        rows[spoilt] = {**rows[spoilt], **draw(JUNK_ROW)}
    return rows


ROWS = st.lists(
    st.one_of(JUNK_ROW.map(lambda r: [r]), whole_label(), whole_label()), max_size=6
).map(lambda groups: [row for group in groups for row in group])


def _cell(value: Any) -> str:
    """A value as a CSV cell (as a hand-made file would hold it)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ";".join(map(str, value))
    return str(value)


def write_rows(path: Path, fmt: str, rows: list[dict[str, Any]]) -> None:
    """The rows as a CSV, JSONL (maybe .gz) or Parquet labels file."""
    names = [c for c in COLUMNS if any(c in r for r in rows)]
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(names)
        writer.writerows([[_cell(r.get(c)) for c in names] for r in rows])
        path.write_bytes(buf.getvalue().encode("utf-8", "surrogatepass"))
    elif fmt == "parquet":  # text columns (Arrow needs one type a column, and valid UTF-8)

        def text(v: Any) -> str | None:
            return None if v is None else _cell(v).encode("utf-8", "replace").decode("utf-8")

        pq.write_table(pa.table({c: pa.array([text(r.get(c)) for r in rows], pa.string())
                                 for c in names}), path)  # fmt: skip
    else:
        data = "".join(json.dumps(r) + "\n" for r in rows).encode()
        path.write_bytes(gzip.compress(data) if fmt == "jsonl.gz" else data)


def write_bytes(path: Path, fmt: str, data: bytes, header: bool, cut: int) -> None:
    """Arbitrary bytes under a labels file's name (a CSV maybe after a valid header, a .gz
    maybe truncated)."""
    if header and fmt == "csv":
        data = b"work_id,annotator,question,value\n" + data
    if fmt == "jsonl.gz":
        data = gzip.compress(data)
        data = data[: max(1, len(data) - cut)]
    path.write_bytes(data)


def counts(engine: Engine) -> list[int]:
    """Rows of the tables an import may add to."""
    with read_session(engine) as session:
        return [session.execute(select(func.count()).select_from(t)).scalar_one()
                for t in TABLES]  # fmt: skip


@pytest.fixture
def labels_db(db_url: str) -> Iterator[tuple[str, Engine]]:
    """A database with works W0001-W0003 and campaign 'a' asking two questions."""
    engine = make_engine(db_url)
    add_works(engine, 3)
    create_campaign(engine, name="a", strategy="manual", questions=["genre", "categories"])
    yield db_url, engine
    engine.dispose()


@pytest.mark.slow  # over 20 s (pytest --durations)
@settings(
    max_examples=examples(120),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    fmt=st.sampled_from(["csv", "jsonl", "jsonl.gz", "parquet"]),
    content=st.one_of(
        ROWS.map(lambda r: ("rows", r)),
        ROWS.map(lambda r: ("rows", r)),
        st.tuples(st.binary(max_size=300), st.booleans(), st.integers(0, 30)).map(
            lambda b: ("bytes", b)
        ),
    ),
    campaign=st.one_of(st.none(), st.none(), st.sampled_from(["a", "new", "x" * 129, "\x01"])),
)
def test_import_labels_on_anything(
    labels_db: tuple[str, Engine], tmp_path: Path, fmt: str, content: tuple[str, Any],
    campaign: str | None,
) -> None:  # fmt: skip
    url, engine = labels_db
    path = tmp_path / f"{uuid.uuid4().hex}.{fmt}"
    kind, payload = content
    if kind == "rows":
        write_rows(path, fmt, payload)
    else:
        write_bytes(path, fmt, *payload)
    before = counts(engine)
    args = ["--db", url, "import-labels", str(path)] + (["--campaign", campaign] if campaign
                                                        else [])  # fmt: skip
    res = CliRunner().invoke(main, args)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exc_info
    assert "Traceback" not in res.output
    assert res.exit_code in (0, 2, 3), res.output
    event(f"{kind}: exit {res.exit_code}")
    after = counts(engine)
    if res.exit_code == 2:
        assert after == before, res.output
        assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1, res.stderr
        return
    done = DONE.fullmatch(" ".join(res.stdout.split()))  # the closing line, wrapped
    assert done, res.stdout
    rows, imported, _, rejected, works, users, campaigns, _, _ = map(int, done.groups())
    assert [a - b for a, b in zip(after, before, strict=True)] == [imported, users, campaigns,
                                                                  works]  # fmt: skip
    event(f"labels imported: {min(imported, 2)}+, campaigns created: {min(campaigns, 1)}+")
    assert (res.exit_code == 3) == (rejected > 0)
    if kind == "rows":
        assert rows == len(payload)
