"""Each annotator against the others' majority on the same works (leave one out)."""

from __future__ import annotations

import orjson
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from labeling.reports.monitor import summary as ms
from labeling.reports.monitor.peers import peer_matches
from labeling.stats.majority import majority

QUESTIONS = ["genre", "cats"]


def _rows(labels: list[tuple[int, int, int | None, tuple[int, ...] | None, bool]]) -> pd.DataFrame:
    """label_rows' shape from (work, annotator, genre, cats, skipped) tuples."""
    rows = []
    for work, who, genre, cats, skipped in labels:
        answers = {} if skipped else {"genre": None if genre is None else f"g{genre}"}
        if not skipped and cats is not None:
            answers["cats"] = [f"c{c}" for c in sorted(set(cats))]
        rows.append(
            {
                "work_id": f"W{work}",
                "annotator": f"a{who}",
                "skipped": skipped,
                "answers": None if skipped else orjson.dumps(answers).decode(),
                "created_at": pd.Timestamp("2026-12-01", tz="UTC"),
                "gold_item": False,
            }
        )
    cols = ["work_id", "annotator", "skipped", "answers", "created_at", "gold_item"]
    df = pd.DataFrame(rows, columns=cols).drop_duplicates(["work_id", "annotator"], keep="last")
    df = df.reset_index(drop=True)
    df.attrs["questions"] = QUESTIONS
    return df


def _brute(rows: pd.DataFrame) -> set[tuple[str, str, str, bool]]:
    """The same comparison, one answer at a time, with majority.majority."""
    out = set()
    live = rows[~rows["skipped"].astype(bool)]
    parsed = [orjson.loads(a) for a in live["answers"]]
    for i, (w, who) in enumerate(zip(live["work_id"], live["annotator"], strict=True)):
        for q in QUESTIONS:
            mine = parsed[i].get(q)
            if mine is None:
                continue
            others = [
                parsed[j].get(q)
                for j, w2 in enumerate(live["work_id"])
                if w2 == w and j != i and parsed[j].get(q) is not None
            ]
            top = majority(others)
            if top is not None:
                out.add((who, w, q, top == majority([mine])))
    return out


label = st.tuples(
    st.integers(0, 4),
    st.integers(0, 4),
    st.one_of(st.none(), st.integers(0, 2)),
    st.one_of(st.none(), st.lists(st.integers(0, 2), max_size=3).map(tuple)),
    st.booleans(),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(label, max_size=25))
def test_peer_matches_equal_one_answer_at_a_time(labels: list) -> None:
    """Vectorised leave-one-out equals the plain loop: majority of the others, no tie-break."""
    rows = _rows(labels)
    got = peer_matches(rows)
    seen = set(
        zip(
            got["annotator"],
            got["work_id"],
            got["question"],
            got["match"].astype(bool),
            strict=True,
        )
    )
    assert len(seen) == len(got)
    assert seen == _brute(rows)


def test_the_odd_one_out_is_flagged_and_two_are_not_told_apart() -> None:
    """Three agree and one does not: that one is far from the others; with two, nobody is."""
    labels = []
    for w in range(40):
        for who in range(3):
            labels.append((w, who, w % 3, (w % 2,), False))
        labels.append((w, 3, (w + 1) % 3, (w % 2,), False))
    rows = _rows(labels)
    matches = peer_matches(rows)
    share = matches.groupby("annotator")["match"].mean()
    assert share["a3"] < 0.6 < share["a0"]
    pooled = matches.groupby("annotator")["match"].agg(["mean", "size"])
    table = pd.DataFrame(
        {
            "annotator": pooled.index,
            "others": pooled["mean"].to_numpy(),
            "others_n": pooled["size"].to_numpy(),
            "time_n": 0,
            "median_seconds": None,
            "median_lo": None,
            "median_hi": None,
            "others_median": None,
        }
    )
    flagged = ms.attention(table)
    assert list(flagged["annotator"]) == ["a3"]
    assert flagged["reason"].iloc[0] == "far from the others' answers"
    # Two annotators only: each is compared with the other, so both score alike.
    two = peer_matches(
        _rows([(w, who, (w + who) % 2, None, False) for w in range(20) for who in (0, 1)])
    )
    by = two.groupby("annotator")["match"].mean()
    assert by["a0"] == by["a1"] == 0.0
