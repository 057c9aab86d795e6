"""A stateful property test of the ground-truth rule (README, "Ground truth").

Hypothesis interleaves campaigns (k, rule, questions, gold checks), labels, edits, skips,
label imports, adjudications, reopens, gold marking and frame re-imports on a real database,
and after every step checks that a work's validated answers, `validated_via` and gold mark
changed only by one of the explicit acts (adjudication, reopen, the model step, a new verdict
of the campaign that validated the work, a gold mark), that each change has its event with
the state before and after, and, at the end, that the export of the validated set holds the
answers the events say.
"""

from __future__ import annotations

import csv
import json
import shutil
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule
from sqlalchemy import insert, select

from db.engine import make_engine, read_session, upgrade, write_session
from db.models import Label, Lease, StatusEvent, Work, utcnow
from labeling.export.gold_set import export_gold
from labeling.frames.importer import import_frame
from labeling.review.campaigns import create_campaign
from labeling.review.disputes import mark_gold, unmark_gold
from labeling.review.label_import import import_labels
from labeling.review.labels import LabelError, LabelSubmission, edit_label, submit_label
from labeling.review.queue import claim_next
from labeling.review.validation import (
    AlreadySettled,
    ValidationError,
    adjudicate,
    reopen,
    rule_campaign,
)
from labeling.review.verdicts import answer_key
from labeling.schema import load_schema
from labeling.settings import DEFAULT_SCHEMA
from labeling.vocabulary import (
    ACT_ADJUDICATION,
    ACT_GOLD,
    ACT_MODEL,
    ACT_REOPEN,
    ACT_RULE,
    STATUS_VALIDATED,
)
from tests.conftest import FIXTURES, examples, make_record, write_jsonl
from tests.factories import add_user, answers_for

SCHEMA = load_schema(DEFAULT_SCHEMA)
WORKS = [f"W{i}" for i in range(101, 105)]
ANNOTATORS = ["a", "b", "c"]
CHANGING_ACTS = {ACT_RULE, ACT_ADJUDICATION, ACT_REOPEN, ACT_MODEL, ACT_GOLD}
_TEMPLATE: dict[str, Path] = {}


def _template() -> Path:
    """A migrated SQLite file, made once per process (each example copies it)."""
    if "path" not in _TEMPLATE:
        path = Path(tempfile.mkdtemp(prefix="gt-tmpl-")) / "t.db"
        engine = make_engine(f"sqlite:///{path}")
        upgrade(engine)
        engine.dispose()
        _TEMPLATE["path"] = path
    return _TEMPLATE["path"]


def _state(engine: Any) -> dict[str, tuple[Any, ...]]:
    with read_session(engine) as session:
        rows = session.execute(
            select(Work.id, Work.status, Work.final_answers, Work.validated_via, Work.is_gold)
        ).all()
    return {r.id: (r.status, r.final_answers, r.validated_via, bool(r.is_gold)) for r in rows}


def _norm(answers: dict[str, Any] | None) -> dict[str, Any] | None:
    if answers is None:
        return None
    return {q: answer_key(v) for q, v in answers.items()}


class GroundTruth(RuleBasedStateMachine):
    """Campaigns, labels and a lead's acts on four works; the rule checked after each step."""

    campaigns = Bundle("campaigns")

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="gt-"))
        shutil.copyfile(_template(), self.dir / "db.sqlite")
        self.url = f"sqlite:///{self.dir / 'db.sqlite'}"
        self.engine = make_engine(self.url)
        self.seed = json.loads((FIXTURES / "seed_record.json").read_text(encoding="utf-8"))
        self.users = {name: add_user(self.engine, name) for name in ANNOTATORS}
        self.lead = add_user(self.engine, "lea", "lead")
        self.n = 0
        self.last_event = 0
        self.before: dict[str, tuple[Any, ...]] = {}

    @initialize()
    def frame(self) -> None:
        """The four works, imported as a frame."""
        records = [make_record(self.seed, wid) for wid in WORKS]
        import_frame(self.engine, write_jsonl(self.dir / "f.jsonl", records), SCHEMA)
        self.before = _state(self.engine)

    def _next(self) -> int:
        self.n += 1
        return self.n

    @rule(
        target=campaigns,
        k=st.integers(1, 2),
        rule_name=st.sampled_from(["unanimous", "majority"]),
        genre_only=st.booleans(),
        gold=st.booleans(),
    )
    def new_campaign(self, k: int, rule_name: str, genre_only: bool, gold: bool) -> Any:
        """A campaign over every work (or a gold-check campaign over none yet)."""
        n = self._next()
        filter_ = {"status": ["machine_predicted_unvalidated"]} if gold else None
        return create_campaign(
            self.engine, name=f"c{n}", overlap=k, rule=rule_name, gold_rate=1.0 if gold else 0.0,
            questions=["genre"] if genre_only else None, filter=filter_,
        )  # fmt: skip

    def _answers(self, campaign: Any, variant: int) -> dict[str, Any]:
        full = answers_for(SCHEMA, variant)
        return {q: full[q] for q in campaign.questions} if campaign.questions else full

    @rule(
        campaign=campaigns,
        who=st.sampled_from(ANNOTATORS),
        work=st.sampled_from(WORKS),
        variant=st.integers(0, 2),
        skip=st.booleans(),
    )
    def label(self, campaign: Any, who: str, work: str, variant: int, skip: bool) -> None:
        """A first label (holding the lease), or an edit of one's own label (B)."""
        uid = self.users[who]
        with read_session(self.engine) as session:
            mine = session.execute(
                select(Label.id).where(
                    Label.campaign_id == campaign.id, Label.work_id == work, Label.user_id == uid
                )  # fmt: skip
            ).first()
        if campaign.gold_rate > 0 and mine is None:
            claim = claim_next(self.engine, campaign.id, uid)
            if claim is None:
                return
            work = claim.work_id
        elif mine is None:
            with write_session(self.engine) as session:
                session.execute(
                    insert(Lease).prefix_with("OR IGNORE"),
                    {"campaign_id": campaign.id, "work_id": work, "user_id": uid,
                     "expires_at": utcnow() + timedelta(minutes=5)},
                )  # fmt: skip
        sub = LabelSubmission(
            campaign_id=campaign.id, work_id=work, user_id=uid,
            answers={} if skip else self._answers(campaign, variant),
            skipped=skip, skip_reason="other" if skip else None,
            submission_id=f"s{self._next()}", schema_hash=SCHEMA.hash, scores_visible=True,
            model_version="m", time_on_item_ms=1,
        )  # fmt: skip
        try:
            (edit_label if mine else submit_label)(self.engine, sub, schema=SCHEMA)
        except LabelError:
            pass  # e.g. the lease is another annotator's: a defined refusal, nothing stored

    @rule(
        campaign=campaigns,
        who=st.sampled_from(ANNOTATORS),
        work=st.sampled_from(WORKS),
        variant=st.integers(0, 2),
    )
    def import_label(self, campaign: Any, who: str, work: str, variant: int) -> None:
        """`import-labels` of one label into a campaign."""
        path = self.dir / f"l{self._next()}.csv"
        with path.open("w", newline="", encoding="utf-8") as fh:
            out = csv.writer(fh)
            out.writerow(["work_id", "annotator", "question", "value"])
            for q, v in self._answers(campaign, variant).items():
                out.writerow([work, who, q, ";".join(v) if isinstance(v, list) else v])
        import_labels(self.engine, path, SCHEMA, campaign=campaign.name)

    @rule(work=st.sampled_from(WORKS), variant=st.integers(0, 2), genre_only=st.booleans())
    def adjudicate(self, work: str, variant: int, genre_only: bool) -> None:
        """A lead settles a work (refused when it was settled already)."""
        answers = answers_for(SCHEMA, variant)
        if genre_only:
            answers = {"genre": answers["genre"]}
        try:
            adjudicate(self.engine, work, answers, "lead", self.lead, None, schema=SCHEMA)
        except AlreadySettled:
            assert self.before[work][0] == STATUS_VALIDATED

    @rule(work=st.sampled_from(WORKS))
    def reopen(self, work: str) -> None:
        """A lead reopens a work (refused unless validated)."""
        try:
            reopen(self.engine, work, self.lead, "again", schema=SCHEMA)
        except AlreadySettled:
            assert self.before[work][0] != STATUS_VALIDATED

    @rule(work=st.sampled_from(WORKS), mark=st.booleans())
    def gold(self, work: str, mark: bool) -> None:
        """A lead marks (only validated works) or unmarks gold."""
        try:
            (mark_gold if mark else unmark_gold)(self.engine, [work], self.lead)
        except ValidationError:
            assert mark and self.before[work][0] != STATUS_VALIDATED

    @rule(work=st.sampled_from(WORKS), score=st.floats(0, 1))
    def reimport(self, work: str, score: float) -> None:
        """The frame again, one work's scores and title changed: the human side stays."""
        records = [make_record(self.seed, wid) for wid in WORKS]
        index = WORKS.index(work)
        records[index]["title"] = f"changed {self._next()}"
        records[index]["machine_scores"]["score_opus"] = score
        path = write_jsonl(self.dir / f"f{self.n}.jsonl", records)
        import_frame(self.engine, path, SCHEMA)

    @invariant()
    def answers_change_only_by_recorded_acts(self) -> None:
        """Every change since the last step has its events; answers only by the four acts."""
        if not self.before:
            return
        after = _state(self.engine)
        with read_session(self.engine) as session:
            events = session.execute(
                select(StatusEvent).where(StatusEvent.id > self.last_event)
                .order_by(StatusEvent.id)
            ).scalars().all()  # fmt: skip
            rows = [
                (e.id, e.work_id, e.act, e.campaign_id, e.answers_before, e.answers_after,
                 e.via_before, e.via_after, e.gold_before, e.gold_after)
                for e in events
            ]  # fmt: skip
        by_work: dict[str, list[Any]] = {}
        for row in rows:
            by_work.setdefault(row[1], []).append(row)
            # An answer changes only by the acts that may change it; a rule verdict only
            # when it is the validating campaign's, or the work was not validated.
            if _norm(row[4]) != _norm(row[5]) or row[6] != row[7]:
                assert row[2] in CHANGING_ACTS, row
                if row[2] == ACT_RULE and row[6] is not None:
                    assert rule_campaign(row[6]) == row[3], row
        for wid, now in after.items():
            old = self.before[wid]
            if (now[1:], _norm(now[1])) == (old[1:], _norm(old[1])):
                continue
            mine = by_work.get(wid)
            assert mine, f"{wid} changed from {old} to {now} with no event"
            assert (_norm(mine[0][4]), mine[0][6], mine[0][8]) == (_norm(old[1]), old[2], old[3])
            assert (_norm(mine[-1][5]), mine[-1][7], mine[-1][9]) == (_norm(now[1]), now[2], now[3])
        if rows:
            self.last_event = rows[-1][0]
        self.before = after

    def teardown(self) -> None:
        """The export of the validated set holds the answers the events say."""
        try:
            if self.before:
                out = self.dir / "gold.jsonl"
                export_gold(self.engine, SCHEMA, out, fmt="jsonl", processes=1)
                exported = {}
                for line in out.read_text(encoding="utf-8").splitlines():
                    row = json.loads(line)
                    exported[row["work_id"]] = {
                        q.name: row[f"human_{q.name}"] for q in SCHEMA.questions
                        if row.get(f"human_{q.name}") is not None
                    }  # fmt: skip
                with read_session(self.engine) as session:
                    last: dict[str, Any] = {}
                    for wid, answers in session.execute(
                        select(StatusEvent.work_id, StatusEvent.answers_after)
                        .order_by(StatusEvent.id)
                    ):  # fmt: skip
                        last[wid] = answers
                validated = {w for w, s in _state(self.engine).items() if s[0] == STATUS_VALIDATED}
                assert set(exported) == validated
                for wid in validated:
                    assert _norm(exported[wid]) == _norm(last[wid]), wid
        finally:
            self.engine.dispose()
            shutil.rmtree(self.dir, ignore_errors=True)


GroundTruth.TestCase.settings = settings(
    max_examples=examples(12),
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.mark.slow
class TestGroundTruth(GroundTruth.TestCase):  # type: ignore[misc,valid-type]
    """Run the machine (SQLite; the rule's code is the same on PostgreSQL, tested there by
    tests/review/test_ground_truth.py and the adjudication race)."""
