"""A chunk's score vectors read from raw JSON at once: the same verdicts as decoding each."""

from __future__ import annotations

import sys
import threading
from typing import Any

import msgspec
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labeling.frames.record_model import NULL, record_model
from labeling.frames.score_vectors import _decoder, _read_all, read_vectors
from labeling.frames.typed import typed_chunk
from labeling.schema import Schema

GOOD = b"[0.1,0.2,0.3]"


def _raw(text: bytes) -> msgspec.Raw:
    """A field's raw JSON as the record model gives it (through a real decode)."""
    return msgspec.json.decode(b'{"v":' + text + b"}", type=dict[str, msgspec.Raw])["v"]


def _one_by_one(texts: list[bytes], width: int) -> tuple[list[Any], list[int]]:
    """What the typed decoder says of each vector: its floats, or that it is bad."""
    rows, bad = [], []
    for i, text in enumerate(texts):
        if text == b"null":
            rows.append(None)
            continue
        try:
            rows.append(_decoder(width).decode(text))
        except msgspec.DecodeError:
            rows.append(None)
            bad.append(i)
    return rows, bad


def _check(texts: list[bytes], width: int) -> list[int]:
    """read_vectors against the typed decoder, vector by vector; the positions of bad ones."""
    m, present, bad = read_vectors([_raw(t) for t in texts], width)
    rows, expected_bad = _one_by_one(texts, width)
    assert bad == expected_bad
    for i, row in enumerate(rows):
        assert present[i] == (row is not None)
        assert m[i].tolist() == (row if row is not None else [0.0] * width)
    return bad


@pytest.mark.parametrize(
    ("vector", "bad"),
    [
        (GOOD, False),
        (b"[0, 1, 0.5]", False),  # integers are scores too
        (b"[ 0.1 ,\n0.2 , 1E-5 ]", False),  # any JSON spacing, an exponent
        (b"[-0.0,0,1]", False),
        (b"null", False),  # absent
        (b"[0.1,0.2]", True),  # too short
        (b"[0.1,0.2,0.3,0.4]", True),  # too long
        (b"[]", True),
        (b"[0.1,0.2,1.5]", True),  # out of range
        (b"[0.1,0.2,-0.1]", True),
        (b"[0.1,0.2,2]", True),  # the value that ends each vector in the joined document
        (b"[0.1,0.2,null]", True),
        (b"[0.1,0.2,true]", True),
        (b'[0.1,0.2,"0.3"]', True),
        (b'[0.1,0.2,"[0.3"]', True),  # a bracket in a string
        (b"[0.1,0.2,{}]", True),
        (b"[[0.1,0.2,0.3]]", True),  # nested: simdjson reads it flat
        (b"[[0.1],[0.2],[0.3]]", True),
        (b"[0.1,[0.2,0.3]]", True),
        (b"0.5", True),  # a number, not a vector
        (b'"0.1,0.2,0.3"', True),
        (b'{"a":[0.1,0.2,0.3]}', True),
        (b"[0.1,0.2,123456789012345678901234567890]", True),  # beyond 64 bits
        (b"[0.1,0.2,1e400]", True),  # beyond a double
    ],
)
def test_a_vector_among_good_ones_is_judged_as_the_typed_decoder_judges_it(
    vector: bytes, bad: bool
) -> None:
    texts = [GOOD, vector, GOOD, b"null", vector, GOOD]
    assert _check(texts, 3) == ([1, 4] if bad else [])
    assert _check([GOOD, GOOD], 3) == []  # the shared parser is usable after a failure


@pytest.mark.parametrize(
    ("texts", "bad"),
    [
        ([b"[0.5]", b"[1]"], []),
        ([b"0.5", b"[0.5]"], [0]),  # a bare number has as many numbers as a vector of one
        ([b"[[0.5]]", b"0.5"], [0, 1]),
        ([b"[0.5,0.5]"], [0]),
    ],
)
def test_vectors_of_one_score(texts: list[bytes], bad: list[int]) -> None:
    assert _check(texts, 1) == bad


def test_lengths_that_balance_each_other_are_still_wrong() -> None:
    """One vector a score short and the next one long: the total is right, the rows are not."""
    assert _check([b"[0.1,0.2]", b"[0.3,0.4,0.5,0.6]"], 3) == [0, 1]
    assert _check([b"[0.1,0.2,0.3,0.4]", b"[0.5,0.6]", GOOD], 3) == [0, 1]


def test_nothing_present() -> None:
    m, present, bad = read_vectors([NULL, _raw(b"null")], 4)
    assert m.shape == (2, 4) and not present.any() and bad == []


_element = st.one_of(
    st.floats(min_value=0, max_value=1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(min_value=-2, max_value=3),
    st.sampled_from([None, True, "0.5", [0.5], {}, 2]),
)
_vector = st.one_of(
    st.lists(st.floats(min_value=0, max_value=1), min_size=4, max_size=4),
    st.lists(_element, min_size=0, max_size=6),
    _element,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_vector, min_size=1, max_size=12))
def test_any_json_in_a_vector_field(vectors: list[Any]) -> None:
    _check([orjson.dumps(v) for v in vectors], 4)


def test_a_record_with_a_bad_vector_leaves_the_fast_path_alone(
    schema: Schema, seed_record: dict[str, Any]
) -> None:
    """The others of its chunk keep the typed path; the bad one goes to check_record."""
    bad = {**seed_record, "prediction": {**seed_record["prediction"]}}
    bad["prediction"]["genre_scores_codex"] = [[0.1]] * len(seed_record["prediction"]
                                                            ["genre_scores_codex"])  # fmt: skip
    chunk = [(2, orjson.dumps(seed_record)), (3, orjson.dumps(bad)), (4, orjson.dumps(seed_record))]
    fast = typed_chunk(chunk, schema)
    assert fast[0] is not None and fast[1] is None and fast[2] is not None
    assert fast[0][2] == fast[2][2]


def test_the_floor_decodes_every_vector_into_floats(schema: Schema) -> None:
    """The bench's floor model (floor=True) keeps no vector as raw JSON."""
    typed, raw = record_model(schema, floor=True), record_model(schema)
    assert typed is not None and raw is not None
    assert typed.vectors == {} and raw.vectors
    assert all(width > 1 for width in raw.vectors.values())  # the fast way applies to all


def test_threads_read_at_once_each_with_its_own_parser() -> None:
    """A parser refuses a document while the last one's objects live: threads switching
    between parse and release must not send each other's chunks the slow way."""
    raws = [_raw(b"[0.25,0.5,0.75]")] * 200
    results: list[bool] = []

    def work() -> None:
        results.extend(_read_all(raws, 3) is not None for _ in range(300))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert len(results) == 1200 and all(results)
