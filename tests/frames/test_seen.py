"""SeenIds answers as a set of strings would, whatever the ids look like."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labeling.frames import seen
from labeling.frames.seen import SeenIds

_ids = st.one_of(
    st.integers(0, 10**20).map(lambda n: f"W{n}"),  # up to 21 digits: some beyond int64
    st.integers(0, 999).map(lambda n: f"W0{n}"),  # leading zeros: W012 is not W12
    st.integers(0, 50).map(lambda n: f"W{n}"),  # small: many repeats
    st.text(min_size=1, max_size=6),  # anything else
    st.sampled_from(["W", "W１２", "w12", "W-1", "W1.0", "W1\nW2", "W3\n", ""]),
)


# MERGE is set to the same value for every example: the fixture need not be reset.
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_ids, max_size=200))
def test_seen_ids_is_a_set_of_strings(monkeypatch: pytest.MonkeyPatch, ids: list[str]) -> None:
    monkeypatch.setattr(seen, "MERGE", 7)  # merge into the sorted array often
    ours, plain = SeenIds(), set[str]()
    for work_id in ids:
        assert ours.add(work_id) == (work_id not in plain), work_id
        plain.add(work_id)
        assert work_id in ours
    for work_id in ["W12", "W012", "W99999999999999999999", "x"]:
        assert (work_id in ours) == (work_id in plain)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_ids, max_size=200), st.lists(st.integers(1, 40), min_size=1))
def test_seen_ids_in_chunks_is_a_set_of_strings(
    monkeypatch: pytest.MonkeyPatch, ids: list[str], sizes: list[int]
) -> None:
    monkeypatch.setattr(seen, "MERGE", 7)
    ours, plain = SeenIds(), set[str]()
    start, i = 0, 0
    while start < len(ids):
        chunk = ids[start : start + sizes[i % len(sizes)]]
        expected = []
        for work_id in chunk:
            expected.append(work_id not in plain)
            plain.add(work_id)
        assert ours.add_many(chunk) == expected, chunk
        start, i = start + len(chunk), i + 1
    for work_id in [*ids, "W12", "W012", "W99999999999999999999", "x"]:
        assert (work_id in ours) == (work_id in plain)


def test_a_million_ids_take_little_memory() -> None:
    import tracemalloc

    tracemalloc.start()
    try:
        s = SeenIds()
        for i in range(200_000):
            assert s.add(f"W{4_000_000_000 + 37 * i}")
        size = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert not s.add("W4000000037")
    assert size < 12_000_000  # a set of these strings: about 19 MB


@pytest.mark.parametrize(
    "ids",
    [["W1", "W20", "W0", "W999999999999999999"], ["W1\nW2"], ["W1", "W01"], ["W1\nW2", "W3"],
     ["W1234567890123456789"], [], ["W5", ""]],
)  # fmt: skip
def test_a_chunk_s_keys_are_each_id_s_key(ids: list[str]) -> None:
    """All at once where every id is W and digits, one by one otherwise: the same keys."""
    assert seen._keys(ids) == [seen._key(w) for w in ids]
