"""Many annotators at once: the soak (20 processes) and two app servers on one database."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from bench.soak import OVERLAP, check, run_soak
from db.engine import make_engine
from labeling.review.campaigns import create_campaign
from tests.factories import add_user, add_works
from tests.servers import app_server, wait_healthy

ROOT = Path(__file__).resolve().parents[2]
SOAK_PROCESSES = 20
SOAK_WORKS = 60


@pytest.mark.slow
def test_soak_twenty_annotators(db_url: str) -> None:
    """20 annotator processes, overlap 2: every label once, no double lease, no error."""
    res = run_soak(db_url, works=SOAK_WORKS, processes=SOAK_PROCESSES)
    print(res.line())
    assert res.violations == []
    assert res.labels == SOAK_WORKS * OVERLAP
    assert res.seconds < 30, res.line()


def test_soak_check_catches_violations(sqlite_url: str) -> None:
    """The soak's checker is not vacuous: it flags overlap, repeats, losses and errors."""
    events = [  # (work, user, t0, t_claimed, t_submit_start, t_submitted, label_id, sid)
        ("W1", 1, 0.0, 1.0, 5.0, 5.1, 1, "a"),
        ("W1", 2, 0.0, 2.0, 3.0, 3.1, 2, "b"),  # claimed while user 1 still held W1
        ("W1", 2, 6.0, 7.0, 8.0, 8.1, 3, "c"),  # user 2 again, and a third label
    ]
    bad = check(sqlite_url, 1, events, ["user 3: OperationalError: database is locked"])
    text = "\n".join(bad)
    assert "database is locked" in text
    assert "leased to 1 and 2 at once" in text
    assert "labels submitted (> 2)" in text
    assert "labelled it twice" in text
    assert "submission a is in the database 0 times" in text


def _claim_all(url: str, campaign_id: int, user_id: int) -> list[str]:
    """Claim and submit for one annotator until the queue is empty; the works it got."""
    from labeling.review.labels import LabelSubmission, submit_label
    from labeling.review.queue import claim_next
    from labeling.schema import load_schema
    from labeling.settings import DEFAULT_SCHEMA
    from tests.factories import answers_for

    engine = make_engine(url)
    schema = load_schema(DEFAULT_SCHEMA)
    got: list[str] = []
    while (claim := claim_next(engine, campaign_id, user_id)) is not None:
        got.append(claim.work_id)
        submit_label(engine, LabelSubmission(
            campaign_id=campaign_id, work_id=claim.work_id, user_id=user_id,
            answers=answers_for(schema), schema_hash=schema.hash, scores_visible=True,
            model_version="m", time_on_item_ms=1, submission_id=f"{user_id}:{claim.work_id}",
        ), schema=schema)  # fmt: skip
    engine.dispose()
    return got


async def _ui_run(
    ws: Any, widgets: list[tuple[str, Any]] | None = None, page: str = ""
) -> tuple[dict[str, str], dict[str, str]]:
    """One script run over Streamlit's websocket: widget ids by label, page hashes by title.

    By title, not by URL path: the landing page's path is "" (a role's main page is the
    navigation's default), so a path would name the page differently per role.
    """
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    msg = BackMsg()
    msg.rerun_script.query_string = ""
    msg.rerun_script.page_script_hash = page
    for wid, value in widgets or []:
        state = msg.rerun_script.widget_states.widgets.add()
        state.id = wid
        if value is True:
            state.trigger_value = True
        else:
            state.string_value = value
    await ws.send(msg.SerializeToString())
    ids: dict[str, str] = {}
    pages: dict[str, str] = {}
    while True:
        fwd = ForwardMsg()
        fwd.ParseFromString(await asyncio.wait_for(ws.recv(), 30))
        kind = fwd.WhichOneof("type")
        if kind == "navigation":
            pages = {p.page_name: p.page_script_hash for p in fwd.navigation.app_pages}
        elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
            element = fwd.delta.new_element
            sub = getattr(element, element.WhichOneof("type"))
            if getattr(sub, "id", "") and getattr(sub, "label", ""):
                ids[sub.label] = sub.id
        elif kind == "script_finished" and fwd.script_finished != 2:  # 2: ended for a rerun
            return ids, pages


async def _open_label_page(
    base: str, name: str, password: str, opened: asyncio.Queue[str], done: asyncio.Event
) -> None:
    """Log in as `name` over the app's websocket, open the label page, hold the session."""
    import websockets

    ws_url = base.replace("http://", "ws://") + "/_stcore/stream"
    async with websockets.connect(ws_url, subprotocols=["streamlit"], max_size=None) as ws:
        ids, _ = await _ui_run(ws)
        _, pages = await _ui_run(
            ws, [(ids["Name"], name), (ids["Password"], password), (ids["Sign in"], True)]
        )
        assert "Label" in pages, f"{name} did not get the label page: {sorted(pages)}"
        await _ui_run(ws, page=pages["Label"])
        await opened.put(name)
        await done.wait()


async def _sessions(plan: list[tuple[str, str]], password: str, url: str) -> list[Any]:
    """Run every (server, user) session at once; the leases in the database once all opened.

    Every session must have opened its label page (a failing one fails the test) before the
    leases are read, so a lease claimed early cannot hide a session that went wrong.
    """
    from sqlalchemy import select

    from db.engine import read_session
    from db.models import Lease

    done = asyncio.Event()
    opened: asyncio.Queue[str] = asyncio.Queue()
    tasks = [asyncio.create_task(_open_label_page(b, n, password, opened, done)) for b, n in plan]
    try:
        for _ in plan:
            waiter = asyncio.create_task(opened.get())
            await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
            for t in tasks:
                if t.done():
                    waiter.cancel()
                    raise t.exception() or AssertionError("a session ended before the test")
            await waiter
        engine = make_engine(url)
        with read_session(engine) as session:
            leases = session.execute(select(Lease.user_id, Lease.work_id)).all()
        engine.dispose()
        return list(leases)
    finally:
        done.set()
        await asyncio.gather(*tasks, return_exceptions=True)


@pytest.mark.slow
def test_two_app_servers_share_one_queue(db_url: str, tmp_path: Path) -> None:
    """Two `streamlit run app.py` processes on two ports, one database, one queue.

    What this proves: two real app processes start side by side on one database; four
    annotators log in through the servers' own websocket protocol (two sessions per server,
    all at once, as a browser would drive them) and open the label page, and each server
    claims a lease for its session: four leases, four annotators, four different works. Then,
    while both servers still hold those sessions, two more annotators claim from separate
    processes through the library until the queue is empty: they get disjoint works, none
    of the four leased ones, and together with those cover the campaign. What it does not
    prove: rendering in a browser (tests/e2e/test_e2e_label.py does that in Chromium).
    """
    pytest.importorskip("websockets")
    from labeling.auth.users import add_user as add_account

    works, password = 30, "a long password 1"
    engine = make_engine(db_url)
    add_works(engine, works)
    camp = create_campaign(engine, name="shared", overlap=1)
    ui_users = ["ui_a", "ui_b", "ui_c", "ui_d"]
    ui_ids = {name: add_account(engine, name, "annotator", password).id for name in ui_users}
    lib_users = [add_user(engine, "lib_a"), add_user(engine, "lib_b")]
    engine.dispose()
    logs = [tmp_path / "app_a.log", tmp_path / "app_b.log"]
    with ExitStack() as stack:
        servers = [stack.enter_context(app_server(db_url, log)) for log in logs]
        assert servers[0][0] != servers[1][0]
        for (base, proc), log in zip(servers, logs, strict=True):
            wait_healthy(base, proc, log)
        plan = [(servers[i % 2][0], name) for i, name in enumerate(ui_users)]
        leases = asyncio.run(_sessions(plan, password, db_url))
        assert sorted(u for u, _ in leases) == sorted(ui_ids.values())
        leased = {w for _, w in leases}
        assert len(leased) == len(ui_users), f"two sessions hold one work: {leases}"
        with ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) as pool:
            futures = [pool.submit(_claim_all, db_url, camp.id, uid) for uid in lib_users]
            got = [f.result(timeout=120) for f in futures]
        for (base, proc), log in zip(servers, logs, strict=True):
            assert proc.poll() is None, log.read_text()[-2000:]
            wait_healthy(base, proc, log, timeout=10)
    assert set(got[0]).isdisjoint(got[1])
    assert leased.isdisjoint(got[0] + got[1])
    assert sorted(got[0] + got[1] + sorted(leased)) == [f"W{i:04d}" for i in range(1, works + 1)]
    for (_, proc), log in zip(servers, logs, strict=True):
        assert proc.poll() is not None  # both servers were stopped
        assert "Traceback" not in log.read_text(), log.read_text()[-2000:]
