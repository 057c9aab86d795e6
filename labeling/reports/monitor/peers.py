"""Each annotator against the others on the same works (leave one out), and against adjudications.

Under the unanimous rule a work is validated only when every label agrees, so an annotator's
agreement with the validated answers is 1.00 by construction, and a "who needs attention"
built on it reassures falsely. Two references do not depend on the annotator's own label:

- the others: on each work and question, the answer that strictly more than half of the
  *other* annotators gave (labeling/stats/majority.py's definition; multi-label answers as
  sets). No other answer, or no majority among them (a tie), and the answer is not compared.
  With two annotators each is compared with the other, so both get the same share: only
  gold checks or adjudications can then tell who is off;
- adjudications: the answer a lead settled on a disputed work (validated_via
  "adjudicated:..."), where the annotator's label was one side of the dispute.

Gold checks (validated elsewhere) are the third reference, computed as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pandas as pd
from sqlalchemy import Engine, select

from db.engine import read_session
from db.models import CampaignItem, Work
from labeling.reports import monitoring as mon
from labeling.review.validation import ADJUDICATED_PREFIX
from labeling.stats.majority import answer_key, is_missing
from labeling.vocabulary import STATUS_VALIDATED


def adjudicated_works(engine: Engine, campaign_id: int) -> set[str]:
    """The campaign's works whose validated answer a lead adjudicated."""
    items = select(CampaignItem.work_id).where(CampaignItem.campaign_id == campaign_id)
    query = select(Work.id).where(
        Work.status == STATUS_VALIDATED,
        Work.validated_via.startswith(ADJUDICATED_PREFIX),
        Work.id.in_(items),
    )
    with read_session(engine) as session:
        return set(session.execute(query).scalars())


def _keys(parsed: list[dict[str, Any]], codes: np.ndarray, question: str) -> np.ndarray:
    """Each row's answer to one question in comparable form (None when not answered)."""
    per_text = [p.get(question) for p in parsed]
    keys = np.array([None if is_missing(v) else answer_key(v) for v in per_text], dtype=object)
    return keys[codes] if len(codes) else np.zeros(0, dtype=object)


def _against_others(work: np.ndarray, answer: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: whether the others on its work have a majority, and whether it is this answer.

    Args:
        work: integer work codes, one per answered row.
        answer: integer answer codes, one per answered row.
    """
    n = len(work)
    if n == 0:
        return np.zeros(0, dtype=bool), np.zeros(0, dtype=bool)
    total = np.bincount(work)[work]  # answers on the row's work
    width = int(answer.max()) + 1
    pairs, inverse, count = np.unique(
        work.astype(np.int64) * width + answer, return_inverse=True, return_counts=True
    )
    inverse = inverse.reshape(-1)
    own = count[inverse] - 1  # the others who gave this row's answer
    others = total - 1
    # Each work's most given answer and the count of its runner-up: the best other answer
    # of a row is the top one, or the runner-up when the row's answer is the top one.
    of_work = pairs // width
    order = np.lexsort((-count, of_work))  # by work, most given first
    w_sorted, c_sorted = of_work[order], count[order]
    starts = np.flatnonzero(np.r_[True, w_sorted[1:] != w_sorted[:-1]])
    n_works = int(work.max()) + 1
    top = np.zeros(n_works, dtype=np.int64)
    top[w_sorted[starts]] = order[starts]
    runner_up = np.zeros(n_works, dtype=np.int64)
    nxt = starts + 1
    has_next = nxt < len(order)
    has_next[has_next] = w_sorted[nxt[has_next]] == w_sorted[starts[has_next]]
    runner_up[w_sorted[starts[has_next]]] = c_sorted[nxt[has_next]]
    is_top = top[work] == inverse
    best_other = np.where(is_top, runner_up[work], count[top[work]])
    mine_wins = 2 * own > others
    other_wins = 2 * best_other > others
    compared = (others > 0) & (mine_wins | other_wins)
    return compared, mine_wins


def peer_matches(rows: pd.DataFrame) -> pd.DataFrame:
    """Each current answer against the others' majority answer on its work (MATCH_COLUMNS).

    Args:
        rows: label_rows (one current label per work and annotator, answers as JSON text).
    """
    names = rows.attrs.get("questions", [])
    answered = rows[~rows["skipped"].to_numpy(dtype=bool)]
    if answered.empty or not names:
        return pd.DataFrame(columns=mon.MATCH_COLUMNS)
    codes, texts = pd.factorize(answered["answers"].to_numpy(dtype=object))
    parsed = [dict(orjson.loads(t) or {}) if t else {} for t in texts]
    work_codes = pd.factorize(answered["work_id"].to_numpy(dtype=object))[0]
    parts = []
    for q in names:
        keys = _keys(parsed, codes, q)
        present = np.array([k is not None for k in keys], dtype=bool)
        if not present.any():
            continue
        answer = pd.factorize(keys[present])[0]
        work = pd.factorize(work_codes[present])[0]
        compared, match = _against_others(work, answer)
        idx = np.flatnonzero(present)[compared]
        part = answered.iloc[idx]
        parts.append(
            pd.DataFrame(
                {
                    "annotator": part["annotator"].to_numpy(dtype=object),
                    "work_id": part["work_id"].to_numpy(dtype=object),
                    "question": q,
                    "created_at": part["created_at"].to_numpy(),
                    "gold_item": part["gold_item"].to_numpy(dtype=bool),
                    "match": match[compared],
                }
            )
        )
    if not parts:
        return pd.DataFrame(columns=mon.MATCH_COLUMNS)
    out = pd.concat(parts, ignore_index=True)
    out["created_at"] = pd.to_datetime(out["created_at"], utc=True)
    return out[mon.MATCH_COLUMNS]
