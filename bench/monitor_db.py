"""Databases for bench/monitor.py: the demo with a few dozen labels, and a large synthetic one.

The large database: `works` works (minimal records and score columns, as bench/review_queue.py
builds them), a random-sample campaign of labels/2 works with overlap 2 whose works carry
full seed-shaped records (labeling.frames.synth), and `labels` label rows from 10 annotators over 30
days (2% skips, each replaced by a third annotator; accuracy and speed differ per
annotator). Statuses, final answers and status events follow from
labeling.review.validation.evaluate,
as submit_label would have written them. Only the sampled works carry full records: the
Monitor's queries reach works through the campaign's items, never the rest of the frame.
"""

from __future__ import annotations

import hashlib
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import Engine, bindparam, func, insert, select, text, update

from db.engine import make_engine, read_session, upgrade, write_session
from db.models import CampaignItem, Label, StatusEvent, User, Work, utcnow
from db.sqlite_files import SIDE_SUFFIXES
from labeling.review.validation import evaluate
from labeling.schema import Schema, get_path
from labeling.vocabulary import STATUS_UNVALIDATED, STATUS_VALIDATED

CAMPAIGN = "bench-monitor"
N_ANNOTATORS = 10
DAYS = 30
SKIP_RATE = 0.02
# Per annotator: chance of a wrong answer per question, and median seconds per work. One is
# careless, one is very fast and one slow: the Monitor's "who needs attention" should see them.
ERROR = [0.04, 0.05, 0.05, 0.06, 0.04, 0.05, 0.25, 0.05, 0.06, 0.05]
SECONDS = [40, 35, 45, 50, 38, 42, 40, 6, 160, 44]


def _works(engine: Engine, n: int, chunk: int = 20_000) -> None:
    """n works with minimal records and the queue's score columns (bulk, Core)."""
    rng = np.random.default_rng(0)
    opus = rng.beta(0.6, 5.0, n)
    gpt = np.clip(opus + rng.normal(0, 0.08, n), 0, 1)
    now = utcnow()
    for start in range(0, n, chunk):
        rows = []
        for i in range(start, min(n, start + chunk)):
            wid = f"W{4_000_000_000 + i}"
            o, g = round(float(opus[i]), 4), round(float(gpt[i]), 4)
            rows.append(
                {
                    "id": wid,
                    "title": f"Synthetic work {i}",
                    "year": 1990 + i % 36,
                    "record": {"id": wid},
                    "record_hash": hashlib.md5(wid.encode()).hexdigest(),
                    "score_opus": o,
                    "score_gpt": g,
                    "score_max": max(o, g),
                    "score_spread": abs(o - g),
                    "teacher_disagreement": abs(o - g),
                    "threshold_uncertainty": 1 - 2 * abs(max(o, g) - 0.5),
                    "model_version": "synth-v1",
                    "status": STATUS_UNVALIDATED,
                    "is_gold": False,
                    "imported_at": now,
                    "updated_at": now,
                }
            )
        with write_session(engine) as session:
            session.execute(insert(Work), rows)


def _truth(schema: Schema, record: dict[str, Any]) -> dict[str, Any]:
    """A plausible true answer per question: the teachers' consensus, else the first label."""
    out: dict[str, Any] = {}
    for q in schema.questions:
        call = get_path(record, q.calls.get("consensus", "")) if q.calls else None
        if q.kind == "multi":
            out[q.name] = [lab for lab in q.labels if lab in set(call or [])]
        elif q.kind == "binary":
            out[q.name] = "yes" if call else "no"
        else:
            out[q.name] = call if call in q.labels else q.labels[0]
    return out


def _answer(
    schema: Schema, truth: dict[str, Any], error: float, rng: np.random.Generator
) -> dict[str, Any]:
    """An annotator's answers: the truth, each question wrong with probability `error`."""
    out = dict(truth)
    for q in schema.questions:
        if rng.random() >= error:
            continue
        if q.kind == "multi":
            flip = q.labels[int(rng.integers(len(q.labels)))]
            have = set(truth[q.name]) ^ {flip}
            out[q.name] = [lab for lab in q.labels if lab in have]
        elif q.kind == "binary":
            out[q.name] = "no" if truth[q.name] == "yes" else "yes"
        else:
            others = [lab for lab in q.labels if lab != truth[q.name]]
            out[q.name] = others[int(rng.integers(len(others)))]
    return out


def _records(schema: Schema, ids: list[str]) -> dict[str, dict[str, Any]]:
    """Full seed-shaped records for the given work ids (labeling.frames.synth, seed 1)."""
    from labeling.frames.synth import iter_synthetic_records

    out = {}
    for wid, rec in zip(ids, iter_synthetic_records(len(ids), seed=1, schema=schema), strict=True):
        rec["id"] = wid
        out[wid] = rec
    return out


def _label_rows(
    schema: Schema,
    cid: int,
    users: list[int],
    items: list[str],
    records: dict[str, dict[str, Any]],
    n_labels: int,
) -> tuple[list, dict]:
    """Label rows (2 per work, skips replaced) and, per work, [(user, answers|None, time)]."""
    rng = np.random.default_rng(2)
    speed = np.array([1 / s for s in SECONDS])
    weights = speed / speed.sum()  # fast annotators label more works
    start = utcnow() - timedelta(days=DAYS)
    stamps = np.sort(rng.uniform(0, DAYS * 86400, n_labels))
    rows, per_work, k = [], {}, 0
    for wid in items:
        if k >= n_labels:
            break
        truth = _truth(schema, records[wid])
        chosen = list(rng.choice(len(users), size=3, replace=False, p=weights))
        done = 0
        per_work[wid] = []
        while done < 2 and chosen and k < n_labels:
            a = chosen.pop(0)
            skip = rng.random() < SKIP_RATE and chosen
            at = start + timedelta(seconds=float(stamps[k]))
            answers = {} if skip else _answer(schema, truth, ERROR[a], rng)
            secs = float(rng.lognormal(np.log(SECONDS[a]), 0.4))
            rows.append(
                {
                    "campaign_id": cid,
                    "work_id": wid,
                    "user_id": users[a],
                    "version": 1,
                    "answers": answers,
                    "skipped": bool(skip),
                    "skip_reason": "cannot_judge" if skip else None,
                    "flagged": bool(rng.random() < 0.01),
                    "note": None,
                    "confidence": None,
                    "schema_hash": schema.hash,
                    "scores_visible": True,
                    "model_version": "synth-v1",
                    "time_on_item_ms": int(secs * 1000),
                    "source": "app",
                    "submission_id": f"b{cid}:{users[a]}:{wid}",
                    "created_at": at,
                }
            )
            per_work[wid].append((users[a], None if skip else answers, at))
            done += 0 if skip else 1
            k += 1
    return rows, per_work


def _statuses(schema: Schema, cid: int, per_work: dict) -> tuple[list, list, list]:
    """Work updates, status events and item counts that submit_label would have written."""
    updates, events, items = [], [], []
    via = f"rule:unanimous:k=2:c{cid}"
    for wid, labels in per_work.items():
        status, seen = STATUS_UNVALIDATED, []
        verdict = None
        for _uid, answers, at in labels:
            if answers is not None:
                seen.append(answers)
            verdict = evaluate(seen, schema.questions, "unanimous", 2)
            if verdict.status != status:
                events.append(
                    {
                        "work_id": wid,
                        "campaign_id": cid,
                        "from_status": status,
                        "to_status": verdict.status,
                        "reason": verdict.reason,
                        "created_at": at,
                    }
                )
                status = verdict.status
        final = verdict.final_answers if verdict else None
        updates.append(
            {
                "wid": wid,
                "st": status,
                "fa": final,
                "via": via if status == STATUS_VALIDATED else None,
            }
        )
        items.append({"wid": wid, "n": len(seen), "done": len(seen) >= 2})
    return updates, events, items


def _reset(engine: Engine) -> None:
    """Remove the bench campaign, its labels and events, and the statuses they gave."""
    with write_session(engine) as session:
        old = session.execute(
            text("SELECT id FROM campaigns WHERE name = :n"), {"n": CAMPAIGN}
        ).scalar()
        if old is None:
            return
        for table in ("status_events", "labels", "leases", "campaign_items"):
            session.execute(text(f"DELETE FROM {table} WHERE campaign_id = :c"), {"c": old})
        session.execute(text("DELETE FROM campaigns WHERE id = :c"), {"c": old})
        session.execute(
            text(
                "UPDATE works SET status = :s, final_answers = NULL, "
                "validated_via = NULL, record = json_object('id', id) "
                "WHERE status <> :s OR length(record) > 40"
            ),
            {"s": STATUS_UNVALIDATED},
        )


def build_large(path: Path, schema: Schema, n_works: int, n_labels: int) -> tuple[Engine, int]:
    """The large database at path (built once; a .done file marks it complete)."""
    from labeling.review.campaigns import create_campaign, get_campaign

    done = path.with_suffix(".done")
    url = f"sqlite:///{path}"
    if done.exists():
        engine = make_engine(url)
        upgrade(engine)  # a database built under older migrations gets the current schema
        return engine, get_campaign(engine, CAMPAIGN).id
    engine = make_engine(url)
    upgrade(engine)
    t0 = time.perf_counter()
    with read_session(engine) as session:
        have = session.execute(select(func.count()).select_from(Work)).scalar_one()
    if have != n_works:  # a partial build: start again (a complete works table is reused)
        engine.dispose()
        for suffix in ("", *SIDE_SUFFIXES):
            Path(str(path) + suffix).unlink(missing_ok=True)
        engine = make_engine(url)
        upgrade(engine)
        _works(engine, n_works)
    else:
        _reset(engine)
    with write_session(engine) as session:
        have = set(session.execute(select(User.name)).scalars())
        for i in range(N_ANNOTATORS):
            if f"ann{i + 1:02d}" not in have:
                session.add(
                    User(name=f"ann{i + 1:02d}", role="annotator", active=True, failed_logins=0)
                )
    sample = min(n_works, (n_labels + 1) // 2)
    camp = create_campaign(
        engine, name=CAMPAIGN, strategy="random", sample_size=sample, overlap=2, seed=0
    )
    with read_session(engine) as session:
        items = list(
            session.execute(
                select(CampaignItem.work_id)
                .where(CampaignItem.campaign_id == camp.id)
                .order_by(CampaignItem.position)
            ).scalars()
        )
        users = list(
            session.execute(
                select(User.id).where(User.name.like("ann%")).order_by(User.id)
            ).scalars()
        )
    records = _records(schema, items)
    with write_session(engine) as session:
        session.connection().execute(
            update(Work).where(Work.id == bindparam("wid")).values(record=bindparam("rec")),
            [{"wid": w, "rec": r} for w, r in records.items()],
        )
    print(
        f"  {len(items):,} sampled works with full records: {time.perf_counter() - t0:.0f} s",
        flush=True,
    )
    rows, per_work = _label_rows(schema, camp.id, users, items, records, n_labels)
    updates, events, counts = _statuses(schema, camp.id, per_work)
    with write_session(engine) as session:
        conn = session.connection()
        for i in range(0, len(rows), 20_000):
            conn.execute(insert(Label), rows[i : i + 20_000])
        conn.execute(insert(StatusEvent), events)
        conn.execute(
            update(Work)
            .where(Work.id == bindparam("wid"))
            .values(
                status=bindparam("st"),
                final_answers=bindparam("fa"),
                validated_via=bindparam("via"),
            ),
            updates,
        )
        conn.execute(
            update(CampaignItem)
            .where(CampaignItem.campaign_id == camp.id, CampaignItem.work_id == bindparam("wid"))
            .values(n_labels=bindparam("n"), done=bindparam("done")),
            counts,
        )
    with engine.begin() as conn:
        conn.execute(text("ANALYZE"))
    with read_session(engine) as session:
        got = session.execute(select(func.count()).select_from(Label)).scalar_one()
        statuses = dict(
            session.execute(
                select(Work.status, func.count())
                .where(Work.status != STATUS_UNVALIDATED)
                .group_by(Work.status)
            ).all()
        )
    print(
        f"  {got:,} labels; statuses {statuses}; built in {time.perf_counter() - t0:.0f} s",
        flush=True,
    )
    done.write_text(f"{n_works} works, {got} labels\n")
    return engine, camp.id


def build_demo(path: Path, schema: Schema, n_works: int = 20) -> tuple[Engine, int]:
    """The demo database with two annotators labelling n_works of demo-sample (the real path)."""
    from labeling.auth.users import get_user
    from labeling.frames.demo import build_demo as demo
    from labeling.review.campaigns import get_campaign
    from labeling.review.labels import LabelSubmission, submit_label
    from labeling.review.queue import claim_next

    done = path.with_suffix(".done")
    url = f"sqlite:///{path}"
    if done.exists():
        engine = make_engine(url)
        upgrade(engine)  # a database built under older migrations gets the current schema
        return engine, get_campaign(engine, "demo-sample").id
    for suffix in ("", *SIDE_SUFFIXES):
        Path(str(path) + suffix).unlink(missing_ok=True)
    engine = make_engine(url)
    upgrade(engine)
    demo(engine, schema)
    cid = get_campaign(engine, "demo-sample").id
    rng = np.random.default_rng(3)
    for i in range(n_works):
        for a, name in enumerate(("annotator", "annotator2")):
            uid = get_user(engine, name).id
            claim = claim_next(engine, cid, uid)
            if claim is None:
                break
            with read_session(engine) as session:
                record = session.execute(
                    select(Work.record).where(Work.id == claim.work_id)
                ).scalar_one()
            answers = _answer(schema, _truth(schema, record), 0.05 + 0.1 * a, rng)
            submit_label(
                engine,
                LabelSubmission(
                    campaign_id=cid,
                    work_id=claim.work_id,
                    user_id=uid,
                    answers=answers,
                    schema_hash=schema.hash,
                    scores_visible=True,
                    model_version="demo",
                    time_on_item_ms=int(20_000 + 1000 * i),
                    submission_id=f"demo:{name}:{i}",
                ),
                schema=schema,
            )
    done.write_text("demo\n")
    return engine, cid


if __name__ == "__main__":
    raise SystemExit(
        "bench/monitor_db.py builds the databases of bench/monitor.py and is no bench "
        "of its own: run .venv/bin/python bench/monitor.py"
    )
