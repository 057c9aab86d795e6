"""The Monitor's rules as pure functions: bins, cumulative line, rate and ETA, flags, sentences."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from labeling.reports.monitor import summary as ms
from labeling.reports.monitor import text as mt

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # a Monday


@pytest.mark.parametrize(
    ("span", "words"),
    [
        (timedelta(0), "minute"),
        (timedelta(minutes=40), "minute"),
        (timedelta(hours=3), "5 minutes"),
        (timedelta(hours=8), "15 minutes"),
        (timedelta(days=2), "hour"),
        (timedelta(days=6), "3 hours"),
        (timedelta(days=14), "6 hours"),
        (timedelta(days=45), "day"),
        (timedelta(days=300), "week"),
        (timedelta(days=2000), "month"),
        (timedelta(days=20000), "month"),  # the coarsest step, whatever the span
    ],
)
def test_choose_step_fits_the_span(span: timedelta, words: str) -> None:
    step = ms.choose_step(T0, T0 + span)
    assert step.words == words
    if words != "month" or span.days < 1800:
        assert span.total_seconds() / step.seconds + 1 <= ms.MAX_BINS


def test_choose_step_rejects_no_bins() -> None:
    with pytest.raises(ValueError, match="max_bins"):
        ms.choose_step(T0, T0, 0)


def _activity(*rows: tuple[timedelta, str, int]) -> pd.DataFrame:
    return pd.DataFrame([(T0 + d, k, n) for d, k, n in rows], columns=["at", "kind", "n"])


def test_first_day_in_minutes_is_a_line_from_zero() -> None:
    """Four labels in the first minutes: a line per measure, starting at 0, minute bins."""
    act = _activity(
        (timedelta(minutes=0), "labelled", 1),
        (timedelta(minutes=3), "labelled", 2),
        (timedelta(minutes=3), "validated", 1),
        (timedelta(minutes=7), "labelled", 1),
    )
    out = ms.cumulative_progress(act)
    assert set(out["step"]) == {"minute"}
    lab = out[out["measure"] == "labelled"].reset_index(drop=True)
    assert lab["works"].iloc[0] == 0  # one empty bin first
    assert lab["period"].iloc[0] == pd.Timestamp("2026-03-02 08:59")
    assert lab["works"].iloc[-1] == 4 and lab["new"].sum() == 4
    assert len(lab) == 9  # 08:59 .. 09:07, empty minutes included
    assert lab["works"].is_monotonic_increasing
    assert out[out["measure"] == "validated"]["works"].iloc[-1] == 1
    assert out[out["measure"] == "disputed"]["works"].max() == 0


@pytest.mark.parametrize(("days", "words"), [(1 / 48, "minute"), (20, "day"), (200, "week")])
def test_cumulative_totals_whatever_the_bin(days: float, words: str) -> None:
    rng = np.random.default_rng(0)
    offsets = np.sort(rng.uniform(0, days * 86400, 200))
    act = pd.DataFrame(
        {"at": [T0 + timedelta(seconds=float(s)) for s in offsets], "kind": "labelled", "n": 1}
    )
    out = ms.cumulative_progress(act)
    lab = out[out["measure"] == "labelled"]
    assert set(out["step"]) == {words}
    assert lab["works"].iloc[-1] == 200 and lab["works"].iloc[0] == 0
    assert len(lab) <= ms.MAX_BINS + 1


def test_cumulative_of_nothing_is_empty() -> None:
    assert ms.cumulative_progress(pd.DataFrame(columns=["at", "kind", "n"])).empty


@pytest.mark.parametrize(
    ("k", "lo", "hi"), [(0, 0.0, 3.689), (1, 0.0253, 5.572), (10, 4.795, 18.39)]
)
def test_poisson_interval_matches_the_exact_tables(k: int, lo: float, hi: float) -> None:
    got = ms.poisson_interval(k)
    assert got == pytest.approx((lo, hi), abs=2e-3)


def test_poisson_interval_refuses_a_negative_count() -> None:
    with pytest.raises(ValueError, match="negative"):
        ms.poisson_interval(-1)


@pytest.mark.parametrize(
    ("first_min", "counted", "recent", "remaining", "now_min", "per_hour", "eta"),
    [
        (0, 3, 3, 30, 60, 3.0, 10.0),  # 3 labels in the hour since the first: 10 h for 30
        (0, 4, 4, 8, 120, 2.0, 4.0),  # 4 labels, 2 h ago
        (0, 2, 2, 0, 60, 2.0, 0.0),  # nothing left
    ],
)
def test_rate_and_eta(
    first_min: float,
    counted: int,
    recent: int,
    remaining: int,
    now_min: float,
    per_hour: float,
    eta: float,
) -> None:
    got = ms.rate_and_eta(
        T0 + timedelta(minutes=first_min),
        counted,
        recent,
        remaining,
        T0 + timedelta(minutes=now_min),
    )
    assert got["per_hour"] == pytest.approx(per_hour)
    assert got["eta_hours"] == pytest.approx(eta)
    assert got["lo"] < got["per_hour"] < got["hi"]
    if remaining:
        assert got["eta_lo"] < got["eta_hours"] < got["eta_hi"]
    assert got["n"] == recent


def test_rate_uses_the_trailing_week_only() -> None:
    """50 labels long ago, 7 in the last week: 7 labels over 7 days."""
    got = ms.rate_and_eta(T0, 57, 7, 10, T0 + timedelta(days=21))
    assert got["n"] == 7
    assert got["hours"] == pytest.approx(7 * 24)
    assert got["per_hour"] == pytest.approx(7 / (7 * 24))


def test_no_label_in_the_window_gives_no_eta() -> None:
    got = ms.rate_and_eta(T0, 1, 0, 5, T0 + timedelta(days=30))
    assert got["n"] == 0 and got["per_hour"] == 0 and got["eta_hours"] is None
    assert "no ETA" in mt.rate_sentence(got)


def test_no_labels_at_all() -> None:
    got = ms.rate_and_eta(None, 0, 0, 5, T0)
    assert got["per_hour"] is None
    assert mt.rate_sentence(got) == "No labels yet: no rate and no ETA."


@pytest.mark.parametrize(
    ("span", "grain"),
    [
        (None, "minute"),
        (timedelta(hours=2), "minute"),
        (timedelta(days=3), "hour"),
        (timedelta(days=40), "day"),
        (timedelta(days=400), "day"),
    ],
)
def test_sql_grain_is_never_coarser_than_the_bins(span: timedelta | None, grain: str) -> None:
    last = None if span is None else T0 + span
    assert ms.sql_grain(T0 if span is not None else None, last) == grain
    if span is not None:
        step = ms.choose_step(T0, T0 + span)
        assert {"minute": 60, "hour": 3600, "day": 86400}[grain] <= step.seconds


@pytest.mark.parametrize(
    ("alpha", "level"),
    [
        (None, "undefined"),
        (float("nan"), "undefined"),
        (-0.2, "unreliable"),
        (0.666, "unreliable"),
        (0.667, "tentative"),
        (0.79, "tentative"),
        (0.8, "reliable"),
        (1.0, "reliable"),
    ],
)
def test_alpha_level_thresholds(alpha: float | None, level: str) -> None:
    assert ms.alpha_level(alpha) == level


def test_question_reliability_worst_first_and_questions_only() -> None:
    rows = pd.DataFrame(
        {
            "question": ["a", "a", "b", "c", "d"],
            "label": ["", "x", "", "", ""],
            "alpha": [0.9, 0.1, 0.5, 0.7, None],
            "alpha_lo": [0.8, 0, 0.3, 0.6, None],
            "alpha_hi": [1, 0.2, 0.6, 0.8, None],
            "n_works": 10,
            "n_labels": [20, 20, 20, 20, 0],
        }
    )
    out = ms.question_reliability(rows)
    assert list(out["question"]) == ["b", "c", "a"]  # no per-label row, no unlabelled question
    assert list(out["level"]) == ["unreliable", "tentative", "reliable"]
    assert "1 of 3 question(s) below alpha 0.667" in mt.reliability_sentence(out)


@pytest.mark.parametrize("n", [9, 10, 30, 101])
def test_median_interval_covers(n: int) -> None:
    """The order-statistic interval holds the median of its sample, and covers ~95%."""
    rng = np.random.default_rng(n)
    hits = 0
    for _ in range(400):
        x = rng.exponential(1.0, n)
        med, lo, hi = ms.median_interval(x)
        assert lo <= med <= hi
        hits += lo <= np.log(2) <= hi
    assert hits / 400 >= 0.92


def test_median_interval_too_few() -> None:
    assert ms.median_interval([]) == (None, None, None)
    med, lo, hi = ms.median_interval([1, 2, 3, 4, 5])  # 5 values cannot give 95%
    assert med == 3 and lo is None and hi is None


@pytest.mark.parametrize(
    ("lo", "hi", "n", "others", "flag"),
    [
        (2, 4, 30, 20, "unusually fast"),
        (11, 30, 30, 20, None),  # the interval reaches above half the others' median
        (45, 60, 30, 20, "unusually slow"),
        (2, 4, 4, 20, None),  # too few timed works
        (None, None, 30, 20, None),
        (2, 4, 30, None, None),  # nobody else
    ],
)
def test_speed_flag(
    lo: float | None, hi: float | None, n: int, others: float | None, flag: str | None
) -> None:
    assert ms.speed_flag(lo, hi, n, others) == flag


def _annotators(**cols: list) -> pd.DataFrame:
    base = {
        "annotator": ["a", "b", "c"],
        "others": [0.95, 0.93, 0.60],
        "others_n": [200, 200, 200],
        "gold": [None, None, None],
        "gold_n": [0, 0, 0],
        "median_seconds": [30, 32, 29],
        "median_lo": [28, 30, 27],
        "median_hi": [33, 35, 31],
        "time_n": [50, 50, 50],
        "others_median": [31, 30, 31],
    }
    base.update(cols)
    return pd.DataFrame(base)


def test_attention_flags_the_careless_with_n() -> None:
    out = ms.attention(_annotators())
    assert list(out["annotator"]) == ["c"]
    assert out["reason"].iloc[0] == "far from the others' answers"
    assert out["n"].iloc[0] == 200 and out["value"].iloc[0].startswith("60% [")


def test_attention_small_n_is_not_flagged() -> None:
    out = ms.attention(_annotators(others=[0.95, 0.93, 0.75], others_n=[200, 200, 4]))
    assert out.empty  # 3 of 4: the interval [30%, 95%] still reaches the others' 94%


def test_attention_gold_and_speed() -> None:
    out = ms.attention(
        _annotators(
            others=[0.9, 0.9, 0.9],
            gold=[1.0, 1.0, 0.3],
            gold_n=[60, 60, 60],
            median_seconds=[30, 5, 29],
            median_lo=[28, 4, 27],
            median_hi=[33, 6, 31],
        )
    )
    assert set(zip(out["annotator"], out["reason"], strict=True)) == {
        ("c", "far from the gold checks"),
        ("b", "unusually fast"),
    }


def test_annotator_speed_uses_the_others() -> None:
    times = pd.DataFrame(
        {"annotator": ["a"] * 20 + ["b"] * 20, "seconds": list(range(1, 21)) + [100.0] * 20}
    )
    out = ms.annotator_speed(times).set_index("annotator")
    assert out.loc["a", "others_median"] == 100 and out.loc["b", "others_median"] == 10.5
    assert out.loc["a", "time_n"] == 20


@pytest.mark.parametrize(
    ("hours", "text"), [(None, "unbounded"), (0.25, "15 min"), (3.24, "3.2 h"), (72, "3.0 days")]
)
def test_fmt_hours(hours: float | None, text: str) -> None:
    assert mt.fmt_hours(hours) == text


def test_empty_state_sentences() -> None:
    assert (
        mt.no_validated_sentence(0, 153) == "No validated works yet: 0 of 153 works in this "
        "campaign."
    )
    assert mt.teachers_sentence(0, 153) == mt.no_validated_sentence(0, 153)
    assert "against 12 validated works of 153" in mt.teachers_sentence(12, 153)
    assert mt.attention_sentence(pd.DataFrame(), 0) == "No labels yet: nobody to look at."
    assert mt.pairs_sentence({"pairs_left_out": [], "pairs": []}).startswith("No pair")
    assert mt.estimates_sentence({"estimable": False, "reason": "not a sample"}) == "not a sample"
