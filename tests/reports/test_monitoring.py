"""Monitoring numbers and disputes: pure reshaping (parametrised) and the thin DB glue."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
import pytest
from sqlalchemy import Engine, select

from db.engine import read_session
from db.models import Work
from labeling.reports import monitoring as mon
from labeling.reports.tables import (
    agreement_table,
    brier_table,
    estimate_table,
    fmt_ci,
    machine_table,
    pairs_table,
    with_ci,
)
from labeling.review import disputes
from labeling.review.campaigns import create_campaign
from labeling.review.labels import LabelSubmission, submit_label
from labeling.review.queue import claim_next
from labeling.review.validation import ValidationError
from labeling.schema import Question, Schema
from labeling.vocabulary import STATUS_DISPUTED, STATUS_VALIDATED
from tests.factories import add_user, add_works, answers_for

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # a Monday
MULTI = Question("cats", "multi", ("a", "b", "c"))
SINGLE = Question("genre", "single", ("x", "y", "z"))
BINARY = Question("ca", "binary", ("yes", "no"))
NONE = {"genre": None, "ca": None}  # questions nobody answered


def lab(
    work: str,
    who: str,
    answers: dict[str, Any] | None = None,
    *,
    version: int = 1,
    skipped: bool = False,
    reason: str | None = None,
    flagged: bool = False,
    note: str | None = None,
    ms: int | None = 1000,
    at: datetime = T0,
    gold: bool = False,
) -> dict[str, Any]:
    """One row of a labels frame (LABEL_COLUMNS)."""
    return {
        "label_id": 0,
        "work_id": work,
        "user_id": hash(who) % 1000,
        "annotator": who,
        "version": version,
        "answers": answers or {},
        "skipped": skipped,
        "skip_reason": reason,
        "flagged": flagged,
        "note": note,
        "time_on_item_ms": ms,
        "created_at": at,
        "gold_item": gold,
    }


def frame(*rows: dict[str, Any]) -> pd.DataFrame:
    """A labels frame from rows."""
    return pd.DataFrame(list(rows), columns=mon.LABEL_COLUMNS)


def events(*rows: tuple[str, str | None, str, datetime]) -> pd.DataFrame:
    """A status events frame from (work, from, to, when)."""
    return pd.DataFrame(list(rows), columns=mon.EVENT_COLUMNS)


# ------------------------------------------------------------------ progress


@pytest.mark.parametrize(
    ("freq", "expected"),
    [
        ("D", [(1, 1, 1, 0), (1, 0, 0, 1)]),
        ("W", [(2, 1, 1, 1)]),
    ],
)
def test_progress_table(freq: str, expected: list[tuple[int, ...]]) -> None:
    """Counts per day and per week; edits and re-adjudications are not recounted."""
    labels = frame(
        lab("W1", "ann", {"genre": "x"}),
        lab("W1", "ann", {"genre": "y"}, version=2, at=T0 + timedelta(days=1)),  # an edit
        lab("W2", "ann", skipped=True, reason="no_abstract"),
        lab("W2", "bob", {"genre": "x"}, at=T0 + timedelta(days=1)),
    )
    ev = events(
        ("W1", "human_in_review", STATUS_VALIDATED, T0),
        ("W1", STATUS_VALIDATED, STATUS_VALIDATED, T0),  # re-adjudication: not counted again
        ("W2", "human_in_review", STATUS_DISPUTED, T0 + timedelta(days=1)),
    )
    table = mon.progress_table(labels, ev, freq)
    got = [tuple(r) for r in table[["labelled", "skipped", "validated", "disputed"]].values]
    assert got == expected
    assert table["labelled_total"].iloc[-1] == 2
    assert table["period"].is_monotonic_increasing


def test_progress_table_empty_and_long() -> None:
    """Empty inputs give an empty table; the long form has every measure."""
    empty = mon.progress_table(frame(), events())
    assert empty.empty and "validated_total" in empty.columns
    assert mon.progress_long(empty).empty
    table = mon.progress_table(frame(lab("W1", "ann", {"genre": "x"})), events())
    long = mon.progress_long(table)
    assert set(long["measure"]) == {"labelled", "skipped", "validated", "disputed"}
    assert long.loc[long["measure"] == "labelled", "works"].tolist() == [1]


# ------------------------------------------------------------------ agreement with final


@pytest.mark.parametrize(
    ("given", "truth", "match"),
    [
        (["a", "b"], ["b", "a"], True),
        (["a"], ["a", "b"], False),
        ([], [], True),
        ("x", "x", True),
        ("yes", "no", False),
    ],
)
def test_answer_matches_compares_sets_and_values(given: Any, truth: Any, match: bool) -> None:
    """Multi answers compare as sets, others by value."""
    labels = frame(lab("W1", "ann", {"q": given}))
    out = mon.answer_matches(labels, {"W1": {"q": truth}})
    assert out["match"].tolist() == [match]


def test_answer_matches_ignores_skips_superseded_and_unvalidated() -> None:
    """Only current, non-skipped labels on validated works count."""
    labels = frame(
        lab("W1", "ann", {"genre": "y"}),
        lab("W1", "ann", {"genre": "x", "ca": "no"}, version=2),
        lab("W2", "ann", skipped=True, reason="other"),
        lab("W3", "ann", {"genre": "x"}),  # not validated
        lab("W4", "bob", {"genre": "z"}, gold=True),
    )
    finals = {"W1": {"genre": "x", "ca": "yes"}, "W2": {"genre": "x"}, "W4": {"genre": "x"}}
    out = mon.answer_matches(labels, finals)
    assert sorted(zip(out["work_id"], out["question"], out["match"], strict=True)) == [
        ("W1", "ca", False),
        ("W1", "genre", True),
        ("W4", "genre", False),
    ]
    assert out.loc[out["work_id"] == "W4", "gold_item"].tolist() == [True]
    only = mon.answer_matches(labels, finals, questions=["genre"])
    assert set(only["question"]) == {"genre"}


@pytest.mark.parametrize(
    ("values", "share", "n"),
    [
        ([True, True, False, False], 0.5, 4),
        ([True], 1.0, 1),
        ([], None, 0),
    ],
)
def test_share_has_interval_and_n(values: list[bool], share: float | None, n: int) -> None:
    """A share carries its Wilson interval and n (None when n is 0)."""
    out = mon.share(pd.Series(values, dtype=bool))
    assert (out["share"], out["n"]) == (share, n)
    if n:
        assert out["lo"] <= out["share"] <= out["hi"]
    else:
        assert out["lo"] is None and out["hi"] is None


def test_agreement_by_groups() -> None:
    """Agreement is grouped with its n."""
    matches = pd.DataFrame(
        [
            ("ann", "W1", "q", T0, False, True),
            ("ann", "W2", "q", T0, False, False),
            ("bob", "W1", "q", T0, False, True),
        ],
        columns=mon.MATCH_COLUMNS,
    )
    out = mon.agreement_by(matches, ["annotator"])
    assert out[["annotator", "share", "n"]].values.tolist() == [["ann", 0.5, 2], ["bob", 1.0, 1]]
    assert mon.agreement_by(matches.iloc[0:0], ["annotator"]).empty


def test_annotator_table() -> None:
    """Volume, median time, throughput, agreement and gold accuracy per annotator."""
    labels = frame(
        lab("W1", "ann", {"genre": "x"}, ms=2000),
        lab("W2", "ann", {"genre": "y"}, ms=4000, at=T0 + timedelta(minutes=10)),
        lab("W3", "ann", skipped=True, reason="no_abstract", ms=None, at=T0 + timedelta(hours=2)),
        lab("W4", "ann", {"genre": "x"}, flagged=True, note="?", ms=9000, gold=True),
        lab("W1", "bob", {"genre": "x"}, ms=1000),
    )
    finals = {"W1": {"genre": "x"}, "W2": {"genre": "x"}, "W4": {"genre": "z"}}
    table = mon.annotator_table(labels, finals).set_index("annotator")
    ann = table.loc["ann"]
    assert (ann["labels"], ann["skips"], ann["flags"]) == (3, 1, 1)
    assert (ann["median_seconds"], ann["time_n"]) == (4.0, 3)
    assert (ann["active_hours"], ann["per_hour"]) == (2, 2.0)
    assert (ann["agree"], ann["agree_n"]) == (0.5, 2)  # W1 yes, W2 no; gold W4 apart
    assert (ann["gold"], ann["gold_n"], ann["gold_works"]) == (0.0, 1, 1)
    bob = table.loc["bob"]
    assert (bob["agree"], bob["agree_n"], bob["gold_n"]) == (1.0, 1, 0)
    assert pd.isna(bob["gold"])
    assert mon.annotator_table(frame(), {}).empty


def test_reasons_table() -> None:
    """Skip reasons and flag notes of current labels, with counts and shares."""
    labels = frame(
        lab("W1", "ann", skipped=True, reason="no_abstract"),
        lab("W2", "ann", skipped=True, reason="no_abstract"),
        lab("W3", "bob", skipped=True, reason="other"),
        lab("W4", "bob", {"genre": "x"}, flagged=True, note="  "),
        lab("W5", "bob", {"genre": "x"}, flagged=True, note="scope?"),
        lab("W5", "bob", {"genre": "x"}, version=2, flagged=True, note="scope?"),
    )
    out = mon.reasons_table(labels)
    assert out[["kind", "reason", "n"]].values.tolist() == [
        ["skip", "no_abstract", 2],
        ["skip", "other", 1],
        ["flag", "(no note)", 1],
        ["flag", "scope?", 1],
    ]
    assert set(out["of"]) == {5}
    assert out["share"].iloc[0] == pytest.approx(0.4)
    assert mon.reasons_table(frame()).empty


def test_drift_table() -> None:
    """Agreement per week, pooled and per annotator, gold left out."""
    rows = [
        ("ann", "W1", "q", T0, False, True),
        ("ann", "W2", "q", T0 + timedelta(days=7), False, False),
        ("bob", "W2", "q", T0 + timedelta(days=8), False, True),
        ("bob", "W3", "q", T0, True, False),
    ]  # gold: left out
    out = mon.drift_table(pd.DataFrame(rows, columns=mon.MATCH_COLUMNS), "W")
    pooled = out[out["annotator"] == mon.ALL_ANNOTATORS]
    assert pooled[["share", "n"]].values.tolist() == [[1.0, 1], [0.5, 2]]
    assert len(out[out["annotator"] == "bob"]) == 1
    assert mon.drift_table(pd.DataFrame(columns=mon.MATCH_COLUMNS)).empty


# ------------------------------------------------------------------ report tables


def test_agreement_and_pairs_tables() -> None:
    """Agreement rows per question and label; pair kappas weighted by n."""
    entry = {
        "n_works": 10,
        "n_labels": 20,
        "krippendorff_alpha": 0.6,
        "alpha_ci": [0.4, 0.8],
        "fleiss_kappa": 0.59,
        "kappa_ci": None,
        "gwet_ac1": 0.7,
        "percent_agreement": 0.8,
    }
    report = {
        "questions": {
            "cats": {**entry, "labels": {"a": {**entry, "alpha_ci": None}}},
            "ca": {**entry, "labels": {}},
        },
        "pairs": [
            {"a": "ann", "b": "bob", "question": "cats", "n": 10, "cohen_kappa": 0.5},
            {"a": "ann", "b": "bob", "question": "ca", "n": 30, "cohen_kappa": 0.9},
        ],
    }
    table = agreement_table(report)
    assert table[["question", "label"]].values.tolist() == [["cats", ""], ["cats", "a"], ["ca", ""]]
    assert table.iloc[0][["alpha_lo", "alpha_hi", "n_works"]].tolist() == [0.4, 0.8, 10]
    assert pd.isna(table.iloc[1]["alpha_lo"])
    pairs = pairs_table(report)
    assert pairs[["a", "b", "n"]].values.tolist() == [["ann", "bob", 40], ["bob", "ann", 40]]
    assert pairs["kappa"].tolist() == pytest.approx([0.8, 0.8])  # weighted by n
    assert pairs_table(report, "cats")["kappa"].tolist() == pytest.approx([0.5, 0.5])
    assert pairs_table({"pairs": []}).empty


def test_machine_brier_and_estimate_tables() -> None:
    """Machine, Brier and estimate reports flatten with their n."""
    metrics = {
        "n": 5,
        "precision": {"estimate": 0.5, "lo": 0.1, "hi": 0.9, "n": 2},
        "recall": {"estimate": 1.0, "lo": 0.3, "hi": 1.0, "n": 1},
        "f1": 0.67,
        "f1_n": 3,
    }
    rel = {"n": 5, "positives": 1, "brier": 0.2, "bins": []}
    report = {
        "questions": {
            "ca": {
                "systems": {"codex": {"labels": {"yes": metrics}}},
                "calibration": {"codex": {"pooled": rel, "labels": {"yes": rel}}},
            }
        }
    }
    m = machine_table(report)
    assert m.iloc[0][["system", "label", "precision", "precision_n", "recall_n"]].tolist() == [
        "codex",
        "yes",
        0.5,
        2,
        1,
    ]
    b = brier_table(report)
    assert b[["label", "brier", "n"]].values.tolist() == [["(all labels)", 0.2, 5], ["yes", 0.2, 5]]
    est = {
        "questions": {
            "ca": {
                "labels": {
                    "yes": {
                        "overall": {
                            "estimate": 0.3,
                            "lo": 0.1,
                            "hi": 0.5,
                            "n": 12,
                            "method": "stratified",
                        }
                    }
                }
            }
        }
    }
    e = estimate_table(est)
    assert e.iloc[0][["prevalence", "lo", "hi", "n"]].tolist() == [0.3, 0.1, 0.5, 12]
    assert estimate_table({"estimable": False, "questions": {}}).empty


@pytest.mark.parametrize(
    ("args", "text"),
    [
        ((0.8234, 0.7, 0.9), "0.82 [0.70, 0.90]"),
        ((0.5, None, None), "0.50"),
        ((None, None, None), "—"),
        ((float("nan"), 0.1, 0.2), "—"),
    ],
)
def test_fmt_ci(args: tuple[Any, ...], text: str) -> None:
    """Estimates print with their interval, or a dash when undefined."""
    assert fmt_ci(*args) == text


def test_with_ci_replaces_columns() -> None:
    """with_ci folds three columns into one text column in place."""
    df = pd.DataFrame({"who": ["a"], "share": [0.5], "lo": [0.2], "hi": [0.8], "n": [4]})
    out = with_ci(df, "agreement", "share", "lo", "hi")
    assert list(out.columns) == ["who", "agreement", "n"]
    assert out["agreement"].tolist() == ["0.50 [0.20, 0.80]"]


# ------------------------------------------------------------------ disputes (pure)


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        (
            [
                {"cats": ["a"], "genre": "x", "ca": "yes"},
                {"cats": ["a", "b"], "genre": "y", "ca": "yes"},
            ],
            {"cats": None, "genre": None, "ca": "yes"},  # ["a"] against ["a", "b"]: a tie
        ),
        (
            [
                {"cats": ["b"], "genre": "x"},
                {"cats": ["b", "c"], "genre": "x"},
                {"cats": ["c"], "genre": "z"},
            ],
            {"cats": None, "genre": "x", "ca": None},  # three different sets
        ),
        ([], {"cats": None, "genre": None, "ca": None}),
        ([{"cats": ["b", "a"]}, {"cats": ["a", "b"]}, {"cats": []}], {"cats": ["a", "b"], **NONE}),
    ],
)
def test_majority_answers(answers: list[dict[str, Any]], expected: dict[str, Any]) -> None:
    """Strict majority per question (labeling.stats.majority); multi as sets; ties give None."""
    assert disputes.majority_answers(answers, [MULTI, SINGLE, BINARY]) == expected


@pytest.mark.parametrize(
    ("answers", "missing"),
    [
        ({"cats": [], "genre": "x", "ca": "no"}, []),
        ({"cats": None, "genre": None, "ca": "yes"}, ["genre"]),
        ({}, ["genre", "ca"]),
    ],
)
def test_unanswered(answers: dict[str, Any], missing: list[str]) -> None:
    """Only single and binary questions can be unanswered."""
    assert disputes.unanswered(answers, [MULTI, SINGLE, BINARY]) == missing


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (["a", "b"], "a, b"),
        ([], "none"),
        (None, "—"),
        ("yes", "yes"),
    ],
)
def test_fmt_answer(value: Any, text: str) -> None:
    """Answers print as text."""
    assert disputes.fmt_answer(value) == text


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("W1, w2\nW1", ["W1", "W2"]),
        ("  ", []),
        ("W3;W4 W5", ["W3", "W4", "W5"]),
    ],
)
def test_parse_work_ids(text: str, ids: list[str]) -> None:
    """Typed ids are split, upper-cased and deduplicated."""
    assert disputes.parse_work_ids(text) == ids


def test_dispute_table_and_disagreeing() -> None:
    """The side-by-side table names annotators and marks disagreement."""
    view = disputes.DisputeView(
        "W1",
        1,
        "t",
        {},
        ("ann", "bob"),
        {"ann": {"cats": ["a"], "genre": "x"}, "bob": {"cats": ["a"], "genre": "y"}},
    )
    assert disputes.disagreeing(view.answers, ["cats", "genre"]) == ["genre"]
    table = disputes.dispute_table(view, [MULTI, SINGLE])
    assert list(table.columns) == ["question", "ann", "bob", "disagree", "majority"]
    assert table.values.tolist() == [
        ["cats", "a", "a", False, "a"],
        ["genre", "x", "y", True, "no majority"],
    ]


# ------------------------------------------------------------------ database


def _label(engine: Engine, schema: Schema, cid: int, uid: int, variant: int, **kw: Any) -> str:
    """Claim the next work for a user and label (or skip) it."""
    claim = claim_next(engine, cid, uid)
    assert claim is not None
    submit_label(
        engine,
        LabelSubmission(
            campaign_id=cid,
            work_id=claim.work_id,
            user_id=uid,
            answers=answers_for(schema, variant),
            schema_hash=schema.hash,
            scores_visible=False,
            model_version="m",
            time_on_item_ms=1500,
            submission_id=f"{cid}-{uid}-{claim.work_id}",
            **kw,
        ),
        schema=schema,
    )
    return claim.work_id


@pytest.fixture
def disputed(engine: Engine, schema: Schema) -> dict[str, Any]:
    """Campaign c (overlap 2): W0001 disputed, W0002 validated, W0003 skipped by b; a lead."""
    add_works(engine, 4)
    a, b = add_user(engine, "ann"), add_user(engine, "bob")
    lead = add_user(engine, "lea", role="lead")
    camp = create_campaign(engine, name="c", overlap=2)
    other = create_campaign(engine, name="other", overlap=1)
    w1 = _label(engine, schema, camp.id, a, 0)
    _label(engine, schema, camp.id, b, 1, flagged=True, note="hm")
    w2 = _label(engine, schema, camp.id, a, 0)
    _label(engine, schema, camp.id, b, 0)
    w3 = _label(engine, schema, camp.id, b, 0, skipped=True, skip_reason="no_abstract")
    return {
        "engine": engine,
        "camp": camp,
        "other": other,
        "lead": lead,
        "ann": a,
        "w1": w1,
        "w2": w2,
        "w3": w3,
    }


def _status(engine: Engine, wid: str) -> Any:
    """A work's status and gold flag."""
    with read_session(engine) as session:
        return session.execute(select(Work.status, Work.is_gold).where(Work.id == wid)).one()


def test_disputed_works(disputed: dict[str, Any], schema: Schema) -> None:
    """Disputed works come with every annotator's answers, per campaign or all."""
    engine, camp = disputed["engine"], disputed["camp"]
    assert _status(engine, disputed["w1"]).status == STATUS_DISPUTED
    for campaign in (camp.id, None):
        views = disputes.disputed_works(engine, campaign)
        assert [v.work_id for v in views] == [disputed["w1"]]
        view = views[0]
        assert view.annotators == ("ann", "bob") and view.campaign_id == camp.id
        assert view.answers == {"ann": answers_for(schema, 0), "bob": answers_for(schema, 1)}
        assert view.n_labels == 2 and view.title == f"Title of {disputed['w1']}"
    assert disputes.disputed_works(engine, disputed["other"].id) == []


def test_mark_and_unmark_gold(disputed: dict[str, Any]) -> None:
    """Gold needs a lead and validated works, all or none; unmark undoes it."""
    engine, lead = disputed["engine"], disputed["lead"]
    w1, w2 = disputed["w1"], disputed["w2"]
    assert _status(engine, w2).status == STATUS_VALIDATED
    with pytest.raises(ValidationError, match="only validated works"):
        disputes.mark_gold(engine, [w2, w1], lead)
    assert not _status(engine, w2).is_gold  # all or nothing
    with pytest.raises(ValidationError, match="only leads"):
        disputes.mark_gold(engine, [w2], disputed["ann"])
    with pytest.raises(ValidationError, match="unknown work W404"):
        disputes.mark_gold(engine, [w2, "W404"], lead)
    assert disputes.mark_gold(engine, [w2, w2], lead) == 1
    assert _status(engine, w2).is_gold
    assert disputes.mark_gold(engine, [w2], lead) == 0
    assert disputes.mark_gold(engine, [], lead) == 0
    table = disputes.validated_works(engine, disputed["camp"].id)
    assert table.set_index("work_id").loc[w2, "is_gold"]
    assert disputes.unmark_gold(engine, [w2], lead) == 1
    assert not _status(engine, w2).is_gold
    assert disputes.work_status(engine, w2) == STATUS_VALIDATED
    assert disputes.work_status(engine, "W404") is None
    assert w2 in set(disputes.validated_works(engine)["work_id"])


def test_db_monitoring(disputed: dict[str, Any]) -> None:
    """The DB loaders feed the pure tables; an empty campaign gives empty tables."""
    engine, cid = disputed["engine"], disputed["camp"].id
    progress = mon.progress_over_time(engine, cid)
    assert progress[["labelled", "skipped", "validated", "disputed"]].sum().tolist() == [4, 1, 1, 1]
    stats = mon.annotator_stats(engine, cid).set_index("annotator")
    assert stats.loc["bob", ["labels", "skips", "flags"]].tolist() == [2, 1, 1]
    assert stats.loc["ann", "median_seconds"] == 1.5
    assert stats.loc["ann", "agree"] == 1.0 and stats.loc["ann", "agree_n"] == 6
    reasons = mon.skip_and_flag_reasons(engine, cid)
    assert reasons[["kind", "reason", "n"]].values.tolist() == [
        ["skip", "no_abstract", 1],
        ["flag", "hm", 1],
    ]
    drift = mon.drift(engine, cid)
    assert drift.loc[drift["annotator"] == mon.ALL_ANNOTATORS, "n"].sum() == 12
    empty = disputed["other"].id
    assert mon.progress_over_time(engine, empty).empty
    assert mon.annotator_stats(engine, empty).empty
    assert mon.drift(engine, empty).empty


def test_reliability_and_confusion_tables_from_a_report() -> None:
    from labeling.reports.tables import confusion_tables, reliability_table

    report = {"questions": {
        "genre": {
            "systems": {"codex": {"confusion": {
                "rows": ["a", "b"], "columns": ["a", "b", "(no call)"],
                "matrix": [[3, 1, 0], [0, 2, 1]], "n": 7}}},
            "calibration": {"codex": {"pooled": {"bins": [
                {"bin_lo": 0.0, "bin_hi": 0.1, "n": 5, "mean_score": 0.05, "observed": 0.0,
                 "lo": 0.0, "hi": 0.43}]}}},
        },
        "categories": {"systems": {"gemma": {}}, "calibration": {}},
    }}  # fmt: skip
    bins = reliability_table(report)
    assert bins.to_dict("records") == [{
        "question": "genre", "teacher": "codex", "bin_lo": 0.0, "bin_hi": 0.1, "n": 5,
        "mean_score": 0.05, "observed": 0.0, "lo": 0.0, "hi": 0.43}]  # fmt: skip
    tables = confusion_tables(report)
    assert list(tables) == [("genre", "codex")]
    assert tables[("genre", "codex")].loc["b", "(no call)"] == 1
    assert reliability_table({}).empty and confusion_tables({}) == {}


@pytest.mark.parametrize("seed", range(4))
def test_agreement_by_is_share_of_each_group(seed: int) -> None:
    """The counted groups give share() of each group's rows, two keys deep, in sorted order."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    matches = pd.DataFrame(
        {
            "annotator": rng.choice(["zoe", "al", "mo", None], size=n),
            "question": rng.choice(["genre", "domain"], size=n),
            "match": rng.random(n) < 0.7,
        }
    )
    out = mon.agreement_by(matches, ["annotator", "question"])
    want = [
        {"annotator": a, "question": q, **mon.share(g["match"])}
        for (a, q), g in matches.groupby(["annotator", "question"], sort=True)
    ]
    assert out.to_dict("records") == want
