"""The array counting of humans vs machines gives exactly the report of the scalar rules.

The golden files were written by the scalar implementation (before the arrays) on the cases of
tests/machines_cases.py: synthetic records damaged in every way the rules handle.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from labeling.schema import Schema
from labeling.stats.machine_arrays import RecordMemo, encode_records, layout
from labeling.stats.machines import compare, scores_of
from tests.machines_cases import cases

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "machines"


@pytest.mark.parametrize(
    ("name", "n", "questions"),
    [("golden", 400, None), ("golden_subset", 50, ["genre", "categories"])],
)
def test_compare_equals_the_scalar_report(
    schema: Schema, name: str, n: int, questions: list[str] | None
) -> None:
    expected = json.loads(gzip.decompress((GOLDEN / f"{name}.json.gz").read_bytes()))
    got = json.loads(
        json.dumps(compare(schema, cases(schema)[:n], questions), sort_keys=True, allow_nan=False)
    )
    assert got == expected


def test_encoded_scores_equal_scores_of(schema: Schema) -> None:
    records = [r for _, r in cases(schema, 120)]
    lay = layout(schema)
    matrix = encode_records(schema, records)
    for q in schema.questions:
        for t in schema.teachers:
            block = matrix[:, lay.scores[(q.name, t)]]
            for i, rec in enumerate(records):
                vec = scores_of(q, rec, t)
                assert (not np.isnan(block[i]).any()) == (vec is not None), (q.name, t, i)
                if vec is not None:
                    assert np.array_equal(block[i], np.asarray(vec))


def test_the_memo_gives_the_same_rows_and_reuses_them(schema: Schema) -> None:
    records = [r for _, r in cases(schema, 30)]
    memo = RecordMemo(size=20)
    keys = [f"h{i}" for i in range(30)]
    first = memo.matrix(schema, keys, records)
    assert np.array_equal(first, encode_records(schema, records), equal_nan=True)
    assert not memo.has(schema, "h0") and memo.has(schema, "h29")  # the oldest went first
    # a record already encoded is not read again (None stands for it)
    again = memo.matrix(schema, keys[10:], [None] * 20)
    assert np.array_equal(again, first[10:], equal_nan=True)
