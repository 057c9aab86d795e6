"""Campaigns: score orders, probability samples, filters, validation errors (both databases)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, select

from db.engine import read_session, write_session
from db.models import CampaignItem
from labeling.review.campaigns import (
    SCORE_STRATEGIES,
    CampaignError,
    add_items,
    campaign_progress,
    create_campaign,
    find_campaign,
    get_campaign,
    get_or_create_campaign,
    list_campaigns,
    set_active,
    validate_filter,
)
from labeling.review.sampling import DEFAULT_BINS, allocate, assign_strata, stratum_labels
from labeling.schema import Schema
from labeling.vocabulary import STATUS_VALIDATED
from tests.conftest import examples
from tests.factories import add_user, add_works, insert_works, work_row


def _items(engine: Engine, campaign_id: int) -> list[Any]:
    """A campaign's items in queue order."""
    with read_session(engine) as session:
        return session.execute(
            select(
                CampaignItem.work_id,
                CampaignItem.position,
                CampaignItem.stratum,
                CampaignItem.inclusion_prob,
                CampaignItem.n_labels,
                CampaignItem.done,
                CampaignItem.is_gold,
            )
            .where(CampaignItem.campaign_id == campaign_id)
            .order_by(CampaignItem.position)
        ).all()


def _scored_works(engine: Engine) -> list[dict[str, Any]]:
    """40 works with random (rounded, so tied) scores and some missing ones."""
    rng = np.random.default_rng(7)
    rows = []
    for i in range(40):
        opus, gpt = (round(float(x), 2) for x in rng.random(2))  # rounding makes ties
        rows.append(
            work_row(
                f"W{i:03d}",
                score_opus=opus,
                score_gpt=gpt,
                teacher_disagreement=round(float(rng.random()), 1),
                threshold_uncertainty=None if i % 9 == 0 else round(float(rng.random()), 1),
            )
        )
    insert_works(engine, rows)
    return rows


@pytest.mark.parametrize("strategy", SCORE_STRATEGIES)
def test_score_orders_descending_ties_by_id_nulls_last(engine: Engine, strategy: str) -> None:
    """Each score strategy queues by that score descending, ties by id, NULLs last."""
    rows = _scored_works(engine)
    camp = create_campaign(engine, name=f"c-{strategy}", strategy=strategy)
    assert not camp.is_probability_sample and camp.n_items == 40 and camp.sample is None
    expected = sorted(rows, key=lambda r: (r[strategy] is None, -(r[strategy] or 0.0), r["id"]))
    items = _items(engine, camp.id)
    assert [i.work_id for i in items] == [r["id"] for r in expected]
    assert [i.position for i in items] == list(range(1, 41))
    assert all(i.n_labels == 0 and not i.done and i.inclusion_prob is None for i in items)


def test_score_order_top_n(engine: Engine) -> None:
    """sample_size on a score order keeps only the top n."""
    add_works(engine, 30)
    camp = create_campaign(engine, name="top", sample_size=5)
    assert [i.work_id for i in _items(engine, camp.id)] == [f"W{i:04d}" for i in range(1, 6)]


@pytest.mark.parametrize(
    ("filter", "expected"),
    [
        (None, ["A", "B", "C", "D"]),
        ({"status": [STATUS_VALIDATED]}, ["D"]),
        ({"field": ["Medicine", "Physics"]}, ["A", "C"]),
        ({"year_min": 2020}, ["B", "C"]),
        ({"year_min": 2015, "year_max": 2020}, ["A", "B"]),
        ({"routes": {"screen": True}}, ["A", "C"]),
        ({"routes": {"screen": False}}, ["B", "D"]),
        ({"score_max": [0.5, None]}, ["A", "B"]),
        ({"score_max": [0.2, 0.8], "field": ["Physics", "Medicine"]}, ["C"]),
        ({"score_opus": [None, 0.15]}, ["D"]),
    ],
)
def test_filters(engine: Engine, filter: dict | None, expected: list[str]) -> None:
    """Each filter key selects the expected works."""
    insert_works(
        engine,
        [
            work_row(
                "A",
                score_opus=0.9,
                score_gpt=0.1,
                field="Medicine",
                year=2015,
                routes={"screen": True},
            ),
            work_row(
                "B",
                score_opus=0.6,
                score_gpt=0.7,
                field="Sociology",
                year=2020,
                routes={"screen": False},
            ),
            work_row(
                "C",
                score_opus=0.3,
                score_gpt=0.2,
                field="Physics",
                year=2024,
                routes={"screen": True, "direct": True},
            ),
            work_row("D", score_opus=0.1, score_gpt=0.0, status=STATUS_VALIDATED, year=None),
        ],
    )
    camp = create_campaign(engine, name="f", filter=filter)
    assert camp.filter == (validate_filter(filter) or None)
    assert [i.work_id for i in _items(engine, camp.id)] == expected


@pytest.mark.parametrize(
    ("filter", "message"),
    [
        ({"score": [0, 1]}, "unknown filter key 'score'"),
        ({"status": ["done"]}, "unknown statuses done"),
        ({"field": [1]}, "list of strings"),
        ({"year_min": "2020"}, "whole year"),
        ({"year_min": 2021, "year_max": 2020}, "year_min is after year_max"),
        ({"routes": {"screen": "yes"}}, "true/false"),
        ({"score_max": [0.9, 0.1]}, "above high"),
        ({"score_max": [0.1]}, "range"),
        ({"score_max": ["a", 1]}, "not a number"),
        ([1], "mapping"),
    ],
)
def test_filter_errors(filter: Any, message: str) -> None:
    """Bad filters are refused with a message naming the problem."""
    with pytest.raises(CampaignError, match=message):
        validate_filter(filter)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"strategy": "alphabetical"}, "unknown strategy 'alphabetical'"),
        ({"overlap": 0}, "overlap must be"),
        ({"strategy": "random"}, "needs sample_size"),
        ({"strategy": "stratified"}, "needs sample_size"),
        ({"strategy": "random", "sample_size": 11}, "bigger than the population of 10"),
        ({"strategy": "stratified", "sample_size": 11}, "bigger than the population of 10"),
        ({"rule": "plurality"}, "unknown rule"),
        ({"gold_rate": 1.5}, "gold_rate"),
        ({"questions": ["nope"]}, "unknown questions: nope"),
        ({"filter": {"bogus": 1}}, "unknown filter key"),
        ({"strategy": "stratified", "sample_size": 3, "bins": [0.5, 0.1]}, "increasing"),
        ({"name": ""}, "name"),
    ],
)
def test_create_errors(engine: Engine, schema: Schema, kwargs: dict, message: str) -> None:
    """Bad campaign arguments are refused and nothing is created."""
    add_works(engine, 10)
    args = {"name": "bad", "schema": schema, **kwargs}
    with pytest.raises(CampaignError, match=message):
        create_campaign(engine, **args)
    assert list_campaigns(engine) == []  # nothing half-created


def test_duplicate_name(engine: Engine) -> None:
    """Campaign names are unique."""
    create_campaign(engine, name="c")
    with pytest.raises(CampaignError, match="already exists"):
        create_campaign(engine, name="c")


def test_random_sample(engine: Engine) -> None:
    """A random sample is seeded, without replacement, in random order, pi = n/N."""
    add_works(engine, 50)
    one = create_campaign(engine, name="r1", strategy="random", sample_size=10, seed=3)
    two = create_campaign(engine, name="r2", strategy="random", sample_size=10, seed=3)
    other = create_campaign(engine, name="r3", strategy="random", sample_size=10, seed=4)
    assert one.is_probability_sample and one.n_items == 10
    assert one.sample == {"design": "random", "seed": 3, "N": 50, "n": 10}
    items = _items(engine, one.id)
    assert [i.position for i in items] == list(range(1, 11))
    assert all(i.inclusion_prob == pytest.approx(0.2) for i in items)
    assert len({i.work_id for i in items}) == 10
    assert [i.work_id for i in items] == [i.work_id for i in _items(engine, two.id)]
    assert [i.work_id for i in items] != [i.work_id for i in _items(engine, other.id)]
    # the queue order is random, not the score order
    assert [i.work_id for i in items] != sorted(i.work_id for i in items)


def test_random_sample_respects_filter(engine: Engine) -> None:
    """The population of a sample is the filtered frame."""
    add_works(engine, 40)
    camp = create_campaign(
        engine, name="r", strategy="random", sample_size=5, filter={"score_max": [0.5, None]}
    )
    assert camp.sample["N"] == 20
    assert all(i.inclusion_prob == pytest.approx(5 / 20) for i in _items(engine, camp.id))


@pytest.mark.parametrize("allocation", ["proportional", "equal", 2])
def test_stratified_sample(engine: Engine, allocation: str | int) -> None:
    """Stratified samples record strata, n_h and pi = n_h/N_h for each allocation."""
    scores = [0.05, 0.05, 0.2, 0.2, 0.2, 0.4, 0.6, 0.6, 0.8, 0.95, 1.0, None, 0.3]
    insert_works(
        engine,
        [
            work_row(f"W{i:02d}", score_opus=s, score_gpt=0.0 if s is not None else None)
            for i, s in enumerate(scores)
        ],
    )
    size = None if isinstance(allocation, int) else 8
    camp = create_campaign(
        engine, name="s", strategy="stratified", sample_size=size, allocation=allocation, seed=1
    )
    assert camp.is_probability_sample
    table = {s["stratum"]: s for s in camp.sample["strata"]}
    assert set(table) == {*stratum_labels(DEFAULT_BINS), "score_max[missing or out of range]"}
    assert table["score_max[0.10,0.30)"]["N_h"] == 3
    assert table["score_max[0.30,0.50)"]["N_h"] == 2  # 0.3 opens the next bin
    assert table["score_max[0.90,1.00]"]["N_h"] == 2  # 1.0 closes the last bin
    items = _items(engine, camp.id)
    assert len(items) == camp.sample["n"] == sum(s["n_h"] for s in table.values())
    for item in items:
        row = table[item.stratum]
        assert item.inclusion_prob == pytest.approx(row["n_h"] / row["N_h"])
    for row in table.values():
        assert sum(1 for i in items if i.stratum == row["stratum"]) == row["n_h"] >= 1
    if allocation == 2:
        assert table["score_max[0.10,0.30)"]["n_h"] == 2
        assert table["score_max[0.50,0.70)"]["inclusion_prob"] == 1.0


@pytest.mark.parametrize(
    ("sizes", "n", "allocation", "expected"),
    [
        ([100, 100], 10, "proportional", [5, 5]),
        ([900, 90, 10], 100, "proportional", [90, 9, 1]),
        ([990, 5, 5], 10, "proportional", [8, 1, 1]),  # at least one per stratum
        ([0, 10, 30], 4, "proportional", [0, 1, 3]),
        ([10, 10, 10], 7, "proportional", [3, 2, 2]),
        ([100, 100, 2], 12, "equal", [5, 5, 2]),  # a small stratum gives the rest away
        ([100, 100, 100], 9, "equal", [3, 3, 3]),
        ([5, 50], None, 10, [5, 10]),
    ],
)
def test_allocate(sizes: list[int], n: int | None, allocation: Any, expected: list[int]) -> None:
    """Allocation rules give the expected n_h within 0..N_h."""
    result = allocate(sizes, n, allocation)
    assert result == expected
    assert all(0 <= a <= s for a, s in zip(result, sizes, strict=True))


@pytest.mark.parametrize(
    ("sizes", "n", "allocation", "message"),
    [
        ([5, 5], 11, "proportional", "bigger than the population"),
        ([5, 5, 5], 2, "proportional", "smaller than the 3 non-empty strata"),
        ([5], None, "equal", "sample_size"),
        ([5], 2, "neyman", "unknown allocation"),
        ([5], None, 0, "at least 1"),
    ],
)
def test_allocate_errors(sizes: list[int], n: int | None, allocation: Any, message: str) -> None:
    """Impossible allocations are refused."""
    with pytest.raises(CampaignError, match=message):
        allocate(sizes, n, allocation)


def test_assign_strata_and_labels() -> None:
    """Scores fall in half-open bins, the last closed; missing go to -1."""
    scores = np.array([0.0, 0.09, 0.1, 0.5, 0.9, 1.0, math.nan, -0.1, 1.2])
    assert assign_strata(scores, DEFAULT_BINS).tolist() == [0, 0, 1, 3, 5, 5, -1, -1, -1]
    assert stratum_labels([0, 0.5, 1]) == ["score_max[0.00,0.50)", "score_max[0.50,1.00]"]


def test_lookup_list_progress_and_get_or_create(engine: Engine) -> None:
    """Lookup by name or id, listing, get-or-create, add_items, progress."""
    add_works(engine, 6)
    lead = add_user(engine, "lead", role="lead")
    camp = create_campaign(
        engine,
        name="main",
        overlap=2,
        blind=True,
        questions=["genre"],
        created_by=lead,
        description="first pass",
    )
    assert get_campaign(engine, "main") == camp
    assert get_campaign(engine, camp.id) == camp
    assert get_campaign(engine, str(camp.id)) == camp
    assert find_campaign(engine, "nope") is None
    with pytest.raises(CampaignError, match="no campaign"):
        get_campaign(engine, "nope")
    assert camp.questions == ("genre",) and camp.blind and camp.created_by == lead
    again = get_or_create_campaign(engine, "main", strategy="random", sample_size=2)
    assert again.id == camp.id and again.strategy == "score_max"
    imported = get_or_create_campaign(engine, "imported", strategy="manual")
    assert imported.n_items == 0 and imported.strategy == "manual"
    with write_session(engine) as session:
        assert add_items(session, imported.id, ["W0002", "W0001", "W0002"]) == 2
        assert add_items(session, imported.id, ["W0001", "W0003"]) == 1
    assert [i.work_id for i in _items(engine, imported.id)] == ["W0002", "W0001", "W0003"]
    listed = list_campaigns(engine)
    assert [c.name for c in listed] == ["imported", "main"]
    assert [c.n_items for c in listed] == [3, 6]
    progress = campaign_progress(engine, camp.id)
    assert progress == {
        "items": 6,
        "done": 0,
        "remaining": 6,
        "labels": 0,
        "skips": 0,
        "in_progress": 0,
        "annotators": 0,
        "gold_items": 0,
        "fraction_done": 0.0,
    }
    set_active(engine, camp.id, False)
    assert not get_campaign(engine, camp.id).active


@settings(max_examples=examples(200), deadline=None)
@given(
    sizes=st.lists(st.integers(0, 10_000), min_size=1, max_size=12),
    fraction=st.floats(0, 1),
    allocation=st.sampled_from(["proportional", "equal"]),
)
def test_allocate_properties(sizes: list[int], fraction: float, allocation: str) -> None:
    """Any feasible n is met exactly, with 1..N_h per non-empty stratum and 0 for empty ones."""
    nonempty, total = sum(1 for s in sizes if s), sum(sizes)
    assume(nonempty > 0)
    n = nonempty + round(fraction * (total - nonempty))
    result = allocate(sizes, n, allocation)
    assert sum(result) == n
    for a, s in zip(result, sizes, strict=True):
        assert (1 <= a <= s) if s else a == 0
