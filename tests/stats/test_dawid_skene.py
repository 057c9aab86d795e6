"""Dawid-Skene and majority vote: simulated annotators with known accuracies, and the report."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from labeling.stats.aggregation import aggregate
from labeling.stats.agreement import QuestionSpec
from labeling.stats.dawid_skene import dawid_skene, majority, vote_shares

LABELS = ("a", "b", "c")


def simulate(
    seed: int,
    accuracies: list[float],
    n_items: int = 300,
    n_classes: int = 3,
    coverage: float = 1.0,
) -> tuple[np.ndarray, ...]:
    """Items with a true class; each annotator right with its accuracy, else uniformly wrong."""
    rng = np.random.default_rng(seed)
    truth = rng.choice(
        n_classes, size=n_items, p=[0.5, 0.3, 0.2][:n_classes] if n_classes == 3 else None
    )
    items = np.repeat(np.arange(n_items), len(accuracies))
    workers = np.tile(np.arange(len(accuracies)), n_items)
    keep = rng.random(len(items)) < coverage
    keep[:: len(accuracies)] = True  # every item keeps at least one label
    items, workers = items[keep], workers[keep]
    right = rng.random(len(items)) < np.asarray(accuracies)[workers]
    wrong = (truth[items] + rng.integers(1, n_classes, size=len(items))) % n_classes
    labels = np.where(right, truth[items], wrong)
    return truth, items, workers, labels, right


@pytest.mark.parametrize("seed", range(5))
def test_estimated_accuracies_are_within_005_of_the_true_ones(seed: int) -> None:
    """Within 0.05 of each annotator's realised accuracy (the share of their labels that are
    right, which is what the data can tell; it is itself up to 0.06 from the generating one)."""
    accuracies = [0.9, 0.8, 0.7, 0.65, 0.6]
    truth, items, workers, labels, right = simulate(seed, accuracies, coverage=0.8)
    fit = dawid_skene(items, workers, labels, n_items=300, n_workers=5, n_classes=3)
    assert fit.converged
    n = np.bincount(workers)
    estimated = np.bincount(workers, fit.posteriors[items, labels]) / n
    assert np.abs(estimated - np.bincount(workers, right) / n).max() < 0.05
    assert np.allclose(fit.confusion.sum(axis=-1), 1.0)
    assert np.allclose(fit.posteriors.sum(axis=1), 1.0)
    assert np.abs(fit.priors - np.bincount(truth, minlength=3) / 300).max() < 0.05


@pytest.mark.parametrize("seed", range(5))
def test_posterior_answers_beat_majority_with_one_much_better_annotator(seed: int) -> None:
    truth, items, workers, labels, _ = simulate(seed, [0.95, 0.6, 0.6, 0.6, 0.6])
    size = {"n_items": 300, "n_workers": 5, "n_classes": 3}
    ds = dawid_skene(items, workers, labels, **size).posteriors.argmax(axis=1)
    mv = majority(items, workers, labels, **size).posteriors.argmax(axis=1)
    assert (ds == truth).mean() >= (mv == truth).mean() + 0.02


def test_one_round_is_the_dawid_skene_formula() -> None:
    """One EM round equals the 1979 formulas written out with plain loops."""
    _, items, workers, labels, _ = simulate(4, [0.9, 0.7, 0.6], n_items=20, coverage=0.7)
    k, n_w = 3, 3
    fit = dawid_skene(
        items, workers, labels, n_items=20, n_workers=n_w, n_classes=k, max_iter=1, smoothing=0.5
    )
    start = vote_shares(items, labels, 20, k)
    prior = (start.sum(axis=0) + 0.5) / (20 + 0.5 * k)
    conf = np.full((n_w, k, k), 0.5)
    for i, w, lab in zip(items, workers, labels, strict=True):
        conf[w, :, lab] += start[i]
    conf /= conf.sum(axis=-1, keepdims=True)
    for i in range(20):
        like = [
            prior[j]
            * math.prod(
                conf[w, j, lab]
                for w, lab in zip(workers[items == i], labels[items == i], strict=True)
            )
            for j in range(k)
        ]
        assert np.allclose(fit.posteriors[i], np.array(like) / sum(like))


def test_unanimous_labels_give_certain_answers() -> None:
    items, workers = np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1])
    fit = dawid_skene(items, workers, np.zeros(4, dtype=int), n_items=2, n_workers=2, n_classes=1)
    assert np.allclose(fit.posteriors, 1.0) and fit.converged


def long_table(seed: int, accuracies: dict[str, float], n_works: int = 300) -> tuple[Any, ...]:
    """A long table of a single-choice, a binary and a multi-label question, with truths."""
    rng = np.random.default_rng(seed)
    rows, truth = [], {}
    for i in range(n_works):
        work = f"W{i:04d}"
        single = LABELS[rng.choice(3, p=[0.5, 0.3, 0.2])]
        binary = "yes" if rng.random() < 0.3 else "no"
        multi = {lab for lab in LABELS if rng.random() < 0.4}
        truth[work] = (single, binary, multi)
        for who, p in accuracies.items():
            s = single if rng.random() < p else rng.choice([x for x in LABELS if x != single])
            b = binary if rng.random() < p else ("no" if binary == "yes" else "yes")
            m = [lab for lab in LABELS if (lab in multi) == (rng.random() < p)]
            rows += [(work, who, "design", s), (work, who, "about", b), (work, who, "cats", m)]
    long = pd.DataFrame(rows, columns=["work_id", "annotator", "question", "value"])
    return long, truth


QUESTIONS = [
    QuestionSpec("design", "single", LABELS),
    QuestionSpec("about", "binary"),
    QuestionSpec("cats", "multi", LABELS),
]


def realised(long: pd.DataFrame, truth: dict[str, Any]) -> dict[Any, dict[str, float]]:
    """Each annotator's share of right answers: per question, per label, per whole label set."""
    right: dict[Any, dict[str, list[bool]]] = {}
    for work, who, q, value in long.itertuples(index=False):
        single, binary, multi = truth[work]
        if q == "cats":
            for lab in LABELS:
                right.setdefault(lab, {}).setdefault(who, []).append(
                    (lab in value) == (lab in multi)
                )
        ok = {"design": value == single, "about": value == binary, "cats": set(value) == multi}[q]
        right.setdefault(q, {}).setdefault(who, []).append(ok)
    return {k: {who: float(np.mean(v)) for who, v in d.items()} for k, d in right.items()}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_report_recovers_accuracies_per_question_and_label(seed: int) -> None:
    accuracies = {"ann": 0.9, "bob": 0.8, "cy": 0.7, "dee": 0.65, "eve": 0.6}
    long, truth = long_table(seed, accuracies)
    real = realised(long, truth)
    report = aggregate(long, QUESTIONS, "dawid-skene")
    json.dumps(report, allow_nan=False)
    assert report["method"] == "dawid-skene" and report["n_works"] == 300
    assert report["n_labels"] == 1500
    # A yes/no label tells less than a choice among three: with this weak crowd (mean accuracy
    # 0.73) binary estimates strayed up to 0.073 from the realised accuracy over seeds 0-7,
    # whole label sets (three labels' errors compounded) up to 0.096; single choice 0.023.
    tolerance = {"design": 0.05, "about": 0.08, "labels": 0.08, "sets": 0.1}
    for q in ("design", "about"):
        block = report["questions"][q]
        assert block["converged"] and block["n_labels"] == 1500
        for who in accuracies:
            got = block["annotators"][who]["accuracy"]
            assert abs(got - real[q][who]) < tolerance[q], (q, who)
            assert block["annotators"][who]["n"] == 300
    assert report["questions"]["about"]["classes"] == ["yes", "no"]
    design = report["questions"]["design"]["annotators"]["ann"]["confusion"]
    assert set(design) == set(LABELS) and abs(sum(design["a"].values()) - 1) < 1e-5
    cats = report["questions"]["cats"]
    for who in accuracies:
        for lab in LABELS:
            got = cats["labels"][lab]["annotators"][who]["accuracy"]
            assert abs(got - real[lab][who]) < tolerance["labels"], (lab, who)
        # a whole label set is right when each of its labels is
        got = cats["annotators"][who]["accuracy"]
        assert abs(got - real["cats"][who]) < tolerance["sets"], who
    pooled = {a["annotator"]: a for a in report["annotators"]}
    assert pooled["ann"]["n"] == 900 and set(pooled["ann"]["questions"]) == {
        "design",
        "about",
        "cats",
    }
    assert pooled["ann"]["accuracy"] == pytest.approx(
        np.mean(
            [cats["annotators"]["ann"]["accuracy"]]
            + [report["questions"][q]["annotators"]["ann"]["accuracy"] for q in ("design", "about")]
        ),
        abs=1e-5,
    )
    right = sum(w["answers"]["design"] == truth[w["work_id"]][0] for w in report["works"])
    assert right / 300 > 0.9


def test_works_carry_answers_posteriors_and_distributions() -> None:
    long, truth = long_table(5, {"ann": 0.9, "bob": 0.9, "cy": 0.9})
    report = aggregate(long, QUESTIONS, "dawid-skene")
    work = report["works"][0]
    assert set(work) == {"work_id", "n_labels", "answers", "posteriors", "distributions"}
    assert work["n_labels"] == 3
    cats = work["distributions"]["cats"]
    assert work["answers"]["cats"] == [lab for lab in LABELS if cats[lab] >= 0.5]
    assert work["posteriors"]["cats"] == pytest.approx(
        min(max(p, 1 - p) for p in cats.values()), abs=1e-6
    )
    design = work["distributions"]["design"]
    assert work["posteriors"]["design"] == max(design.values())
    assert work["answers"]["design"] == max(design, key=design.get)


def test_majority_gives_vote_shares_and_agreement_with_the_majority() -> None:
    long = pd.DataFrame(
        [
            ("W1", "ann", "design", "a"),
            ("W1", "bob", "design", "a"),
            ("W1", "cy", "design", "b"),
            ("W2", "ann", "design", "b"),
            ("W2", "bob", "design", "c"),
            ("W1", "ann", "cats", ["a", "b"]),
            ("W1", "bob", "cats", ["a"]),
            ("W2", "ann", "about", True),
            ("W2", "bob", "about", None),  # None: not an answer
            ("W2", "cy", "about", "no"),
            ("W2", "cy", "about", "yes"),  # the last one counts
        ],
        columns=["work_id", "annotator", "question", "value"],
    )
    report = aggregate(long, QUESTIONS, "majority")
    w1, w2 = report["works"]
    assert w1["answers"]["design"] == "a" and w1["posteriors"]["design"] == pytest.approx(2 / 3)
    # A 1-1 tie has no majority (no tie-break): None with its 0.5 share.
    assert w2["answers"]["design"] is None and w2["posteriors"]["design"] == 0.5
    assert w1["answers"]["cats"] is None  # ["a", "b"] against ["a"]: sets, a tie
    assert w1["posteriors"]["cats"] == 0.5 and w1["distributions"]["cats"]["c"] == 0.0
    assert w2["answers"]["about"] == "yes" and w2["posteriors"]["about"] == 1.0
    assert report["questions"]["about"]["n_labels"] == 2
    design = report["questions"]["design"]
    assert design["iterations"] is None and design["classes"] == ["a", "b", "c"]
    cy = design["annotators"]["cy"]
    assert cy == {
        "accuracy": 0.0,
        "n": 1,
        "confusion": {"a": {"a": 0.0, "b": 1.0, "c": 0.0}, "b": None, "c": None},
    }
    # ann's tied W2 is scored against no answer: n counts the works with a majority.
    assert design["annotators"]["ann"] == {**design["annotators"]["ann"], "accuracy": 1.0, "n": 1}
    assert w1["n_labels"] == 2  # cats has two labels on W1, design three: the fewest
    json.dumps(report, allow_nan=False)


def test_empty_table_and_unknown_method() -> None:
    empty = pd.DataFrame(columns=["work_id", "annotator", "question", "value"])
    report = aggregate(empty, QUESTIONS)
    assert report["works"] == [] and report["annotators"] == [] and report["n_labels"] == 0
    assert report["questions"]["design"] == {
        "kind": "single",
        "n_works": 0,
        "n_labels": 0,
        "annotators": {},
    }
    with pytest.raises(ValueError, match="unknown method"):
        aggregate(empty, QUESTIONS, "wawa")
