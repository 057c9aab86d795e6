"""Synthetic seed-shaped frames: deterministic, streaming, with realistic score shapes.

Machine side: a latent relevance per work (most works far below the thresholds, a tail of
likely meta-research); each teacher head reads it with its own noise, so the heads mostly
agree. Calls follow the schema, computed from the rounded scores written: candidate = union
of heads at or above the question's threshold, consensus = intersection; single-choice calls
= each head's arg-max, candidate = the call of the head surer of its call when that score
reaches the threshold, consensus = the shared call when both reach it. A small share of
works gets a call that is not its head's arg-max (candidate and consensus follow the calls),
as in real frames. teacher_disagreement_score = largest |codex - gemma| over multi and
binary scores; threshold_uncertainty_score = largest closeness of any such score to its
threshold (1 = on it, 0 = at 0 or 1).
"""

from __future__ import annotations

import gc
import gzip
import multiprocessing
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from labeling.schema import Question, Schema, load_schema
from labeling.settings import DEFAULT_SCHEMA

DEFAULT_MODEL_VERSION = "synth-v1"
PREDICTION_STATUS = "machine_predicted_unvalidated"
VALIDATION_STATUS = "score_only:v0-immature-baseline"
NOTE = (
    "Baseline scores from an immature model (maturity gate not passed). "
    "Scores rank; they never assert a category."
)
BLOCK_SIZE = 8_192  # records per independently seeded block (changing it changes output)
SIG_DIGITS = 7
TAIL_RATE = 0.08
TOP_KEYS = (
    "id doi title year lang type venue topic field cited_by is_retracted has_abstract "
    "ca_institutions funders keywords routes retraction screen direct_labels"
).split()
ROUTE_KEYS = "ca_aff ca_fund ca_venue about_ca invisible_to_affiliation_only".split()
MACHINE_KEYS = (
    "provisional baseline maturity_gate_passed score_opus score_gpt score_spread "
    "validation_status note"
).split()
# Prediction keys follow the seed record's order; keys a custom schema adds come after.
SEED_RECORD = Path(__file__).resolve().parent / "data" / "seed_record.json"
SEED_PREDICTION_ORDER = list(orjson.loads(SEED_RECORD.read_bytes())["prediction"])

_WORDS = (
    "analysis assessment bias citation clinical community cohort data design development "
    "effects evaluation evidence framework funding global growth health impact indicators "
    "learning management measurement methods model network open outcomes patterns peer "
    "performance policy practice publication quality randomized reporting reproducibility "
    "research review risk science scholarly social study survey systematic trends trial "
    "university validation water children cancer climate energy students adults care"
).split()
_CAPITALIZED = [w[0].upper() + w[1:] for w in _WORDS]
_FIELDS = (
    "Medicine|Computer Science|Social Sciences|Engineering|Environmental Science|Psychology|"
    "Physics and Astronomy|Economics, Econometrics and Finance|Arts and Humanities"
).split("|")
_TOPICS = (
    "scientometrics and bibliometrics research|Meta-analysis and systematic reviews|Research "
    "Data Management Practices|Topic Modeling|Health Policy Implementation|Academic Publishing "
    "and Open Access|Ethics in Clinical Research|Climate Change Policy"
).split("|")
_VENUES = (
    "||PLoS ONE|Scientometrics|BMJ Open|Research Policy|Nature|Journal of Clinical "
    "Epidemiology|Quantitative Science Studies|Canadian Journal of Public Health"
).split("|")
_TYPES = ["article"] * 12 + "review review preprint book-chapter letter editorial dataset".split()
_LANGS = ["en"] * 17 + ["fr", "fr", "de"]
_CA_INSTITUTIONS = (
    "University of Toronto|McGill University|University of British Columbia|University of "
    "Waterloo|Université de Montréal|University of Alberta|McMaster University|University of "
    "Ottawa|Dalhousie University|Queen's University"
).split("|")
_FUNDERS = (  # the first _CA_FUNDERS are Canadian
    "Canadian Institutes of Health Research|Natural Sciences and Engineering Research Council "
    "of Canada|Social Sciences and Humanities Research Council|Canada Foundation for "
    "Innovation|National Institutes of Health|European Research Council"
).split("|")
_CA_FUNDERS = 4
_KEYWORDS = (
    "Computer science|Bibliometrics|Citation|Peer review|Open access|Reproducibility|Psychology|"
    "Medicine|Meta-analysis|Public health|Sociology|Data science|Political science|Engineering|"
    "Economics|Statistics|Biology|Knowledge management|Library science|Research design"
).split("|")
# Meta-research categories that tend to come together (primary first), and how often.
_CATEGORY_GROUPS = ((0, 7, 6), (1, 2, 0), (2, 0), (3, 5), (4, 0), (5, 6, 3), (6, 5), (7, 0))
_CATEGORY_WEIGHTS = (0.25, 0.08, 0.12, 0.17, 0.12, 0.1, 0.08, 0.08)
_STEPS = (1, 3, 7, 9, 11, 13, 17, 19)  # distinct picks for the list lengths used below


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
    cand = np.where(np.maximum(top_a, top_b) >= q.threshold, labels[best], None)
    agree = (ia == ib) & (np.minimum(top_a, top_b) >= q.threshold)
    cons = np.where(agree, labels[ia], None)
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
                    union = _label_lists((union.astype(np.int64) @ bits).tolist(), q.labels)
                    inter = _label_lists((inter.astype(np.int64) @ bits).tolist(), q.labels)
                else:
                    union, inter = union.tolist(), inter.tolist()
                values = [None, None, union, inter]
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
                repeat(model_version, n), *(other[k] for k in inside),
                repeat(PREDICTION_STATUS, n), strict=True,
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


def _joined_table(options: list[str], most: int) -> np.ndarray:
    """Every '; '-joined pick of distinct options, indexed [first, step, count]."""
    m = len(options)
    table = np.empty((m, len(_STEPS), most + 1), dtype=object)
    for a in range(m):
        for si, step in enumerate(_STEPS):
            for c in range(most + 1):
                table[a, si, c] = "; ".join(options[(a + step * j) % m] for j in range(c))
    return table


_TABLES = {
    "inst": _joined_table(_CA_INSTITUTIONS, 2),
    "fund": _joined_table(_FUNDERS, 2),
    "kw": _joined_table(_KEYWORDS, 9),
}


def _pick(rng: np.random.Generator, name: str, counts: np.ndarray) -> tuple[list[str], Any]:
    """Joined picks of `counts` distinct options, and the first two option indexes."""
    table, n = _TABLES[name], counts.shape[0]
    first, step = rng.integers(0, table.shape[0], n), rng.integers(0, len(_STEPS), n)
    second = (first + np.array(_STEPS)[step]) % table.shape[0]
    return table[first, step, counts].tolist(), (first, second)


def _choose(rng: np.random.Generator, options: list[str], n: int) -> list[str]:
    """n options drawn uniformly (with replacement)."""
    return np.array(options, dtype=object)[rng.integers(0, len(options), n)].tolist()


def _bibliographic(rng: np.random.Generator, start: int, n: int, seed: int) -> list[dict]:
    """Plausible bibliographic fields for works start..start+n-1 (ids distinct in a file)."""
    pos = np.arange(start, start + n, dtype=np.int64)
    offset = (seed * 40_503 + 0x5BD1E995) % 2**32
    ids = 1_000_000_000 + (pos * 2_654_435_761 + offset) % 2**32  # a bijection: no repeats
    prefixes = (1000 + (pos * 7919) % 9000).tolist()
    words = rng.integers(0, len(_WORDS), (n, 12)).tolist()
    titles = [
        " ".join([_CAPITALIZED[w[0]], *map(_WORDS.__getitem__, w[1:k])])
        for w, k in zip(words, rng.integers(4, 13, n).tolist(), strict=True)
    ]
    years = np.clip(2025 - np.abs(rng.normal(0, 9, n)).astype(int), 1990, 2025).tolist()
    n_inst = np.where(rng.random(n) < 0.6, rng.integers(1, 3, n), 0)
    n_fund = np.where(rng.random(n) < 0.35, rng.integers(1, 3, n), 0)
    inst, _ = _pick(rng, "inst", n_inst)
    funders, (f1, f2) = _pick(rng, "fund", n_fund)
    ca_fund = ((n_fund >= 1) & (f1 < _CA_FUNDERS)) | ((n_fund >= 2) & (f2 < _CA_FUNDERS))
    ca_aff, ca_venue = n_inst > 0, rng.random(n) < 0.02
    about_ca = (rng.random(n) < 0.1) | ~(ca_aff | ca_fund | ca_venue)  # every work has a route
    route_cols = (ca_aff, ca_fund, ca_venue, about_ca, ~ca_aff)
    routes = [
        dict(zip(ROUTE_KEYS, row, strict=True))
        for row in zip(*(c.tolist() for c in route_cols), strict=True)
    ]
    columns = (
        [f"W{i}" for i in ids.tolist()],
        [f"10.{p}/synth.{start + i}" for i, p in enumerate(prefixes)],
        titles, years, _choose(rng, _LANGS, n), _choose(rng, _TYPES, n),
        _choose(rng, _VENUES, n), _choose(rng, _TOPICS, n), _choose(rng, _FIELDS, n),
        np.floor(rng.lognormal(1.2, 1.6, n)).astype(np.int64).tolist(),
        (rng.random(n) < 0.001).tolist(), (rng.random(n) < 0.75).tolist(), inst, funders,
        _pick(rng, "kw", rng.integers(3, 10, n))[0], routes, repeat(None, n), repeat(None, n),
        [[] for _ in range(n)],
    )
    return [dict(zip(TOP_KEYS, row, strict=True)) for row in zip(*columns, strict=True)]


def _block_records(
    start: int, size: int, seed: int, schema: Schema, model_version: str, rate: float,
    as_numpy: bool = False,
) -> list[dict[str, Any]]:
    """Records start..start+size-1; each block has its own seed, so blocks are independent."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(start,)))
    block = draw_machine_block(rng, size, schema, inconsistent_rate=rate)
    fields = MachineFields(block, schema, model_version, as_numpy=as_numpy)
    return [fields.complete(r, i) for i, r in enumerate(_bibliographic(rng, start, size, seed))]


def iter_synthetic_records(
    n: int,
    seed: int = 0,
    *,
    schema: Schema | None = None,
    model_version: str = DEFAULT_MODEL_VERSION,
    inconsistent_rate: float = 0.005,
) -> Iterator[dict[str, Any]]:
    """Yield n seed-shaped records, drawn block by block (memory does not grow with n).

    Args:
        n: number of records.
        seed: random seed; the same seed gives the same records.
        schema: label schema giving score paths and vector lengths (default: bundled).
        model_version: written to prediction.model_version.
        inconsistent_rate: share of records with a single-choice call that is not the arg-max.
    """
    schema = schema or load_schema(DEFAULT_SCHEMA)
    for start in range(0, n, BLOCK_SIZE):
        size = min(BLOCK_SIZE, n - start)
        yield from _block_records(start, size, seed, schema, model_version, inconsistent_rate)


def _block_bytes(task: tuple[Any, ...]) -> bytes:
    """One block as JSON Lines bytes, gzip-compressed as its own member when asked."""
    start, size, seed, schema, model_version, rate, level = task
    gc_was_enabled = gc.isenabled()
    gc.disable()  # records hold no reference cycles; the collector would only cost time
    try:
        records = _block_records(start, size, seed, schema, model_version, rate, True)
        option = orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY
        data = b"".join([orjson.dumps(r, option=option) for r in records])
    finally:
        if gc_was_enabled:
            gc.enable()
    return gzip.compress(data, compresslevel=level, mtime=0) if level is not None else data


def write_synthetic_frame(
    path: str | Path,
    n: int,
    *,
    seed: int = 0,
    schema: Schema | None = None,
    model_version: str = DEFAULT_MODEL_VERSION,
    inconsistent_rate: float = 0.005,
    compresslevel: int = 1,
    workers: int | None = None,
) -> int:
    """Write n synthetic records as JSON Lines (gzip when path ends in .gz); return n.

    Blocks are drawn independently (in worker processes for large n) and written in order
    via a `.part` file; a .gz file has one gzip member per block (read as one stream). The
    bytes depend on n, seed, schema, model_version and inconsistent_rate, never on workers.

    Args:
        path: output file; parent directories are created.
        n: number of records.
        seed: random seed.
        schema: label schema (default: bundled).
        model_version: written to prediction.model_version.
        inconsistent_rate: share of records with a single-choice call that is not the arg-max.
        compresslevel: gzip level for .gz output (1 is fast and still shrinks ~4x).
        workers: processes to use (default: up to 4, by CPU count; 1 = this process only).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    schema = schema or load_schema(DEFAULT_SCHEMA)
    level = compresslevel if path.name.endswith(".gz") else None
    tasks = (
        (start, min(BLOCK_SIZE, n - start), seed, schema, model_version, inconsistent_rate, level)
        for start in range(0, n, BLOCK_SIZE)
    )
    if workers is None:
        workers = min(4, os.cpu_count() or 1) if n >= 4 * BLOCK_SIZE else 1
    tmp = path.with_name(path.name + ".part")
    with tmp.open("wb") as out:
        if workers <= 1:
            for task in tasks:
                out.write(_block_bytes(task))
        else:
            context = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
                # A bounded window of blocks in flight keeps memory flat whatever n is.
                window: deque[Future[bytes]] = deque()
                for task in tasks:
                    window.append(pool.submit(_block_bytes, task))
                    if len(window) >= 2 * workers:
                        out.write(window.popleft().result())
                while window:
                    out.write(window.popleft().result())
        if n <= 0 and level is not None:
            out.write(gzip.compress(b"", compresslevel=level, mtime=0))
    tmp.replace(path)
    return max(n, 0)
