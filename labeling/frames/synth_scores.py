"""Synthetic machine side of a frame: correlated teacher scores and the calls they imply.

A latent relevance per work (most works far below the thresholds, a tail of likely
meta-research); each teacher head reads it with its own noise, so the heads mostly agree.
Calls follow the schema, computed from the rounded scores written: candidate = union of
heads at or above the question's threshold, consensus = intersection; single-choice calls =
each head's arg-max, candidate = the call of the head surer of its call when that score
reaches the threshold, consensus = the shared call when both reach it. A small share of
works gets a call that is not its head's arg-max (candidate and consensus follow the calls),
as in real frames. teacher_disagreement_score = largest |codex - gemma| over multi and
binary scores; threshold_uncertainty_score = largest closeness of any such score to its
threshold (1 = on it, 0 = at 0 or 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from typing import Any, cast

import numpy as np
import orjson

from labeling.schema import Question, Schema

PREDICTION_STATUS = "machine_predicted_unvalidated"
VALIDATION_STATUS = "score_only:v0-immature-baseline"
NOTE = (
    "Baseline scores from an immature model (maturity gate not passed). "
    "Scores rank; they never assert a category."
)
SIG_DIGITS = 7
TAIL_RATE = 0.08
MACHINE_KEYS = (
    "provisional baseline maturity_gate_passed score_opus score_gpt score_spread "
    "validation_status note"
).split()
# Prediction keys follow the seed record's order; keys a custom schema adds come after.
SEED_RECORD = Path(__file__).resolve().parents[1] / "data" / "seed_record.json"
SEED_PREDICTION_ORDER = list(orjson.loads(SEED_RECORD.read_bytes())["prediction"])

# Meta-research categories that tend to come together (primary first), and how often.
_CATEGORY_GROUPS = ((0, 7, 6), (1, 2, 0), (2, 0), (3, 5), (4, 0), (5, 6, 3), (6, 5), (7, 0))
_CATEGORY_WEIGHTS = (0.25, 0.08, 0.12, 0.17, 0.12, 0.1, 0.08, 0.08)


@dataclass
class MachineBlock:
    """Teacher scores of a block of works by score path ((n, k) or (n,) arrays), adjustable.

    `inconsistent` works get the runner-up label for the single-choice call `flip` picks.
    """

    scores: dict[str, np.ndarray]
    score_opus: np.ndarray
    score_gpt: np.ndarray
    inconsistent: np.ndarray
    flip: np.ndarray

    def __len__(self) -> int:
        """Number of works in the block."""
        return int(self.score_opus.shape[0])


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """Logistic function."""
    return 1.0 / (1.0 + np.exp(-x))


def _rowmax(x: np.ndarray) -> np.ndarray:
    """Row maxima of a matrix; a vector as is."""
    return x.max(axis=1) if x.ndim == 2 else x


def _softmax(x: np.ndarray) -> np.ndarray:
    """Row-wise softmax."""
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def round_sig(x: np.ndarray, digits: int = SIG_DIGITS) -> np.ndarray:
    """Clip to [0, 1] and round to `digits` significant digits (short JSON, like the seed's).

    Args:
        x: array of scores.
        digits: significant digits to keep.
    """
    x = np.clip(np.asarray(x, dtype=np.float64), 0.0, 1.0)
    positive = x > 1e-12
    safe = np.where(positive, x, 1.0)
    scale = np.power(10.0, (digits - 1 - np.floor(np.log10(safe))).astype(np.int64))
    return np.where(positive, np.round(x * scale) / scale, 0.0)


def _scored(schema: Schema, kind: str) -> list[Question]:
    """Questions of a kind that have scores from (at least) two teachers."""
    return [q for q in schema.questions if q.kind == kind and len(q.scores) >= 2]


def _teachers(schema: Schema) -> tuple[str, str]:
    """The schema's two teachers (ValueError when it has fewer)."""
    if len(schema.teachers) < 2:
        raise ValueError("synthetic frames need a schema with two teachers")
    return schema.teachers[0], schema.teachers[1]


def draw_machine_block(
    rng: np.random.Generator, n: int, schema: Schema, *, inconsistent_rate: float = 0.005
) -> MachineBlock:
    """Draw teacher scores for n works: most near 0, a long tail, the two heads correlated.

    Args:
        rng: the random generator (determines everything drawn).
        n: number of works.
        schema: gives each question's score paths and vector length.
        inconsistent_rate: share of works with one single-choice call that is not the arg-max.
    """
    t1, t2 = _teachers(schema)
    tail = rng.random(n) < TAIL_RATE
    z = np.where(tail, rng.normal(0.2, 1.8, n), rng.normal(-5.0, 1.1, n))
    bare = rng.random(n) < 0.04
    scores: dict[str, np.ndarray] = {}
    rows = np.nonzero(tail)[0]
    for q in _scored(schema, "multi"):
        k = len(q.labels)
        shared = rng.normal(-7.0, 1.2, (n, k)) + 0.25 * z[:, None]
        primary = rng.choice(len(_CATEGORY_GROUPS), size=rows.size, p=_CATEGORY_WEIGHTS)
        for rank, weight in enumerate((1.0, 0.55, 0.35)):
            c = np.array([g[rank] if rank < len(g) else -1 for g in _CATEGORY_GROUPS])[primary]
            ok = (c >= 0) & (c < k)
            r, c = rows[ok], c[ok]
            shared[r, c] = np.maximum(shared[r, c], weight * z[r] + rng.normal(0, 0.8, r.size))
        if k >= 9:  # the last category is "insufficient payload": bare records
            shared[:, k - 1] = np.where(bare, rng.normal(0.5, 1.5, n), rng.normal(-5, 1.2, n))
        for t in (t1, t2):
            scores[q.scores[t]] = _sigmoid(shared + rng.normal(0, 0.6, (n, k)))
    for i, q in enumerate(_scored(schema, "binary")):
        hit = rng.random(n) < 0.03 * (i + 1)
        shared = np.where(hit, rng.normal(0.3, 2.0, n), rng.normal(-5.5 + i, 1.4, n))
        for t in (t1, t2):
            scores[q.scores[t]] = _sigmoid(shared + rng.normal(0, 0.7, n))
    singles = _scored(schema, "single")
    for q in singles:
        k = len(q.labels)
        prior = np.linspace(2.0, 0.5, k)
        truth = rng.choice(k, size=n, p=prior / prior.sum())
        base = rng.normal(0.0, 1.0, (n, k))
        base[np.arange(n), truth] += rng.uniform(1.5, 7.0, n)
        for t in (t1, t2):
            scores[q.scores[t]] = _softmax(base + rng.normal(0, 0.9, (n, k)))
    opus = _sigmoid(0.9 * z + rng.normal(0, 0.6, n) + 0.6)
    gpt = _sigmoid(0.75 * z + rng.normal(0, 1.0, n) + 1.6)
    inconsistent = (rng.random(n) < inconsistent_rate) & bool(singles)
    flip = rng.integers(0, max(1, 2 * len(singles)), n)
    return MachineBlock(scores, opus, gpt, inconsistent, flip)


def _single_calls(q: Question, a: np.ndarray, b: np.ndarray, flips: list[np.ndarray]) -> list:
    """Each head's call (arg-max, or runner-up where flipped), then candidate and consensus."""
    labels = np.array(q.labels, dtype=object)
    rows = np.arange(a.shape[0])
    picks, tops = [], []
    for vec, flip in ((a, flips[0]), (b, flips[1])):
        idx = vec.argmax(axis=1)
        if flip.any():
            idx[flip] = np.argsort(vec[flip], axis=1)[:, -2]
        picks.append(idx)
        tops.append(vec[rows, idx])
    (ia, ib), (top_a, top_b) = picks, tops
    # Candidate and consensus follow the calls (as in the seed), thresholded on their scores.
    best = np.where(top_a >= top_b, ia, ib)
    # cast: numpy's stubs take where(cond, <Any>, None) for the one-argument form (a tuple).
    cand = cast(np.ndarray, np.where(np.maximum(top_a, top_b) >= q.threshold, labels[best], None))
    agree = (ia == ib) & (np.minimum(top_a, top_b) >= q.threshold)
    cons = cast(np.ndarray, np.where(agree, labels[ia], None))
    return [labels[ia].tolist(), labels[ib].tolist(), cand.tolist(), cons.tolist()]


def _label_lists(masks: list[int], labels: tuple[str, ...]) -> list[list[str]]:
    """Bit masks to label lists in schema order (a fresh list per work)."""
    table: dict[int, list[str]] = {}
    out = []
    for mask in masks:
        found = table.get(mask)
        if found is None:
            found = table[mask] = [lab for j, lab in enumerate(labels) if mask >> j & 1]
        out.append(found.copy())
    return out


class MachineFields:
    """Per-work `prediction` and `machine_scores` dicts of a MachineBlock, built at once."""

    def __init__(
        self, block: MachineBlock, schema: Schema, model_version: str, *, as_numpy: bool = False
    ) -> None:
        """Compute calls and summary scores for the whole block.

        Args:
            block: the drawn (and possibly adjusted) teacher scores.
            schema: gives score and call paths, labels and thresholds.
            model_version: written to prediction.model_version.
            as_numpy: score vectors as numpy rows (for orjson.OPT_SERIALIZE_NUMPY), not lists.
        """
        t1, t2 = _teachers(schema)
        n = len(block)
        floats: dict[str, np.ndarray] = {}  # rounded score arrays, by record path
        other: dict[str, list[Any]] = {}  # calls, by record path
        disagreement, uncertainty = np.zeros(n), np.zeros(n)
        single_index = 0
        for q in schema.questions:
            if len(q.scores) < 2:
                continue
            a = floats[q.scores[t1]] = round_sig(block.scores[q.scores[t1]])
            b = floats[q.scores[t2]] = round_sig(block.scores[q.scores[t2]])
            thr, paths = q.threshold, [q.calls.get(key) for key in (t1, t2, "candidate")]
            paths.append(q.calls.get("consensus"))
            if q.kind == "single":
                flips = [block.inconsistent & (block.flip == 2 * single_index + w) for w in (0, 1)]
                values = _single_calls(q, a, b, flips)
                single_index += 1
            else:
                disagreement = np.maximum(disagreement, _rowmax(np.abs(a - b)))
                for s in (a, b):
                    close = 1.0 - np.abs(s - thr) / max(thr, 1.0 - thr)
                    uncertainty = np.maximum(uncertainty, _rowmax(close))
                union, inter = (a >= thr) | (b >= thr), (a >= thr) & (b >= thr)
                if q.kind == "multi":
                    bits = 1 << np.arange(len(q.labels), dtype=np.int64)
                    values = [
                        None,
                        None,
                        _label_lists((union.astype(np.int64) @ bits).tolist(), q.labels),
                        _label_lists((inter.astype(np.int64) @ bits).tolist(), q.labels),
                    ]
                else:
                    values = [None, None, union.tolist(), inter.tolist()]
            for path, column in zip(paths, values, strict=True):
                if path and column is not None:
                    other[path] = column
        floats["prediction.teacher_disagreement_score"] = round_sig(disagreement)
        floats["prediction.threshold_uncertainty_score"] = round_sig(uncertainty)
        for path, mat in floats.items():
            # orjson writes numpy rows ~3x faster than lists of Python floats, same bytes.
            other[path] = list(mat) if as_numpy and mat.ndim == 2 else mat.tolist()
        order = {f"prediction.{k}": i for i, k in enumerate(SEED_PREDICTION_ORDER)}
        keys = sorted(other, key=lambda p: order.get(p, len(order)))
        inside = [k for k in keys if k.startswith("prediction.") and k.count(".") == 1]
        pred_keys = ("model_version", *(k.split(".", 1)[1] for k in inside), "prediction_status")
        self.predictions: list[dict[str, Any]] = [
            dict(zip(pred_keys, values, strict=True))
            for values in zip(
                repeat(model_version, n),
                *(other[k] for k in inside),
                repeat(PREDICTION_STATUS, n),
                strict=True,
            )
        ]
        self._elsewhere = [(k.split("."), other[k]) for k in keys if k not in set(inside)]
        opus, gpt = np.clip(block.score_opus, 0.0, 1.0), np.clip(block.score_gpt, 0.0, 1.0)
        trio = np.column_stack([opus, gpt, np.abs(opus - gpt)]).tolist()
        head, tail = (True, True, False), (VALIDATION_STATUS, NOTE)
        self.machine_scores: list[dict[str, Any]] = [
            dict(zip(MACHINE_KEYS, (*head, *three, *tail), strict=True)) for three in trio
        ]

    def complete(self, record: dict[str, Any], i: int) -> dict[str, Any]:
        """Add work i's `prediction` and `machine_scores` to a bibliographic record.

        Args:
            record: the record to complete (changed in place and returned).
            i: the work's index in the block.
        """
        record["prediction"] = self.predictions[i]
        record["machine_scores"] = self.machine_scores[i]
        for parts, values in self._elsewhere:
            node = record
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            node[parts[-1]] = values[i]
        return record
