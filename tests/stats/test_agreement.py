"""Tests of labeling.stats.agreement: published examples, the vectorised engine, the report."""

from __future__ import annotations

import json
import warnings
from fractions import Fraction
from pathlib import Path

import krippendorff
import numpy as np
import pandas as pd
import pytest
from scipy import sparse
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from labeling.stats.agreement import (
    QuestionSpec,
    agreement_report,
    alpha_from_counts,
    bootstrap_from_counts,
    cohen_kappa,
    fleiss_kappa_from_counts,
    gwet_ac1_from_counts,
    json_safe,
    krippendorff_alpha,
    percent_agreement_from_counts,
    question_specs,
)
from labeling.stats.coefficients import (
    count_features,
    measures_from_sums,
    percentile_ci,
    resample_patterns,
    unique_rows,
    weighted_sums,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "agreement"
ENTRY_KEYS = [
    "n_works",
    "n_labels",
    "krippendorff_alpha",
    "alpha_ci",
    "alpha_ci_reason",
    "fleiss_kappa",
    "kappa_ci",
    "kappa_ci_reason",
    "gwet_ac1",
    "percent_agreement",
]


def _expected(folder: str, name: str) -> dict:
    """The parsed ``*_expected.json`` of a fixture folder."""
    return json.loads((FIX / folder / name).read_text())


def _kripp_matrix() -> np.ndarray:
    """Krippendorff (2011) 12 units x 4 observers, NaN = not coded."""
    frame = pd.read_csv(FIX / "krippendorff" / "kripp2011_4observers_12units.csv")
    return frame[["A", "B", "C", "D"]].to_numpy(float)


def _counts(matrix: np.ndarray, values: list) -> np.ndarray:
    """Units x values count matrix of a units x raters matrix."""
    return np.stack([(matrix == v).sum(axis=1) for v in values], axis=1)


def _long(matrix: np.ndarray, question: str = "q", fmt=lambda v: str(int(v))) -> pd.DataFrame:
    """Long label table (work_id, annotator, question, value) of a units x raters matrix."""
    rows = [
        {"work_id": f"W{u}", "annotator": f"r{r}", "question": question, "value": fmt(v)}
        for (u, r), v in np.ndenumerate(matrix)
        if not pd.isna(v)
    ]
    return pd.DataFrame(rows)


def _assert_json_ready(report: dict) -> None:
    """The report serialises as strict JSON (no NaN, no numpy types)."""
    json.dumps(report, allow_nan=False)


# --- published examples -------------------------------------------------------------------


KRIPP = _expected("krippendorff", "krippendorff_expected.json")["datasets"][0]["expected"]


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_krippendorff_2011_example(level: str) -> None:
    """Krippendorff (2011): 0.743 / 0.815 / 0.849 / 0.797, by package, vector and report."""
    matrix = _kripp_matrix()
    assert round(krippendorff_alpha(matrix, level), 3) == KRIPP[level]
    vectorised = alpha_from_counts(_counts(matrix, [1, 2, 3, 4, 5]), level, [1, 2, 3, 4, 5])
    assert vectorised == pytest.approx(krippendorff_alpha(matrix, level), abs=1e-12)
    spec = QuestionSpec("q", "single", ["1", "2", "3", "4", "5"])
    report = agreement_report(_long(matrix), [spec], n_boot=0, level=level)
    entry = report["questions"]["q"]
    assert round(entry["krippendorff_alpha"], 3) == KRIPP[level]
    assert entry["n_works"] == 12 and entry["n_labels"] == 41  # unit 12 (one value) is kept


def test_krippendorff_nominal_accepts_strings_and_none() -> None:
    """Nominal alpha takes any hashable labels, None = not coded."""
    names = {1: "book", 2: "letter", 3: "telephone", 4: "computer", 5: "folder"}
    matrix = [[None if np.isnan(v) else names[int(v)] for v in row] for row in _kripp_matrix()]
    assert round(krippendorff_alpha(matrix), 3) == KRIPP["nominal"]


IRRCAC = _expected("irrcac", "irrcac_raw4raters_expected.json")["expected"]


def test_gwet_ac1_and_generalised_fleiss_irrcac_example() -> None:
    """irrCAC raw_4raters (same data): AC1 0.775 (pa 0.818), generalised Fleiss 0.761."""
    counts = _counts(_kripp_matrix(), [1, 2, 3, 4, 5])
    assert round(gwet_ac1_from_counts(counts), 3) == IRRCAC["gwet_ac1"]["coefficient_value"]
    assert round(percent_agreement_from_counts(counts), 3) == IRRCAC["gwet_ac1"]["pa"]
    assert round(fleiss_kappa_from_counts(counts), 3) == IRRCAC["fleiss_kappa"]["coefficient_value"]


def test_gwet_ac1_hand_computed() -> None:
    """A hand-computed example with varying raters and a singly-rated unit.

    Units (counts of A, B): [2,0], [1,1], [3,0], [0,1]. pa over the 3 units with >= 2
    ratings = (1 + 0 + 1)/3 = 2/3; pi_A = (1 + 1/2 + 1 + 0)/4 = 5/8, pi_B = 3/8;
    AC1 pe = 2 * 5/8 * 3/8 / (2 - 1) = 15/32, AC1 = (2/3 - 15/32)/(17/32) = 19/51;
    Fleiss pe = 25/64 + 9/64 = 17/32, kappa = (2/3 - 17/32)/(15/32) = 13/45.
    """
    counts = [[2, 0], [1, 1], [3, 0], [0, 1]]
    assert gwet_ac1_from_counts(counts) == pytest.approx(float(Fraction(19, 51)), abs=1e-12)
    assert fleiss_kappa_from_counts(counts) == pytest.approx(float(Fraction(13, 45)), abs=1e-12)
    assert percent_agreement_from_counts(counts) == pytest.approx(2 / 3, abs=1e-12)


FLEISS = {d["file"]: d["expected"] for d in _expected("fleiss", "fleiss_expected.json")["datasets"]}


def test_fleiss_wikipedia_example() -> None:
    """Wikipedia's 10 subjects x 14 raters: kappa 0.210; percent agreement = mean of P_i."""
    name = "fleiss_wikipedia_10subjects_14raters_counts.csv"
    table = pd.read_csv(FIX / "fleiss" / name)
    counts = table[["cat1", "cat2", "cat3", "cat4", "cat5"]].to_numpy()
    assert fleiss_kappa_from_counts(counts) == pytest.approx(FLEISS[name]["fleiss_kappa"], abs=5e-4)
    assert percent_agreement_from_counts(counts) == pytest.approx(table["P_i"].mean(), abs=1e-3)


def _diagnoses() -> pd.DataFrame:
    """Fleiss (1971) diagnoses: 30 patients x 6 raters, category names as labels."""
    return pd.read_csv(FIX / "fleiss" / "fleiss1971_diagnoses_30subjects_6raters.csv", index_col=0)


def test_fleiss_1971_diagnoses() -> None:
    """Fleiss (1971): kappa 0.4302445, per-category 0.245 0.245 0.520 0.471 0.566."""
    expected = FLEISS["fleiss1971_diagnoses_30subjects_6raters.csv"]
    frame = _diagnoses()
    labels = sorted(pd.unique(frame.to_numpy().ravel()))
    counts, _ = aggregate_raters(frame.to_numpy())
    assert counts.sum(axis=0).tolist() == expected["category_totals_1to5"]
    assert fleiss_kappa_from_counts(counts) == pytest.approx(expected["fleiss_kappa"], abs=5e-8)
    # the hand-written generalisation equals statsmodels when every unit has the same raters
    mine = measures_from_sums(count_features(counts).sum(axis=0), 5)["fleiss"][0]
    assert mine == pytest.approx(fleiss_kappa(counts), abs=1e-12)
    report = agreement_report(
        _long(frame.to_numpy(), fmt=str), [QuestionSpec("q", "single", labels)], n_boot=0
    )
    entry = report["questions"]["q"]
    assert entry["fleiss_kappa"] == pytest.approx(expected["fleiss_kappa"], abs=5e-8)
    per_label = [round(entry["labels"][name]["fleiss_kappa"], 3) for name in labels]
    assert per_label == expected["fleiss_kappa_by_category_1to5"]


COHEN = {d["file"]: d["expected"] for d in _expected("cohen", "cohen_expected.json")["datasets"]}


@pytest.mark.parametrize(
    ("example", "weights", "key"),
    [
        ("binary_table1", None, "kappa"),
        ("multiclass_table4", None, "kappa"),
        ("weighting_example", None, "kappa_unweighted"),
        ("weighting_example", "linear", "kappa_linear"),
        ("weighting_example", "quadratic", "kappa_quadratic"),
    ],
)
def test_cohen_sklearn_examples(example: str, weights: str | None, key: str) -> None:
    """Artstein & Poesio tables as in scikit-learn's tests; symmetric; self-kappa is 1."""
    name = "sklearn_artstein_poesio_label_vectors.csv"
    vectors = pd.read_csv(FIX / "cohen" / name)
    rows = vectors[vectors["example"] == example]
    expected = COHEN[name][example]
    value = cohen_kappa(rows["y1"], rows["y2"], weights=weights)
    assert value == pytest.approx(expected[key], abs=0.5 * 10 ** -expected["decimal"])
    assert cohen_kappa(rows["y2"], rows["y1"], weights=weights) == pytest.approx(value)
    assert cohen_kappa(rows["y1"], rows["y1"]) == 1.0


@pytest.mark.parametrize(
    ("weights", "key"), [(None, "unweighted"), ("linear", "weighted_linear_weights_0_1_2")]
)
def test_cohen_statsmodels_sas_example(weights: str | None, key: str) -> None:
    """statsmodels' SAS table [[0,4,1],[0,8,0],[0,1,5]]: 0.4842, linear weights 0.4701."""
    name = "statsmodels_sas_table10_contingency.csv"
    table = pd.read_csv(FIX / "cohen" / name).set_index("rater1_category").to_numpy()
    pairs = [(i, j) for (i, j), n in np.ndenumerate(table) for _ in range(n)]
    a, b = zip(*pairs, strict=True)
    assert cohen_kappa(a, b, weights) == pytest.approx(COHEN[name][key]["kappa"], abs=5e-5)


# --- vectorised engine against the packages ----------------------------------------------


def _random_ratings(seed: int, units: int = 60, raters: int = 5, k: int = 4) -> np.ndarray:
    """Units x raters ratings 1..k with about a third missing and some agreement."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, k + 1, units)
    noise = rng.integers(1, k + 1, (units, raters))
    ratings = np.where(rng.random((units, raters)) < 0.6, truth[:, None], noise).astype(float)
    ratings[rng.random((units, raters)) < 0.35] = np.nan
    return ratings


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_vectorised_alpha_equals_package(seed: int, level: str) -> None:
    """Coincidence-matrix alpha from counts == krippendorff.alpha on data with missing values."""
    ratings = _random_ratings(seed)
    values = sorted(np.unique(ratings[~np.isnan(ratings)]))
    package = krippendorff.alpha(reliability_data=ratings.T, level_of_measurement=level)
    counts = _counts(ratings, values)
    assert alpha_from_counts(counts, level, values) == pytest.approx(package, abs=1e-10)
    assert krippendorff_alpha(ratings, level) == pytest.approx(package, abs=1e-12)


def test_sparse_features_equal_dense() -> None:
    """Sparse count matrices (many label sets) give the same summaries as dense ones."""
    counts = _counts(_random_ratings(1, units=80, k=6), [1, 2, 3, 4, 5, 6])
    dense = count_features(counts).sum(axis=0)
    assert np.asarray(count_features(sparse.csr_matrix(counts)).sum(axis=0)).ravel() == (
        pytest.approx(dense)
    )


def test_report_alpha_with_many_label_sets_uses_equal_vectorised_path(monkeypatch) -> None:
    """Above the package's memory budget the vectorised alpha is used, with the same value."""
    import labeling.stats.agreement as agreement

    rng = np.random.default_rng(3)
    names = [f"L{i}" for i in range(8)]
    rows = []
    for w in range(150):
        base = rng.random(8) < 0.4
        for r in range(rng.integers(1, 5)):
            given = base ^ (rng.random(8) < 0.1)
            rows.append(
                (f"W{w}", f"r{r}", "cats", [n for n, g in zip(names, given, strict=True) if g])
            )
    labels = pd.DataFrame(rows, columns=["work_id", "annotator", "question", "value"])
    spec = [QuestionSpec("cats", "multi", names)]
    by_package = agreement_report(labels, spec, n_boot=0)["questions"]["cats"]
    monkeypatch.setattr(agreement, "PACKAGE_CELL_BUDGET", 0)
    monkeypatch.setattr(agreement, "SPARSE_FROM", 2)
    vectorised = agreement_report(labels, spec, n_boot=0)["questions"]["cats"]
    assert vectorised["krippendorff_alpha"] == pytest.approx(by_package["krippendorff_alpha"])
    for key in ("fleiss_kappa", "gwet_ac1", "percent_agreement"):
        assert vectorised[key] == pytest.approx(by_package[key])


# --- bootstrap -----------------------------------------------------------------------------


def _synthetic(seed: int = 0, works: int = 300, annotators: int = 6) -> pd.DataFrame:
    """Labels of a binary, a single-choice and a multi-label question; raters vary per work."""
    rng = np.random.default_rng(seed)
    rows = []
    cats = ["a", "b", "c", "d"]
    for w in range(works):
        truth_single = rng.choice(cats, p=[0.5, 0.3, 0.15, 0.05])
        truth_bin = rng.random() < 0.3
        truth_multi = rng.random(3) < [0.4, 0.2, 0.05]
        who = rng.choice(annotators, size=rng.integers(1, 5), replace=False)
        for r in who:
            ok = rng.random() < 0.85
            single = truth_single if ok else rng.choice(cats)
            binary = truth_bin if rng.random() < 0.9 else not truth_bin
            multi = truth_multi ^ (rng.random(3) < 0.07)
            for q, v in (
                ("genre", single),
                ("about", "yes" if binary else "no"),
                ("cats", [x for x, on in zip(["x", "y", "z"], multi, strict=True) if on]),
            ):
                rows.append({"work_id": f"W{w}", "annotator": f"ann{r}", "question": q, "value": v})
    return pd.DataFrame(rows)


SPECS = [
    QuestionSpec("genre", "single", ["a", "b", "c", "d"]),
    QuestionSpec("about", "binary", ["yes", "no"]),
    QuestionSpec("cats", "multi", ["x", "y", "z"]),
]


def test_bootstrap_is_deterministic_and_contains_point() -> None:
    """Same seed -> same intervals; another seed -> other intervals; point inside the CI."""
    labels = _synthetic()
    first = agreement_report(labels, SPECS, n_boot=300, seed=7)
    assert first == agreement_report(labels, SPECS, n_boot=300, seed=7)
    assert first["questions"] != agreement_report(labels, SPECS, n_boot=300, seed=8)["questions"]
    for entry in first["questions"].values():
        for e in [entry, *entry["labels"].values()]:
            for point, ci in (("krippendorff_alpha", "alpha_ci"), ("fleiss_kappa", "kappa_ci")):
                assert e[ci] is not None
                assert e[ci][0] <= e[point] <= e[ci][1]


def test_bootstrap_from_counts() -> None:
    """Low-level bootstrap: deterministic, intervals for all four coefficients around the point."""
    counts = _counts(_random_ratings(4, units=200), [1, 2, 3, 4])
    ci = bootstrap_from_counts(counts, n_boot=400, seed=1)
    assert ci == bootstrap_from_counts(counts, n_boot=400, seed=1)
    points = {
        "alpha": alpha_from_counts(counts),
        "fleiss": fleiss_kappa_from_counts(counts),
        "ac1": gwet_ac1_from_counts(counts),
        "pa": percent_agreement_from_counts(counts),
    }
    for name, point in points.items():
        assert ci[name][0] <= point <= ci[name][1]
    ordinal = bootstrap_from_counts(counts, n_boot=200, seed=1, level="ordinal")
    assert ordinal["alpha"][0] <= alpha_from_counts(counts, "ordinal") <= ordinal["alpha"][1]


def test_pattern_resamples_have_the_law_of_work_resamples() -> None:
    """Drawing the distinct count patterns Multinomial(n, freq/n) times is resampling the works:
    the same mean and variance per pattern, and the same percentile intervals of alpha and
    Fleiss' kappa up to Monte Carlo error (4,000 replicates each way)."""
    counts = _counts(_random_ratings(6, units=400, raters=3), [1, 2, 3, 4])
    patterns, inverse, freq = unique_rows(counts)
    feats = count_features(patterns)
    k, n = counts.shape[1], len(counts)
    rng = np.random.default_rng(1)  # works drawn one by one, then counted by their pattern
    by_works = np.vstack(
        [np.bincount(inverse[rng.integers(0, n, n)], minlength=len(patterns)) for _ in range(4000)]
    ).astype(float)
    by_patterns = np.vstack(list(resample_patterns(freq, 4000, np.random.default_rng(2))))
    assert (by_patterns.sum(axis=1) == n).all()
    p = freq / n
    for draws in (by_works, by_patterns):
        assert np.abs(draws.mean(axis=0) - freq).max() < 5 * np.sqrt(n * p * (1 - p) / 4000).max()
        assert np.allclose(draws.var(axis=0), n * p * (1 - p), rtol=0.15, atol=0.5)
    for measure in ("alpha", "fleiss"):
        a = percentile_ci(measures_from_sums(weighted_sums(by_works, feats), k)[measure])
        b = percentile_ci(measures_from_sums(weighted_sums(by_patterns, feats), k)[measure])
        assert a is not None and b is not None
        assert abs(a[0] - b[0]) < 0.015 and abs(a[1] - b[1]) < 0.015, (measure, a, b)


def test_no_bootstrap_gives_null_intervals() -> None:
    """n_boot=0: no intervals, point estimates unchanged."""
    labels = _synthetic()
    with_ci = agreement_report(labels, SPECS, n_boot=50)
    without = agreement_report(labels, SPECS, n_boot=0)
    assert without["n_boot"] == 0
    assert without["questions"]["genre"]["alpha_ci"] is None
    assert without["questions"]["genre"]["alpha_ci_reason"] == "no bootstrap (n_boot = 0)"
    assert with_ci["questions"]["genre"]["alpha_ci_reason"] is None
    point = with_ci["questions"]["genre"]["krippendorff_alpha"]
    assert without["questions"]["genre"]["krippendorff_alpha"] == point


# --- undefined cases -----------------------------------------------------------------------


def test_undefined_low_level_values_are_none() -> None:
    """No variation, no pairable unit, empty input: None, never NaN."""
    assert krippendorff_alpha([[1, 1], [1, 1], [1, np.nan]]) is None
    assert krippendorff_alpha([[1, np.nan], [2, np.nan]]) is None
    assert alpha_from_counts([[3, 0], [2, 0]]) is None
    assert fleiss_kappa_from_counts([[3, 0], [3, 0]]) is None
    assert fleiss_kappa_from_counts([[1, 0], [0, 1]]) is None
    assert gwet_ac1_from_counts([[1, 0], [0, 1]]) is None
    assert percent_agreement_from_counts([[1, 0], [0, 1]]) is None
    assert gwet_ac1_from_counts([[3], [2]]) is None
    assert fleiss_kappa_from_counts(np.zeros((0, 3))) is None
    assert cohen_kappa(["a", "a"], ["a", "a"]) is None
    assert cohen_kappa([None], ["a"]) is None
    assert bootstrap_from_counts([[3, 0], [2, 0]], n_boot=20)["alpha"] is None
    # AC1 stays defined (= 1) where kappa collapses: everyone agrees on one value.
    assert gwet_ac1_from_counts([[3, 0], [2, 0]]) == 1.0


def test_undefined_report_values_are_none() -> None:
    """All 'no': alpha and kappa None, AC1 and agreement 1; single labels: everything None."""
    rows = [(f"W{w}", f"r{r}", "about", "no") for w in range(20) for r in range(3)]
    rows += [(f"W{w}", "r0", "genre", "a") for w in range(20)]
    labels = pd.DataFrame(rows, columns=["work_id", "annotator", "question", "value"])
    report = agreement_report(labels, SPECS, n_boot=50)
    _assert_json_ready(report)
    about = report["questions"]["about"]
    assert about["krippendorff_alpha"] is None and about["alpha_ci"] is None
    assert about["fleiss_kappa"] is None and about["kappa_ci"] is None
    assert about["gwet_ac1"] == 1.0 and about["percent_agreement"] == 1.0
    genre = report["questions"]["genre"]
    assert genre["n_works"] == 20 and genre["n_labels"] == 20
    assert all(genre[k] is None for k in ENTRY_KEYS[2:])
    cats = report["questions"]["cats"]  # no labels at all
    assert cats["n_works"] == 0 and all(cats[k] is None for k in ENTRY_KEYS[2:])
    assert all(e["krippendorff_alpha"] is None for e in cats["labels"].values())
    # Every pair always said "no": kappa undefined, listed with its n and kappa None.
    assert [(p["a"], p["b"], p["n"], p["cohen_kappa"]) for p in report["pairs"]] == [
        ("r0", "r1", 20, None),
        ("r0", "r2", 20, None),
        ("r1", "r2", 20, None),
    ]
    assert report["pairs_left_out"] == []


# --- the report ----------------------------------------------------------------------------


def test_report_shape_and_json() -> None:
    """Exact keys, per-label entries, pairs; strict JSON; binary questions have no labels."""
    report = agreement_report(_synthetic(), SPECS, n_boot=20, seed=3)
    _assert_json_ready(report)
    assert list(report) == ["questions", "pairs", "pairs_left_out", "min_pair_n", "n_boot", "seed"]
    assert report["min_pair_n"] == 2
    assert report["n_boot"] == 20 and report["seed"] == 3
    assert list(report["questions"]) == ["genre", "about", "cats"]
    for entry in report["questions"].values():
        assert list(entry) == [*ENTRY_KEYS, "labels"]
        assert isinstance(entry["n_works"], int) and isinstance(entry["n_labels"], int)
        for label in entry["labels"].values():
            assert list(label) == ENTRY_KEYS
    assert list(report["questions"]["genre"]["labels"]) == ["a", "b", "c", "d"]
    assert list(report["questions"]["cats"]["labels"]) == ["x", "y", "z"]
    assert report["questions"]["about"]["labels"] == {}
    for pair in report["pairs"]:
        assert list(pair) == ["a", "b", "question", "n", "cohen_kappa"]
        assert pair["a"] < pair["b"] and pair["n"] >= 2
        assert pair["cohen_kappa"] is None or isinstance(pair["cohen_kappa"], float)
    for pair in report["pairs_left_out"]:
        assert list(pair) == ["a", "b", "question", "n", "reason"] and pair["n"] == 1


def test_missing_labels_are_used_not_dropped() -> None:
    """Works coded by a subset of annotators count, exactly as alpha defines with NaN cells."""
    matrix = _random_ratings(11, units=40, raters=4)
    spec = [QuestionSpec("q", "single", ["1", "2", "3", "4"])]
    entry = agreement_report(_long(matrix), spec, n_boot=0)["questions"]["q"]
    rated = (~np.isnan(matrix)).sum(axis=1)
    assert entry["n_works"] == int((rated >= 1).sum())
    assert entry["n_labels"] == int(rated.sum())
    package = krippendorff.alpha(reliability_data=matrix.T, level_of_measurement="nominal")
    assert entry["krippendorff_alpha"] == pytest.approx(package, abs=1e-12)
    complete = matrix[rated == 4]
    dropped = krippendorff.alpha(reliability_data=complete.T, level_of_measurement="nominal")
    assert entry["krippendorff_alpha"] != pytest.approx(dropped, abs=1e-6)
    counts = _counts(matrix, [1, 2, 3, 4])
    assert entry["gwet_ac1"] == pytest.approx(gwet_ac1_from_counts(counts))
    assert entry["fleiss_kappa"] == pytest.approx(fleiss_kappa_from_counts(counts))


def test_multi_label_question_and_labels() -> None:
    """Question level: label sets as nominal values; per label: binary present/absent."""
    labels = _synthetic(seed=5)
    cats = labels[labels["question"] == "cats"]
    entry = agreement_report(labels, SPECS, n_boot=0)["questions"]["cats"]
    table = cats.assign(value=cats["value"].map(lambda v: "|".join(v)))
    wide = table.pivot(index="work_id", columns="annotator", values="value")
    assert entry["krippendorff_alpha"] == pytest.approx(krippendorff_alpha(wide.to_numpy()))
    for name in ["x", "y", "z"]:
        present = table.assign(value=table["value"].map(lambda v, n=name: n in v.split("|")))
        wide = present.pivot(index="work_id", columns="annotator", values="value")
        expected = krippendorff_alpha(wide.to_numpy())
        assert entry["labels"][name]["krippendorff_alpha"] == pytest.approx(expected)
        assert entry["labels"][name]["n_works"] == entry["n_works"]


def test_single_choice_one_vs_rest_and_level() -> None:
    """Per-label entries of a single-choice question are one-vs-rest; level reaches alpha."""
    matrix = _kripp_matrix()
    spec = [QuestionSpec("q", "single", ["1", "2", "3", "4", "5"])]
    report = agreement_report(_long(matrix), spec, n_boot=200, level="ordinal")
    entry = report["questions"]["q"]
    assert entry["krippendorff_alpha"] == pytest.approx(krippendorff_alpha(matrix, "ordinal"))
    assert entry["alpha_ci"][0] <= entry["krippendorff_alpha"] <= entry["alpha_ci"][1]
    binary = np.where(np.isnan(matrix), np.nan, (matrix == 3).astype(float))
    assert entry["labels"]["3"]["krippendorff_alpha"] == pytest.approx(krippendorff_alpha(binary))
    with pytest.raises(ValueError):
        agreement_report(_long(matrix), spec, level="cardinal")


def test_equal_raters_fleiss_is_statsmodels() -> None:
    """Every work with the same number of labels: Fleiss' kappa is statsmodels' value."""
    frame = _diagnoses()
    labels = sorted(pd.unique(frame.to_numpy().ravel()))
    entry = agreement_report(
        _long(frame.to_numpy(), fmt=str), [QuestionSpec("q", "single", labels)], n_boot=0
    )["questions"]["q"]
    counts, _ = aggregate_raters(frame.to_numpy())
    assert entry["fleiss_kappa"] == fleiss_kappa(counts)


def test_value_normalisation_duplicates_and_unknown_labels() -> None:
    """Booleans/True-False for binary, 'a;b' strings for multi, last duplicate wins, extras kept."""
    rows = [
        ("W1", "r1", "about", True),
        ("W1", "r2", "about", "YES"),
        ("W2", "r1", "about", "no"),
        ("W2", "r2", "about", False),
        ("W1", "r1", "cats", "x;y"),
        ("W1", "r2", "cats", ("y", "x")),
        ("W2", "r1", "cats", []),
        ("W2", "r2", "cats", np.array([], dtype=object)),
        ("W1", "r1", "genre", "a"),
        ("W1", "r1", "genre", "b"),  # the later label of r1 on W1 counts
        ("W1", "r2", "genre", "b"),
        ("W2", "r1", "genre", "zzz"),  # not in the schema: kept as an extra label
        ("W2", "r2", "genre", "zzz"),
        ("W3", "r1", "genre", None),  # not answered: ignored
        ("W9", "r9", "other", "ignored"),
    ]
    labels = pd.DataFrame(rows, columns=["work_id", "annotator", "question", "value"])
    q = agreement_report(labels, SPECS, n_boot=0)["questions"]
    assert q["about"]["percent_agreement"] == 1.0 and q["about"]["n_labels"] == 4
    assert q["cats"]["percent_agreement"] == 1.0
    assert q["genre"]["n_labels"] == 4 and q["genre"]["n_works"] == 2
    assert q["genre"]["percent_agreement"] == 1.0
    assert list(q["genre"]["labels"]) == ["a", "b", "c", "d", "zzz"]


def test_question_specs_and_validation() -> None:
    """Specs from a mapping or from schema-like objects; bad kind and columns are refused."""
    specs = question_specs({"genre": ("single", ["a", "b"]), "about": ("binary", ["yes", "no"])})
    assert specs == [
        QuestionSpec("genre", "single", ("a", "b")),
        QuestionSpec("about", "binary", ("yes", "no")),
    ]
    assert question_specs(specs) == specs
    with pytest.raises(ValueError):
        QuestionSpec("q", "ranking", ["a"])
    with pytest.raises(ValueError):
        agreement_report(pd.DataFrame({"work_id": ["W1"]}), specs)
    with pytest.raises(ValueError):
        agreement_report(_synthetic(), SPECS, n_boot=-1)
    empty = pd.DataFrame(columns=["work_id", "annotator", "question", "value"])
    report = agreement_report(empty, SPECS)
    _assert_json_ready(report)
    assert report["questions"]["genre"]["n_works"] == 0


def test_json_safe() -> None:
    """NaN/inf/NA become None, numpy scalars and arrays become Python values, recursively."""
    value = {
        "a": np.float64("nan"),
        "b": [np.int64(3), np.float32(0.5), float("inf"), (np.bool_(True), None)],
        2: np.array([1.0, np.nan]),
        "c": pd.NA,
        "d": {"e": -np.inf, "f": "text"},
    }
    out = json_safe(value)
    assert out == {
        "a": None,
        "b": [3, 0.5, None, [True, None]],
        "2": [1.0, None],
        "c": None,
        "d": {"e": None, "f": "text"},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        json.dumps(out, allow_nan=False)
