"""Inter-rater agreement report over a long table of labels (pure functions, JSON-ready output).

Input: a DataFrame with one row per label, columns ``work_id``, ``annotator``, ``question``,
``value``; ``value`` is a label name (single), "yes"/"no" (binary; True/False also accepted) or
a list/tuple of label names, possibly empty (multi; a "a;b" string is split on ";"). The
schema is a list of ``QuestionSpec``. Choices, in one place:

- Missing data: a work labelled by only some annotators is used with the labels it has (alpha,
  AC1, Fleiss and percent agreement all take units with varying numbers of ratings); works are
  never dropped. A None/NaN value is "not answered" and ignored; an empty multi-label list is
  an answer ("none of these"). Duplicate (work, annotator, question) rows: the last one counts.
- Krippendorff's alpha: point estimate by the ``krippendorff`` package (value counts of units
  with >= 2 labels, as alpha defines). ``level`` applies to single-choice questions (schema
  order = value order, values 1..K); binary and per-label alphas are the same at every level,
  and the question-level alpha of a multi-label question treats each distinct label *set* as
  one nominal value. When the package would need more than ``PACKAGE_CELL_BUDGET`` cells
  (units x values^2: large campaigns, or many distinct label sets) the vectorised
  coincidence-matrix version (tested equal to the package to 1e-10) gives the point estimate
  instead, from the distinct count patterns that the bootstrap uses.
- Fleiss' kappa: statsmodels when every work of the question has the same number (>= 2) of
  labels (and the values fit a dense table, <= ``SPARSE_FROM``); otherwise the generalisation to
  varying raters (irrCAC fleiss.kappa.raw), which equals Fleiss' formula when raters are equal
  and uses every work.
- Gwet's AC1 and percent agreement: the multi-rater formulas with varying raters
  (``agreement_stats``); K = number of schema labels (plus any unknown values met), 2 for binary
  and per-label entries, the number of distinct label sets for a multi-label question.
- Per label: multi-label labels are binary "present?" questions; single-choice labels are
  one-vs-rest ("chosen?"); binary questions have no per-label entries (they are one already).
- Cohen's kappa: scikit-learn's unweighted formula (``kappa_from_table`` on the pair's
  contingency table, tested equal to ``cohen_kappa_score``), for every pair of annotators
  with >= ``min_pair_n`` (default and least 2) works in common on a question (multi-label:
  label sets as nominal values), each with its n so that readers judge by n. A pair whose
  kappa is undefined (both annotators gave one and the same value on every common work) is
  listed with kappa None.
  Pairs that share fewer works are listed in ``pairs_left_out`` with n and the reason; pairs
  with no work in common are not pairs.
- Bootstrap: works of a question resampled with replacement ``n_boot`` times (seeded per
  question), 95% percentile intervals for alpha and Fleiss' kappa; replicates where the
  coefficient is undefined are left out, and the interval is None when fewer than half are
  defined. An interval is shown only when the question has at least ``MIN_CI_WORKS`` (10)
  works with two labels or more and the interval contains its estimate (``checked_ci``: a
  percentile interval at 8 works can lie beside it); otherwise it is None and
  ``alpha_ci_reason`` / ``kappa_ci_reason`` say why (None when an interval is given).
  Every coefficient is a function of how many works of each distinct count pattern
  (the labels a work received, as counts per value) a resample holds, and drawing n works with
  replacement draws the patterns Multinomial(n, pattern frequency / n) times: each resample
  is drawn that way (``resample_patterns``), the same resample law at a cost bounded by the
  patterns (a few hundred) instead of the works (50,000 works x 200 replicates: 10 million
  draws and a product with a works x patterns matrix before, 200 multinomials now).
- Values not in the schema are kept, as extra labels after the schema's (never dropped).
- Undefined measures are None, never NaN.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse
from threadpoolctl import threadpool_limits

from labeling.stats.coefficients import (
    alpha_from_counts,
    bootstrap_from_counts,
    check_level,
    checked_ci,
    cohen_kappa,
    count_features,
    finite_or_none,
    fleiss_kappa_from_counts,
    gwet_ac1_from_counts,
    json_safe,
    krippendorff_alpha,
    measures_from_sums,
    package_alpha_from_counts,
    percent_agreement_from_counts,
    percentile_ci,
    resample_patterns,
    unique_rows,
    weighted_sums,
)
from labeling.stats.pairs import pair_kappas

__all__ = [
    "QuestionSpec",
    "agreement_report",
    "alpha_from_counts",
    "bootstrap_from_counts",
    "cohen_kappa",
    "fleiss_kappa_from_counts",
    "gwet_ac1_from_counts",
    "json_safe",
    "krippendorff_alpha",
    "percent_agreement_from_counts",
    "question_specs",
]

KINDS = ("single", "binary", "multi")
BINARY_LABELS = ("yes", "no")
_BINARY_WORDS = {"yes": "yes", "no": "no", "true": "yes", "false": "no"}
# The package builds a units x values x values array on every call: on 50,000 works its 41
# calls (6 questions and their labels) took 1.3 s of the large bench's report. Above this the
# vectorised alpha (equal to the package's, tested) is computed on the distinct patterns.
PACKAGE_CELL_BUDGET = 100_000
SPARSE_FROM = 64  # more distinct values than this: sparse count matrices
REQUIRED_COLUMNS = ("work_id", "annotator", "question", "value")
MIN_PAIR_N = 2  # Cohen's kappa of a pair needs two common works at least


@dataclass(frozen=True)
class QuestionSpec:
    """One question as agreement needs it: name, kind ("single"/"binary"/"multi"), labels."""

    name: str
    kind: str
    labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Check the kind and store the labels as a tuple of str."""
        if self.kind not in KINDS:
            raise ValueError(f"question {self.name!r}: kind must be one of {KINDS}")
        object.__setattr__(self, "labels", tuple(str(x) for x in self.labels))


def question_specs(schema: Mapping[str, Any] | Sequence[Any]) -> list[QuestionSpec]:
    """QuestionSpecs from a mapping name -> (kind, labels) or objects with name, kind, labels.

    Args:
        schema: ``{"genre": ("single", ["methods", ...]), ...}``, or a sequence of
            ``QuestionSpec`` / schema question objects (anything with name, kind, labels).
    """
    if isinstance(schema, Mapping):
        return [QuestionSpec(name, kind, tuple(labels)) for name, (kind, labels) in schema.items()]
    return [QuestionSpec(q.name, q.kind, tuple(q.labels)) for q in schema]


@dataclass
class _Encoded:
    """A question's labels as integer codes, with the value -> label membership matrix."""

    units: np.ndarray
    raters: np.ndarray
    values: np.ndarray
    n_values: int
    label_names: list[str]
    membership: np.ndarray


def _binary_word(value: Any) -> str:
    """Normalise a binary answer: booleans and yes/no/true/false (any case) to "yes"/"no"."""
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    text = str(value).strip()
    return _BINARY_WORDS.get(text.lower(), text)


def _label_set(value: Any) -> tuple[str, ...]:
    """Normalise a multi-label answer (list, tuple, set, array or "a;b" string) to label names."""
    if isinstance(value, str):
        items: Any = value.split(";")
    elif isinstance(value, np.ndarray):
        items = value.tolist()
    elif isinstance(value, list | tuple | set | frozenset):
        items = value
    else:  # a lone label given as a scalar
        items = [value]
    return tuple(dict.fromkeys(s for s in (str(x).strip() for x in items) if s))


def _encode_values(spec: QuestionSpec, raw: np.ndarray) -> tuple[np.ndarray, int, list, np.ndarray]:
    """Value codes of one question's answers: (codes, n_values, label names, membership)."""
    if spec.kind == "multi":
        if len(raw) == 0:
            return np.zeros(0, np.int64), 0, list(spec.labels), np.zeros((0, len(spec.labels)))
        # Objects first (a long table often repeats one list object per distinct answer),
        # then their contents: the same codes as factorizing every answer as a tuple.
        by_object, _ = pd.factorize(np.fromiter(map(id, raw), dtype=np.int64, count=len(raw)))
        firsts = np.unique(by_object, return_index=True)[1]
        keys = pd.Series(
            [
                tuple(v) if isinstance(v, list | set | frozenset | np.ndarray) else v
                for v in raw[firsts]
            ],
            dtype=object,
        )
        content, uniques = pd.factorize(keys)
        inv = content[by_object]
        sets = [_label_set(u) for u in uniques]
        known = set(spec.labels)
        extras = sorted({x for s in sets for x in s} - known)
        names = list(spec.labels) + extras
        position = {name: i for i, name in enumerate(names)}
        present = np.zeros((len(sets), len(names)), dtype=bool)
        for row, s in enumerate(sets):
            present[row, [position[x] for x in s]] = True
        distinct, set_of_unique = np.unique(present, axis=0, return_inverse=True)
        codes = set_of_unique.reshape(-1)[inv]
        return codes, len(distinct), names, distinct.astype(np.int64)
    inv, uniques = pd.factorize(pd.Series(raw, dtype=object))
    norm = _binary_word if spec.kind == "binary" else (lambda v: str(v).strip())
    words = [norm(u) for u in uniques]
    base = list(spec.labels)
    if spec.kind == "binary":
        base = list(dict.fromkeys(_binary_word(x) for x in base or BINARY_LABELS))
    domain = base + sorted(set(words) - set(base))
    position = {name: i for i, name in enumerate(domain)}
    codes = np.array([position[w] for w in words], dtype=np.int64)[inv]
    if spec.kind == "binary":
        return codes, len(domain), [], np.zeros((len(domain), 0), dtype=np.int64)
    return codes, len(domain), domain, np.eye(len(domain), dtype=np.int64)


def _count_matrix(local: np.ndarray, codes: np.ndarray, n_units: int, n_values: int) -> Any:
    """Units x values counts; scipy sparse when values are many (e.g. distinct label sets)."""
    if n_values > SPARSE_FROM:
        ones = np.ones(len(local), dtype=np.int64)
        return sparse.csr_matrix((ones, (local, codes)), shape=(n_units, n_values))
    raw = np.bincount(local * n_values + codes, minlength=n_units * n_values)
    return raw.reshape(n_units, n_values)


def _label_matrices(counts: Any, membership: np.ndarray) -> list[np.ndarray]:
    """Per-label two-column count matrices [not label, label] of a units x values matrix."""
    m = np.asarray(counts.sum(axis=1)).reshape(-1)
    present = np.asarray(counts @ membership)
    return [np.column_stack([m - present[:, j], present[:, j]]) for j in range(present.shape[1])]


def _alpha_point(raw: Any, sums: np.ndarray, level: str, values: np.ndarray) -> float | None:
    """Alpha by the krippendorff package, or vectorised when the package would be too large."""
    k = raw.shape[1]
    pairable = int((np.asarray(raw.sum(axis=1)).reshape(-1) >= 2).sum())
    if pairable * k * k <= PACKAGE_CELL_BUDGET:
        dense = raw.toarray() if sparse.issparse(raw) else raw
        return package_alpha_from_counts(dense, level, values)
    return finite_or_none(measures_from_sums(sums, k, level, values)["alpha"][0])


def _entry(n_works: int, n_labels: int, **measures: Any) -> dict[str, Any]:
    """One report entry in the documented key order."""
    keys = (
        "krippendorff_alpha",
        "alpha_ci",
        "alpha_ci_reason",
        "fleiss_kappa",
        "kappa_ci",
        "kappa_ci_reason",
    )
    out: dict[str, Any] = {"n_works": n_works, "n_labels": n_labels}
    out.update({k: measures.get(k) for k in (*keys, "gwet_ac1", "percent_agreement")})
    return out


class _QuestionStats:
    """Everything the report needs from one question: point estimates, then bootstrap sums."""

    def __init__(self, spec: QuestionSpec, enc: _Encoded, level: str) -> None:
        """Build the count matrices, their distinct rows and their additive features."""
        self.spec, self.enc = spec, enc
        local, self.works = pd.factorize(enc.units)
        raw = _count_matrix(local, enc.values, len(self.works), enc.n_values)
        self.level = level if spec.kind == "single" else "nominal"
        patterns, _, self.freq = unique_rows(raw)
        blocks_raw = [raw, *_label_matrices(raw, enc.membership)]
        blocks_pat = [patterns, *_label_matrices(patterns, enc.membership)]
        self.levels = [self.level] + ["nominal"] * (len(blocks_raw) - 1)
        self.ks = [b.shape[1] for b in blocks_raw]
        # value of each column (ordered levels): schema order 1..K; per-label blocks are 0/1
        self.values = [np.arange(1, k + 1, dtype=float) for k in self.ks]
        self.features = [
            count_features(b, outer=lv != "nominal")
            for b, lv in zip(blocks_pat, self.levels, strict=True)
        ]
        m = np.asarray(raw.sum(axis=1)).reshape(-1)
        self.pairable = int((m >= 2).sum())  # what an interval rests on (checked_ci)
        # statsmodels' Fleiss' kappa needs the same number (>= 2) of labels on every work.
        equal = len(m) > 0 and m.min() == m.max() >= 2
        self.points = []
        for block, feats, k, lv, vals in zip(
            blocks_raw, self.features, self.ks, self.levels, self.values, strict=True
        ):
            sums0 = weighted_sums(self.freq[None, :].astype(float), feats)
            got = measures_from_sums(sums0, k, lv, vals)
            fleiss = finite_or_none(got["fleiss"][0])
            if equal and not sparse.issparse(block):
                fleiss = fleiss_kappa_from_counts(block)
            self.points.append(
                {
                    "krippendorff_alpha": _alpha_point(block, sums0, lv, vals),
                    "fleiss_kappa": fleiss,
                    "gwet_ac1": finite_or_none(got["ac1"][0]),
                    "percent_agreement": finite_or_none(got["pa"][0]),
                }
            )
        self.reps: list[dict[str, list[np.ndarray]]] = [
            {"alpha": [], "fleiss": []} for _ in blocks_raw
        ]

    def add_resamples(self, per_pattern: np.ndarray) -> None:
        """Add one block of bootstrap resamples (resamples x patterns weights)."""
        for i, feats in enumerate(self.features):
            sums = weighted_sums(per_pattern, feats)
            got = measures_from_sums(sums, self.ks[i], self.levels[i], self.values[i])
            self.reps[i]["alpha"].append(got["alpha"])
            self.reps[i]["fleiss"].append(got["fleiss"])

    def result(self) -> dict[str, Any]:
        """The question's report entry, with its per-label entries."""
        n_works, n_labels = len(self.works), len(self.enc.values)
        entries = []
        for point, reps in zip(self.points, self.reps, strict=True):
            cis: dict[str, Any] = {}
            for name, key, r in (
                ("alpha_ci", "krippendorff_alpha", reps["alpha"]),
                ("kappa_ci", "fleiss_kappa", reps["fleiss"]),
            ):
                raw = percentile_ci(np.concatenate(r)) if r and point[key] is not None else None
                ci, why = checked_ci(point[key], raw, self.pairable, resampled=bool(r))
                cis[name], cis[f"{name}_reason"] = ci, why
            entries.append(_entry(n_works, n_labels, **point, **cis))
        out = entries[0]
        out["labels"] = dict(zip(self.enc.label_names, entries[1:], strict=True))
        return out


def _prepare(labels: pd.DataFrame, names: set[str]) -> pd.DataFrame:
    """Keep answered rows of the requested questions; check the columns."""
    missing = [c for c in REQUIRED_COLUMNS if c not in labels.columns]
    if missing:
        raise ValueError(f"labels lack column(s): {', '.join(missing)}")
    frame = labels.loc[:, list(REQUIRED_COLUMNS)]
    keep = frame["question"].isin(names).to_numpy() & ~pd.isna(frame["value"].to_numpy(object))
    return frame.loc[keep].reset_index(drop=True)


def agreement_report(
    labels: pd.DataFrame,
    questions: list[QuestionSpec],
    *,
    n_boot: int = 200,
    seed: int = 0,
    min_pair_n: int = MIN_PAIR_N,
    level: str = "nominal",
) -> dict:
    """Agreement per question and per label, annotator pairs, bootstrap CIs; JSON-ready.

    Args:
        labels: long table, columns work_id, annotator, question, value (see module doc).
        questions: the questions to report, in order (QuestionSpec, schema questions, or a
            mapping name -> (kind, labels)); labels of other questions are ignored.
        n_boot: bootstrap resamples of works per question (0 = no intervals).
        seed: seed of the bootstrap; the same seed and data give the same intervals.
        min_pair_n: fewest common works for an annotator pair to get a Cohen's kappa (>= 2).
        level: Krippendorff level for single-choice questions ("nominal", "ordinal",
            "interval", "ratio").

    Returns:
        {"questions": {name: entry}, "pairs": [...], "pairs_left_out": [...], "min_pair_n",
        "n_boot", "seed"}; pairs: a, b, question, n, cohen_kappa (None where undefined);
        pairs_left_out: a, b, question, n, reason; entry =
        n_works, n_labels, krippendorff_alpha, alpha_ci, alpha_ci_reason, fleiss_kappa,
        kappa_ci, kappa_ci_reason, gwet_ac1, percent_agreement, labels ({label: entry without
        "labels"}); undefined values None; a *_reason says why its interval is None.
    """
    check_level(level)
    if n_boot < 0:
        raise ValueError("n_boot must be >= 0")
    if min_pair_n < MIN_PAIR_N:
        raise ValueError(f"min_pair_n must be >= {MIN_PAIR_N}: a kappa needs two works")
    specs = question_specs(questions)
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate question names in {names}")
    # The matrix products here are small: BLAS threads only add contention (measured 2x slower
    # on a busy 2-core machine), so they are limited to one for the duration of the report.
    with threadpool_limits(limits=1, user_api="blas"):
        return _report(labels, specs, n_boot, seed, min_pair_n, level)


def _report(
    labels: pd.DataFrame, specs: list[QuestionSpec], n_boot: int, seed: int, min_n: int, level: str
) -> dict:
    """The body of ``agreement_report`` (arguments already checked)."""
    frame = _prepare(labels, {s.name for s in specs})
    units, _ = pd.factorize(frame["work_id"])
    raters, rater_names = pd.factorize(frame["annotator"])
    rater_names = np.asarray(rater_names, dtype=object)
    groups = frame.groupby("question", sort=False).indices
    values = frame["value"].to_numpy(object)
    stats: list[_QuestionStats] = []
    pairs: list[dict] = []
    left_out: list[dict] = []
    for spec in specs:
        rows = np.asarray(groups.get(spec.name, np.zeros(0, dtype=np.int64)))
        key = units[rows].astype(np.int64) * len(rater_names) + raters[rows]
        _, last = np.unique(key[::-1], return_index=True)
        rows = np.sort(rows[len(rows) - 1 - last])  # one label per (work, annotator): the last
        codes, n_values, names, membership = _encode_values(spec, values[rows])
        enc = _Encoded(units[rows], raters[rows], codes, n_values, names, membership)
        stats.append(_QuestionStats(spec, enc, level))
        kept, dropped = pair_kappas(
            spec.name, enc.units, enc.raters, enc.values, enc.n_values, rater_names, min_n
        )
        pairs.extend(kept)
        left_out.extend(dropped)
    for i, st in enumerate(stats):
        if len(st.works) == 0:
            continue
        rng = np.random.default_rng([seed, i])
        for per_pattern in resample_patterns(st.freq, n_boot, rng):
            st.add_resamples(per_pattern)
    report = {
        "questions": {st.spec.name: st.result() for st in stats},
        "pairs": pairs,
        "pairs_left_out": left_out,
        "min_pair_n": min_n,
        "n_boot": n_boot,
        "seed": seed,
    }
    return json_safe(report)
