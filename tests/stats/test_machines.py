"""Humans against the machines: systems, per-label metrics, confusion, calibration."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from sklearn.metrics import brier_score_loss
from statsmodels.stats.proportion import proportion_confint

from labeling.schema import Schema
from labeling.stats.machines import (
    NO_CALL,
    binary_metrics,
    compare,
    compare_question,
    is_missing,
    reliability,
    system_call,
    systems,
)
from tests.conftest import make_record

CATS = "prediction__category_scores_"
BIB = "Bibliometrics"


def _cats(schema: Schema, on: list[str], score: float = 0.9) -> list[float]:
    """A category score vector with `on` labels at `score` and the rest at 0.05."""
    labels = schema.question("categories").labels
    return [score if lab in on else 0.05 for lab in labels]


def test_systems_and_sources(schema: Schema, seed_record: dict[str, Any]) -> None:
    """Multi/binary teacher calls come from scores; single-choice from the record's calls."""
    cats = systems(schema.question("categories"), schema.teachers)
    assert list(cats) == ["codex", "gemma", "candidate", "consensus"]
    assert cats["codex"] == "prediction.category_scores_codex >= 0.5"
    design = schema.question("study_design")
    names = systems(design, schema.teachers)
    assert list(names) == [
        "codex",
        "gemma",
        "candidate",
        "consensus",
        "codex_scores",
        "gemma_scores",
    ]
    call = {s: system_call(design, seed_record, s, schema.teachers) for s in names}
    assert call == {
        "codex": "design_other",
        "gemma": "simulation_or_modeling",
        "candidate": "simulation_or_modeling",
        "consensus": None,
        "codex_scores": "design_other",
        "gemma_scores": "simulation_or_modeling",
    }
    domain = schema.question("domain")
    assert system_call(domain, seed_record, "codex", schema.teachers) is None  # abstains
    assert system_call(domain, seed_record, "codex_scores", schema.teachers) == (
        "domain_not_applicable"
    )
    assert is_missing(system_call(domain, {"id": "W1"}, "codex", schema.teachers))
    assert is_missing(system_call(domain, seed_record, "nobody", schema.teachers))


def test_binary_metrics_counts_and_wilson() -> None:
    """Counts, Wilson intervals from statsmodels, F1; undefined ratios are None."""
    m = binary_metrics([1, 1, 1, 0, 0, 0], [1, 1, 0, 1, 0, 0])
    assert (m["tp"], m["fp"], m["fn"], m["tn"], m["n"]) == (2, 1, 1, 2, 6)
    assert m["precision"]["estimate"] == pytest.approx(2 / 3) and m["precision"]["n"] == 3
    lo, hi = proportion_confint(2, 3, method="wilson")
    assert (m["precision"]["lo"], m["precision"]["hi"]) == (pytest.approx(lo), pytest.approx(hi))
    assert m["f1"] == pytest.approx(2 / 3) and m["f1_n"] == 4
    none = binary_metrics([0, 0], [0, 0])
    assert none["precision"] == {"estimate": None, "lo": None, "hi": None, "n": 0}
    assert none["f1"] is None


def test_reliability_table_and_brier() -> None:
    """Bins hold mean score, observed rate with Wilson interval and n; Brier is the MSE."""
    scores = [0.05, 0.08, 0.85, 0.9, 0.95, 1.0]
    y = [0, 0, 1, 1, 0, 1]
    out = reliability(scores, y)
    expected = sum((s - t) ** 2 for s, t in zip(scores, y, strict=True)) / 6
    assert out["brier"] == pytest.approx(expected) and out["n"] == 6 and out["positives"] == 3
    assert [(b["bin_lo"], b["n"]) for b in out["bins"]] == [(0.0, 2), (0.8, 1), (0.9, 3)]
    top = out["bins"][-1]
    assert top["observed"] == pytest.approx(2 / 3) and top["mean_score"] == pytest.approx(0.95)
    assert top["lo"] < 2 / 3 < top["hi"]
    assert reliability([], []) == {"n": 0, "brier": None, "bins": []}


def test_brier_equals_scikit_learn() -> None:
    """The Brier score is scikit-learn's brier_score_loss, without its input checks."""
    rng = np.random.default_rng(3)
    for n in (1, 7, 500):
        scores, y = rng.random(n), rng.random(n) < 0.4
        expected = brier_score_loss(y.astype(int), scores, pos_label=1)
        assert reliability(scores, y)["brier"] == expected


def test_multi_label_question_against_humans(schema: Schema, seed_record: dict[str, Any]) -> None:
    """Per-label precision/recall of teacher calls, candidate and consensus on categories."""
    q = schema.question("categories")
    recs = [
        make_record(
            seed_record,
            "W1",
            **{
                CATS + "codex": _cats(schema, ["Bibliometrics"]),
                CATS + "gemma": _cats(schema, ["Bibliometrics"]),
            },
            prediction__candidate_categories=["Bibliometrics"],
            prediction__consensus_categories=["Bibliometrics"],
        ),
        make_record(
            seed_record,
            "W2",
            **{CATS + "codex": _cats(schema, ["Bibliometrics"]), CATS + "gemma": _cats(schema, [])},
            prediction__candidate_categories=["Bibliometrics"],
            prediction__consensus_categories=[],
        ),
        make_record(seed_record, "W3", **{CATS + "codex": _cats(schema, [])}),
    ]
    answers = [["Bibliometrics"], [], ["Bibliometrics", "Open science"]]
    out = compare_question(q, list(zip(answers, recs, strict=True)), schema.teachers)
    assert out["n_works"] == 3
    codex = out["systems"]["codex"]["labels"]["Bibliometrics"]
    assert (codex["tp"], codex["fp"], codex["fn"]) == (1, 1, 1)
    gemma = out["systems"]["gemma"]["labels"]["Bibliometrics"]
    assert (gemma["tp"], gemma["fp"], gemma["fn"]) == (1, 0, 1)
    cons = out["systems"]["consensus"]["labels"]["Bibliometrics"]
    assert cons["precision"]["estimate"] == 1.0 and cons["recall"]["estimate"] == 0.5
    assert out["systems"]["codex"]["labels"]["Open science"]["recall"]["n"] == 1
    cal = out["calibration"]["codex"]
    assert cal["labels"]["Bibliometrics"]["n"] == 3 and cal["pooled"]["n"] == 27
    assert cal["labels"]["Bibliometrics"]["positives"] == 2


def test_single_choice_confusion_and_no_call(schema: Schema, seed_record: dict[str, Any]) -> None:
    """Rows are human labels, columns machine labels plus "(no call)"; abstentions count."""
    q = schema.question("genre")
    recs = [
        make_record(seed_record, "W1"),  # codex methods, gemma empirical
        make_record(seed_record, "W2", prediction__genre_codex=None),
        make_record(seed_record, "W3", prediction__genre_codex="review"),
    ]
    del recs[2]["prediction"]["genre_gemma"]
    answers = ["methods", "methods", "empirical"]
    out = compare_question(q, list(zip(answers, recs, strict=True)), schema.teachers)
    codex = out["systems"]["codex"]
    assert codex["n"] == 3 and codex["no_calls"] == 1
    conf = codex["confusion"]
    assert conf["columns"][-1] == NO_CALL and conf["rows"] == list(q.labels)
    row = dict(zip(conf["columns"], conf["matrix"][q.labels.index("methods")], strict=True))
    assert row["methods"] == 1 and row[NO_CALL] == 1 and sum(row.values()) == 2
    assert codex["accuracy"]["estimate"] == pytest.approx(1 / 3) and codex["accuracy"]["n"] == 3
    assert codex["labels"]["methods"]["recall"]["estimate"] == 0.5
    gemma = out["systems"]["gemma"]
    assert (gemma["n"], gemma["n_missing"]) == (2, 1)
    # Student head scores at the threshold: codex's 0.82 on "methods" is a call.
    assert out["systems"]["codex_scores"]["labels"]["methods"]["tp"] == 2


def test_compare_whole_schema_is_json_safe(schema: Schema, seed_record: dict[str, Any]) -> None:
    """The full report has every question, binary as one "yes" label, and no NaN."""
    works = [
        (
            {
                "categories": [],
                "about_ca_system": "no",
                "about_ca_topic": "yes",
                "domain": "health_sciences",
                "study_design": "design_other",
                "genre": "methods",
            },
            make_record(seed_record, "W1"),
        ),
        (
            {"categories": ["Metaresearch"], "about_ca_system": "yes"},
            make_record(seed_record, "W2", prediction__about_ca_system_candidate=True),
        ),
    ]
    out = compare(schema, works)
    json.dumps(out, allow_nan=False)
    assert out["n_works"] == 2 and list(out["questions"]) == schema.names
    system = out["questions"]["about_ca_system"]
    assert list(system["systems"]["candidate"]["labels"]) == ["yes"]
    assert system["systems"]["candidate"]["labels"]["yes"]["tp"] == 1
    assert system["calibration"]["codex"]["labels"]["yes"]["n"] == 2
    assert out["questions"]["genre"]["n_works"] == 1  # W2 has no genre answer
    assert list(compare(schema, works, ["genre"])["questions"]) == ["genre"]


def test_machine_scores_rank_against_any_label(schema: Schema, seed_record: dict[str, Any]) -> None:
    """score_opus / score_gpt: AUC, Brier and reliability against "any category chosen"."""
    works = [
        ({"categories": [BIB]}, make_record(seed_record, "W1", machine_scores__score_opus=0.9)),
        ({"categories": []}, make_record(seed_record, "W2", machine_scores__score_opus=0.2)),
        (
            {"categories": ["Open science"]},
            make_record(seed_record, "W3", machine_scores__score_opus=0.7),
        ),
        ({"categories": []}, make_record(seed_record, "W4", machine_scores__score_opus=None)),
        ({"genre": "methods"}, make_record(seed_record, "W5")),
    ]
    out = compare(schema, works)["machine_scores"]
    json.dumps(out, allow_nan=False)
    assert out["question"] == "categories" and "at least one label" in out["target"]
    opus = out["scores"]["score_opus"]
    assert (opus["n"], opus["positives"], opus["auc"]) == (3, 2, 1.0)
    assert opus["brier"] == pytest.approx((0.1**2 + 0.2**2 + 0.3**2) / 3)
    gpt = out["scores"]["score_gpt"]  # the same gpt score everywhere: AUC 0.5
    assert gpt["n"] == 4 and gpt["auc"] == pytest.approx(0.5)
    assert compare(schema, works, ["genre"])["machine_scores"] is None
