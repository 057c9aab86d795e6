"""Synthetic seed-shaped frames: deterministic, streaming, with realistic score shapes.

Bibliographic fields are drawn here, block by block (each block seeded on its own); the
machine side (teacher scores, calls) comes from labeling.frames.synth_scores. Records stream from
iter_synthetic_records or are written as JSON Lines, in worker processes for large n.
"""

from __future__ import annotations

import gzip
import multiprocessing
import os
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from labeling import collector
from labeling.frames.synth_scores import MachineFields, draw_machine_block
from labeling.schema import Schema, load_schema
from labeling.settings import DEFAULT_SCHEMA

DEFAULT_MODEL_VERSION = "synth-v1"
BLOCK_SIZE = 8_192  # records per independently seeded block (changing it changes output)
TOP_KEYS = (
    "id doi title year lang type venue topic field cited_by is_retracted has_abstract "
    "ca_institutions funders keywords routes retraction screen direct_labels"
).split()
ROUTE_KEYS = "ca_aff ca_fund ca_venue about_ca invisible_to_affiliation_only".split()

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
_STEPS = (1, 3, 7, 9, 11, 13, 17, 19)  # distinct picks for the list lengths used below


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
    columns: tuple[Iterable[Any], ...] = (
        [f"W{i}" for i in ids.tolist()],
        [f"10.{p}/synth.{start + i}" for i, p in enumerate(prefixes)],
        titles,
        years,
        _choose(rng, _LANGS, n),
        _choose(rng, _TYPES, n),
        _choose(rng, _VENUES, n),
        _choose(rng, _TOPICS, n),
        _choose(rng, _FIELDS, n),
        np.floor(rng.lognormal(1.2, 1.6, n)).astype(np.int64).tolist(),
        (rng.random(n) < 0.001).tolist(),
        (rng.random(n) < 0.75).tolist(),
        inst,
        funders,
        _pick(rng, "kw", rng.integers(3, 10, n))[0],
        routes,
        repeat(None, n),
        repeat(None, n),
        [[] for _ in range(n)],
    )
    return [dict(zip(TOP_KEYS, row, strict=True)) for row in zip(*columns, strict=True)]


def _block_records(
    start: int,
    size: int,
    seed: int,
    schema: Schema,
    model_version: str,
    rate: float,
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
    with collector.paused():  # records hold no reference cycles
        records = _block_records(start, size, seed, schema, model_version, rate, True)
        option = orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY
        data = b"".join([orjson.dumps(r, option=option) for r in records])
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
