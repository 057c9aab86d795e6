"""The adjudicate form's rules: where it starts (the majority, or "no majority")."""

from __future__ import annotations

from typing import Any

import pytest

from labeling.review.adjudication import NO_MAJORITY, majority_prefill, side_by_side
from labeling.review.disputes import DisputeView
from labeling.schema import load_schema
from labeling.settings import DEFAULT_SCHEMA

SCHEMA = load_schema(DEFAULT_SCHEMA)
CATS, SYSTEM, DOMAIN = (SCHEMA.question(n) for n in ("categories", "about_ca_system", "domain"))
SETS = [lab for lab in CATS.labels if lab in {"Open science", "Bibliometrics"}]  # schema order


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ([["Open science"], ["Open science"]], ["Open science"]),
        ([["Open science"], ["Bibliometrics"]], None),  # no label has a majority: no majority
        # Sets compared whole (as the majority rule does): two different sets are a tie,
        # even if every annotator chose "Open science".
        ([["Open science", "Bibliometrics"], ["Open science"]], None),
        ([["Bibliometrics", "Open science"], ["Open science", "Bibliometrics"]], SETS),
        ([[], []], []),  # both said none: the majority answer is none
        ([[], ["Open science"]], None),  # one none, one label: no majority, never "none"
        ([[], [], ["Open science"]], []),
        ([["Open science"], ["Open science"], []], ["Open science"]),
        ([None, ["Bibliometrics"]], ["Bibliometrics"]),  # who did not answer is not counted
        ([None, None], None),
    ],
)
def test_multi_label_prefill(given: list[Any], expected: Any) -> None:
    answers = [{"categories": g} for g in given]
    assert majority_prefill(answers, [CATS])["categories"] == expected


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (["yes", "yes"], "yes"),
        (["yes", "no"], None),
        (["yes", "no", "yes"], "yes"),
        ([None, "no"], "no"),
        ([], None),
    ],
)
def test_single_and_binary_prefill(given: list[Any], expected: Any) -> None:
    answers = [{"about_ca_system": g} for g in given]
    assert majority_prefill(answers, [SYSTEM])["about_ca_system"] == expected


def test_side_by_side_says_no_majority_in_one_wording() -> None:
    view = DisputeView(
        work_id="W1",
        campaign_id=1,
        title="t",
        record={},
        annotators=("a", "b"),
        answers={
            "a": {"categories": [], "domain": "cross_domain", "about_ca_system": "yes"},
            "b": {
                "categories": ["Open science"],
                "domain": "cross_domain",
                "about_ca_system": "no",
            },
        },
    )
    rows = {r["question"]: r for r in side_by_side(view, [CATS, SYSTEM, DOMAIN])}
    assert rows["categories"] == {
        "question": "categories",
        "disagree": True,
        "answers": ["none", "Open science"],
        "majority": NO_MAJORITY,
    }
    assert rows["about_ca_system"]["majority"] == NO_MAJORITY == "no majority"
    assert rows["domain"] == {
        "question": "domain",
        "disagree": False,
        "answers": ["cross_domain", "cross_domain"],
        "majority": "cross_domain",
    }
