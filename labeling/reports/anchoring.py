"""Database glue for the anchoring report: a campaign's first answers, by arm, per question.

Each (work, annotator)'s first answer (its first label that is not a skip) counts once, in
the arm its label recorded (`labels.scores_visible`): later versions were given after the
scores were shown anyway. Labels without a recorded arm (imported ones) are left out. Each
label is compared with the teachers' calls of the frame revision it was made on
(labeling.frames.revisions). The comparison itself is labeling.stats.anchoring.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import Engine, select

from db.engine import read_session
from db.models import Label, Work
from labeling.frames.revisions import revision_records
from labeling.reports.evaluation import encoded_records
from labeling.review.assist import effective_rate
from labeling.review.campaigns import get_campaign
from labeling.review.validation import campaign_questions
from labeling.schema import Schema
from labeling.stats.anchoring import METHOD, MIN_ARM_N, compare_arms
from labeling.stats.machine_arrays import encode, layout
from labeling.stats.machines import human_value, systems
from labeling.vocabulary import STATUS_VALIDATED


def _first_answers(engine: Engine, campaign_id: int) -> list[Any]:
    """(work, user, answers, shown, revision) of each assignment's first non-skip label with
    an arm."""
    query = (
        select(Label.work_id, Label.user_id, Label.answers, Label.scores_visible, Label.revision)
        .where(
            Label.campaign_id == campaign_id,
            Label.skipped.is_(False),
            Label.scores_visible.is_not(None),
        )
        .order_by(Label.work_id, Label.user_id, Label.version)
    )
    seen: set[tuple[str, int]] = set()
    out = []
    with read_session(engine) as session:
        for row in session.execute(query):
            if (row[0], row[1]) not in seen:
                seen.add((row[0], row[1]))
                out.append(row)
    return out


def anchoring_report(engine: Engine, schema: Schema, campaign: str | int) -> dict[str, Any]:
    """Per question: agreement with each teacher's call and with the validated answer, by arm.

    Args:
        engine: the database.
        schema: the label schema (questions, teachers).
        campaign: the campaign (name or id).

    Returns:
        {"campaign", "assist_rate", "randomised", "n_labels", "arms", "method", "min_arm_n",
        "note", "questions": {question: {"teachers": {teacher: comparison}, "validated":
        comparison}}}; a comparison holds n, agreeing labels and rate per arm, the difference
        shown - hidden with its 95% interval, the p-value, the implied copy rate, and whether
        the arms hold enough labels to say.
    """
    info = get_campaign(engine, campaign)
    rate = effective_rate(info.blind, info.assist_rate)
    rows = _first_answers(engine, info.id)
    ids = sorted({r[0] for r in rows})
    with read_session(engine) as session:
        works = {
            w.id: w
            for w in session.execute(
                select(Work.id, Work.record_hash, Work.status, Work.final_answers).where(
                    Work.id.in_(ids)
                )
            )
        } if ids else {}  # fmt: skip
    rows = [r for r in rows if r[0] in works]
    # Each label against the content it was made on: its revision when that is kept, else
    # the stored record (its own revision, or one unknown: a label of before revisions).
    earlier = {(r[0], r[4]) for r in rows if r[4] and r[4] != works[r[0]].record_hash}
    with read_session(engine) as session:
        kept = revision_records(session.connection(), earlier) if earlier else {}
    keys = [(r[0], r[4] if (r[0], r[4]) in kept else works[r[0]].record_hash) for r in rows]
    unique = sorted(set(keys))
    matrix = encoded_records(engine, schema, [w for w, _ in unique], [h for _, h in unique],
                             {h: kept[(w, h)] for w, h in unique if (w, h) in kept})  # fmt: skip
    row_of = {key: i for i, key in enumerate(unique)}
    shown_all = np.array([bool(r[3]) for r in rows], dtype=bool)
    lay = layout(schema)
    questions: dict[str, Any] = {}
    for q in campaign_questions(info, schema):
        humans = [human_value(q, (r[2] or {}).get(q.name)) for r in rows]
        keep = [i for i, h in enumerate(humans) if h is not None]
        names = {t: s for t, s in systems(q, schema.teachers).items() if t in schema.teachers}
        arrays = encode(q, [humans[i] for i in keep],
                        matrix[[row_of[keys[i]] for i in keep]], lay, names,
                        schema.teachers)  # fmt: skip
        shown = shown_all[keep]
        teachers = {}
        for t, sa in arrays.systems.items():
            same = (arrays.human == sa.calls).all(axis=1)
            teachers[t] = compare_arms(shown[sa.present], same[sa.present]).as_dict()
        finals = [works[rows[i][0]] for i in keep]
        validated = [
            k for k, w in enumerate(finals)
            if w.status == STATUS_VALIDATED and human_value(q, (w.final_answers or {}).get(q.name))
            is not None
        ]  # fmt: skip
        agree_v = np.array(
            [humans[keep[k]] == human_value(q, finals[k].final_answers.get(q.name))
             for k in validated], dtype=bool,
        )  # fmt: skip
        questions[q.name] = {
            "n": len(keep),
            "teachers": teachers,
            "validated": compare_arms(shown[validated], agree_v).as_dict(),
        }
    note = None
    if not 0 < rate < 1:
        arm = "shown" if rate >= 1 else "hidden"
        note = (
            f"campaign {info.name!r} does not randomise the arms (every assignment {arm}): "
            "create one with an assist rate between 0 and 1 to measure anchoring"
        )
    return {
        "campaign": info.name,
        "assist_rate": rate,
        "randomised": 0 < rate < 1,
        "n_labels": len(rows),
        "arms": {"shown": int(shown_all.sum()), "hidden": int((~shown_all).sum())},
        "method": METHOD,
        "min_arm_n": MIN_ARM_N,
        "note": note,
        "questions": questions,
    }
