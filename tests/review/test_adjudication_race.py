"""Two leads in two processes adjudicate the same dispute at a shared instant, 20 rounds.

The status is decided under the work's lock: one adjudication per work is stored, the other
lead is told who settled it and when, and nothing is stored for him.
"""

from __future__ import annotations

import multiprocessing as mp
from collections import defaultdict
from typing import Any

import pytest
from sqlalchemy import select

from db.engine import make_engine, read_session
from db.models import Adjudication, Work
from tests.factories import add_user, answers_for
from tests.review.test_ground_truth import _disputed

ROUNDS = 20


def _lead(url: str, lead: int, name: str, variant: int, ids: list[str], barrier: Any,
          out: Any) -> None:  # fmt: skip
    """Adjudicate each work as soon as the other lead is ready to, too; report each outcome."""
    from labeling.review.validation import AlreadySettled, adjudicate
    from labeling.schema import load_schema
    from labeling.settings import DEFAULT_SCHEMA

    engine = make_engine(url)
    schema = load_schema(DEFAULT_SCHEMA)
    try:
        for wid in ids:
            barrier.wait(timeout=60)
            try:
                adjudicate(engine, wid, answers_for(schema, variant), f"by {name}", lead, None,
                           schema=schema)  # fmt: skip
                out.put((wid, name, "stored", ""))
            except AlreadySettled as exc:
                out.put((wid, name, "refused", str(exc)))
            except Exception as exc:  # noqa: BLE001 - any other error fails the test
                out.put((wid, name, "error", f"{type(exc).__name__}: {exc}"))
    finally:
        engine.dispose()


@pytest.mark.slow
def test_two_leads_adjudicate_the_same_work_at_once(db_url: str, schema: Any) -> None:
    """20 rounds: exactly one adjudication per work; the other lead is told by whom."""
    engine = make_engine(db_url)
    _, ids = _disputed(engine, schema, ROUNDS)
    leads = {
        "ann": (add_user(engine, "ann", "lead"), 0),
        "bob": (add_user(engine, "bob", "lead"), 1),
    }
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_lead, args=(db_url, uid, name, variant, ids, barrier, out))
             for name, (uid, variant) in leads.items()]  # fmt: skip
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in range(2 * ROUNDS)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert [r for r in results if r[2] == "error"] == []
    by_work: dict[str, dict[str, tuple[str, str]]] = defaultdict(dict)
    for wid, name, outcome, message in results:
        by_work[wid][name] = (outcome, message)
    with read_session(engine) as session:
        stored = session.execute(select(Adjudication.work_id, Adjudication.reason)).all()
        finals = dict(session.execute(select(Work.id, Work.final_answers)).all())
    assert sorted(w for w, _ in stored) == ids  # one adjudication per work
    winners = {w: reason.removeprefix("by ") for w, reason in stored}
    for wid in ids:
        outcomes = by_work[wid]
        winner = winners[wid]
        loser = "bob" if winner == "ann" else "ann"
        assert outcomes[winner][0] == "stored"
        assert outcomes[loser][0] == "refused"
        assert f"already settled by '{winner}' (adjudication) at " in outcomes[loser][1]
        assert finals[wid] == answers_for(schema, leads[winner][1])
    engine.dispose()
