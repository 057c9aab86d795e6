"""Cohen's kappa per annotator pair: every pair with n >= --min-pair-n, the rest listed (#12)."""

from __future__ import annotations

import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from labeling.stats.agreement import QuestionSpec, agreement_report
from tests.stats.test_agreement import FIX, SPECS, _synthetic


def test_pairs_are_sklearn_cohen_with_min_n() -> None:
    """Pairwise kappa equals scikit-learn on the common works; min_pair_n moves pairs out."""
    labels = _synthetic(seed=2)
    everyone = agreement_report(labels, SPECS, n_boot=0)
    assert everyone["pairs_left_out"] == [] and everyone["min_pair_n"] == 2
    ns = sorted(p["n"] for p in everyone["pairs"] if p["question"] == "genre")
    cut = ns[len(ns) // 2]  # about half the pairs fall below
    report = agreement_report(labels, SPECS, n_boot=0, min_pair_n=cut)
    genre = labels[labels["question"] == "genre"].pivot(
        index="work_id", columns="annotator", values="value"
    )
    pairs = [p for p in report["pairs"] if p["question"] == "genre"]
    assert pairs and all(p["n"] >= cut for p in pairs)
    for p in pairs:
        both = genre[[p["a"], p["b"]]].dropna()
        assert p["n"] == len(both)
        assert p["cohen_kappa"] == pytest.approx(cohen_kappa_score(both[p["a"]], both[p["b"]]))
    left = [p for p in report["pairs_left_out"] if p["question"] == "genre"]
    assert left and all(p["n"] < cut for p in left)
    first = left[0]
    assert first["reason"] == (
        f"{first['n']} common works, fewer than the minimum of {cut} (--min-pair-n)"
    )
    assert len(genre[[first["a"], first["b"]]].dropna()) == first["n"]
    # Every pair with a common work is either reported or left out, never both, never lost.
    key = ("a", "b", "question")
    kept = [tuple(p[k] for k in key) for p in report["pairs"]]
    dropped = [tuple(p[k] for k in key) for p in report["pairs_left_out"]]
    assert not set(kept) & set(dropped)
    assert sorted(kept + dropped) == sorted(tuple(p[k] for k in key) for p in everyone["pairs"])
    fewer = agreement_report(labels, SPECS, n_boot=0, min_pair_n=10_000)
    assert fewer["pairs"] == [] and len(fewer["pairs_left_out"]) == len(everyone["pairs"])
    with pytest.raises(ValueError, match="min_pair_n must be >= 2"):
        agreement_report(labels, SPECS, n_boot=0, min_pair_n=1)


KRIPP_CSV = FIX / "krippendorff" / "kripp2011_4observers_12units.csv"


def test_nine_work_published_example_gives_its_pairs() -> None:
    """Krippendorff's 4 observers x 12 units (published, with gaps): A shares 9 units with B.

    With the old hard-coded minimum of 10 the A-B and A-D pairs vanished. Cohen's kappa of A-B
    by hand from the published values (units 1-9, A = 1,2,3,3,2,1,4,1,2; B = 1,2,3,3,2,2,4,1,2):
    p_o = 8/9; marginals A (3,3,2,1), B (2,4,2,1) over values 1-4, p_e = 23/81; kappa = 49/58.
    One work in common is too few for a kappa: such a pair is left out, with its reason.
    """
    wide = pd.read_csv(KRIPP_CSV)
    labels = wide.melt(id_vars="unit", var_name="annotator", value_name="value").dropna()
    labels = labels.assign(
        work_id=labels["unit"].astype(str),
        question="q",
        value=labels["value"].astype(int).astype(str),
    )
    spec = [QuestionSpec("q", "single", ["1", "2", "3", "4", "5"])]
    report = agreement_report(labels, spec, n_boot=0)
    pairs = {(p["a"], p["b"]): p for p in report["pairs"]}
    assert {k: p["n"] for k, p in pairs.items()} == {
        ("A", "B"): 9,
        ("A", "C"): 8,
        ("A", "D"): 9,
        ("B", "C"): 9,
        ("B", "D"): 10,
        ("C", "D"): 10,
    }
    assert pairs[("A", "B")]["cohen_kappa"] == pytest.approx(49 / 58, abs=1e-12)
    assert report["pairs_left_out"] == []
    strict = agreement_report(labels, spec, n_boot=0, min_pair_n=10)
    assert [(p["a"], p["b"]) for p in strict["pairs"]] == [("B", "D"), ("C", "D")]
    assert [(p["a"], p["b"], p["n"]) for p in strict["pairs_left_out"]] == [
        ("A", "B", 9),
        ("A", "C", 8),
        ("A", "D", 9),
        ("B", "C", 9),
    ]
    # Two annotators with a single work in common: left out (n = 1), never silently dropped.
    one = pd.DataFrame(
        [("W1", "x", "q", "1"), ("W1", "y", "q", "2"), ("W2", "x", "q", "1")],
        columns=["work_id", "annotator", "question", "value"],
    )
    lone = agreement_report(one, spec, n_boot=0)
    assert lone["pairs"] == []
    assert lone["pairs_left_out"] == [
        {
            "a": "x",
            "b": "y",
            "question": "q",
            "n": 1,
            "reason": "1 common work, fewer than the minimum of 2 (--min-pair-n)",
        }
    ]
