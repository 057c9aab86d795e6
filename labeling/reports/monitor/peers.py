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
    live = np.flatnonzero(~rows["skipped"].to_numpy(dtype=bool))  # positions in rows
    if len(live) == 0 or not names:
        return pd.DataFrame(columns=mon.MATCH_COLUMNS)
    # Equal answers are common: each distinct text is parsed once.
    codes, texts = pd.factorize(rows["answers"].to_numpy(dtype=object)[live])
    parsed = [dict(orjson.loads(t) or {}) if t else {} for t in texts]
    work_codes = pd.factorize(rows["work_id"].to_numpy(dtype=object)[live])[0]
    found: list[tuple[np.ndarray, int, np.ndarray]] = []
    for j, q in enumerate(names):
        # Answer codes per distinct text first (a few thousand), then per row.
        per_text = [None if is_missing(p.get(q)) else answer_key(p.get(q)) for p in parsed]
        text_code = pd.factorize(pd.Series(per_text, dtype=object), use_na_sentinel=True)[0]
        answer = text_code[codes] if len(codes) else np.zeros(0, dtype=np.int64)
        present = answer >= 0
        if not present.any():
            continue
        work = pd.factorize(work_codes[present])[0]
        compared, match = _against_others(work, answer[present])
        found.append((live[present][compared], j, match[compared]))
    if not found:
        return pd.DataFrame(columns=mon.MATCH_COLUMNS)
    r = np.concatenate([f[0] for f in found])
    q_of = np.concatenate([np.full(len(f[0]), f[1]) for f in found])
    # Built like data.matches_of: text columns as objects, the timestamps kept as they are
    # (a tz-aware column turned into Python objects cost 1.3 s of the large bench).
    return pd.DataFrame(
        {
            "annotator": pd.Series(rows["annotator"].to_numpy(dtype=object)[r], dtype=object),
            "work_id": pd.Series(rows["work_id"].to_numpy(dtype=object)[r], dtype=object),
            "question": pd.Series(np.asarray(names, dtype=object)[q_of], dtype=object),
            "created_at": rows["created_at"].iloc[r].reset_index(drop=True),
            "gold_item": rows["gold_item"].to_numpy(dtype=bool)[r],
            "match": np.concatenate([f[2] for f in found]).astype(bool),
        }
    )[mon.MATCH_COLUMNS]
