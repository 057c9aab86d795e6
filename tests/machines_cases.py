"""Deterministic (answers, record) pairs with every awkward case, for the machines golden test.

Records come from labeling.frames.synth (seed-shaped); then some are damaged the way real frames
are: missing or mistyped score vectors and calls, booleans among scores, null single-choice
calls, labels outside the schema. Human answers mix the teachers' calls with noise.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from labeling.frames.synth import iter_synthetic_records
from labeling.schema import Schema, get_path


def _damage(record: dict[str, Any], i: int) -> dict[str, Any]:
    """Break record i in one of several ways (most records stay intact)."""
    pred = record["prediction"]
    kind = i % 23
    if kind == 1:
        pred.pop("category_scores_codex", None)
    elif kind == 2:
        pred["domain_scores_gemma"] = pred["domain_scores_gemma"][:-1]  # wrong length
    elif kind == 3:
        pred["genre_scores_codex"][0] = True  # a boolean among the scores
    elif kind == 4:
        pred["study_design_codex"] = None  # abstention
    elif kind == 5:
        pred["genre_gemma"] = 7  # wrong type
    elif kind == 6:
        pred["about_ca_system_score_codex"] = "high"
    elif kind == 7:
        pred["consensus_categories"] = None
    elif kind == 8:
        pred["candidate_categories"] = ["Metaresearch", 3]
    elif kind == 9:
        pred["about_ca_topic_consensus"] = None
    elif kind == 10:
        pred["domain_scores_codex"][1] = float("nan")
    elif kind == 11:
        record.pop("machine_scores", None)
    return record


def cases(schema: Schema, n: int = 400, seed: int = 5) -> list[tuple[dict, dict]]:
    """n (final answers, record) pairs."""
    rng = np.random.default_rng(seed)
    out = []
    for i, rec in enumerate(iter_synthetic_records(n, seed=seed, schema=schema)):
        rec = _damage(copy.deepcopy(rec), i)
        answers: dict[str, Any] = {}
        for q in schema.questions:
            if rng.random() < 0.03:
                continue  # not answered
            call = get_path(rec, q.calls.get("codex", "")) if q.calls else None
            if q.kind == "multi":
                base = set(call) if isinstance(call, list) else set()
                base = {x for x in base if isinstance(x, str)}
                if rng.random() < 0.3:
                    base ^= {q.labels[int(rng.integers(len(q.labels)))]}
                answers[q.name] = [lab for lab in q.labels if lab in base]
            elif q.kind == "binary":
                yes = bool(call) if isinstance(call, bool) else rng.random() < 0.2
                answers[q.name] = "yes" if (yes != (rng.random() < 0.15)) else "no"
            else:
                pick = (
                    call
                    if call in q.labels and rng.random() < 0.7
                    else q.labels[int(rng.integers(len(q.labels)))]
                )
                answers[q.name] = pick if i % 97 else "not_a_schema_label"
        out.append((answers, rec))
    return out
