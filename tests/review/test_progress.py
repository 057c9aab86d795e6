"""The label page's progress line: the annotator's labels, works complete and works started."""

from __future__ import annotations

from sqlalchemy import Engine

from labeling.review.campaigns import create_campaign, get_campaign
from labeling.review.progress import Progress, forget_progress, my_progress
from labeling.schema import Schema
from tests.factories import add_user, add_works, answers_for, label_next


def test_a_k2_campaign_counts_labels_and_works_started_before_any_work_is_complete(
    engine: Engine, schema: Schema
) -> None:
    """The issue's case: nine labels in a k = 2 campaign complete nothing yet; the line says
    nine labels and nine works started instead of "0 works done"."""
    forget_progress()
    add_works(engine, 12)
    ann, other = add_user(engine, "ann"), add_user(engine, "bob")
    create_campaign(engine, name="k2", strategy="score_opus", overlap=2)
    cid = get_campaign(engine, "k2").id
    for _ in range(9):
        label_next(engine, schema, "k2", "ann", answers_for(schema))
    p = my_progress(engine, cid, ann)
    assert (p.mine_labelled, p.items, p.done, p.started, p.overlap) == (9, 12, 0, 9, 2)
    assert p.line("k2") == (
        "k2 · your labels: 9 · works complete: 0 of 12 (each needs 2 labels) · started: 9"
    )
    # Another annotator's two labels complete two of those works: complete moves, started
    # drops by as many, and the first annotator's own count stays theirs.
    for _ in range(2):
        label_next(engine, schema, "k2", "bob", answers_for(schema))
    p = my_progress(engine, cid, ann)
    assert (p.mine_labelled, p.done, p.started) == (9, 2, 7)
    assert my_progress(engine, cid, other).mine_labelled == 2
    assert p.fraction == 2 / 12 and p.started_fraction == 7 / 12


def test_the_line_names_skips_and_leaves_out_k_when_one_label_completes_a_work() -> None:
    p = Progress(mine_labelled=3, mine_skipped=1, items=10, done=3, started=0, overlap=1)
    assert (
        p.line("top")
        == "top · your labels: 3 (and 1 skipped) · works complete: 3 of 10 · started: 0"
    )
    empty = Progress(0, 0, 0, 0)
    assert empty.fraction == 0.0 and empty.started_fraction == 0.0 and empty.remaining == 0
