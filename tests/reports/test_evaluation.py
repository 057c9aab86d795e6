"""Lead numbers from the database: humans vs machines and frame estimates (both DBs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from db.engine import write_session
from labeling.frames.importer import import_frame
from labeling.reports.evaluation import frame_estimates, machine_report
from labeling.review.campaigns import add_items, create_campaign
from labeling.review.labels import LabelSubmission, submit_label
from labeling.review.queue import claim_next
from labeling.review.sampling import stratum_labels
from labeling.schema import Schema
from labeling.stats.estimates import NOT_A_SAMPLE, stratified_prevalence
from tests.conftest import make_record, write_jsonl
from tests.factories import add_user

LOW, HIGH = stratum_labels([0.0, 0.5, 1.0])
QUESTIONS = ["categories", "genre"]
BIB = "Bibliometrics"


def _high(i: int) -> bool:
    """Works 1-8 score high (score_max 0.8), 9-24 low (0.28)."""
    return i <= 8


def _truth(work_id: str) -> dict[str, Any]:
    """The human answer of a work: Bibliometrics for high works and every 4th low one."""
    i = int(work_id[1:])
    return {
        "categories": [BIB] if _high(i) or i % 4 == 0 else [],
        "genre": "methods" if i % 2 else "empirical",
    }


def _frame(engine: Engine, schema: Schema, seed: dict[str, Any], tmp_path: Path) -> None:
    """Import 24 works; codex calls Bibliometrics on the high works and on W09."""
    labels = schema.question("categories").labels
    recs = []
    for i in range(1, 25):
        on = [0.9 if lab == BIB and (_high(i) or i == 9) else 0.05 for lab in labels]
        recs.append(
            make_record(
                seed,
                f"W{i:02d}",
                machine_scores__score_opus=0.8 if _high(i) else 0.1,
                prediction__category_scores_codex=on,
            )
        )
    summary = import_frame(engine, write_jsonl(tmp_path / "frame.jsonl", recs), schema)
    assert summary.inserted == 24


def _label(engine: Engine, schema: Schema, cid: int, uid: int, limit: int | None = None) -> list:
    """Claim and label works of a campaign with their true answers; returns the work ids."""
    done: list[str] = []
    while limit is None or len(done) < limit:
        claim = claim_next(engine, cid, uid)
        if claim is None:
            break
        submit_label(
            engine,
            LabelSubmission(
                campaign_id=cid,
                work_id=claim.work_id,
                user_id=uid,
                answers=_truth(claim.work_id),
                schema_hash=schema.hash,
                scores_visible=True,
                model_version="m",
                time_on_item_ms=500,
                submission_id=f"{cid}:{claim.work_id}",
            ),
            schema=schema,
        )
        done.append(claim.work_id)
    return done


def test_stratified_campaign_frame_estimates(
    engine: Engine, schema: Schema, seed_record: dict[str, Any], tmp_path: Path
) -> None:
    """Prevalence and codex precision/recall from a stratified sample, per stratum too."""
    _frame(engine, schema, seed_record, tmp_path)
    uid = add_user(engine, "ann")
    camp = create_campaign(
        engine,
        name="s",
        strategy="stratified",
        allocation=4,
        bins=[0.0, 0.5, 1.0],
        questions=QUESTIONS,
        seed=2,
    )
    # Half-way: one stratum still has no validated work -> no frame estimate yet.
    first = _label(engine, schema, camp.id, uid, limit=1)
    partial = frame_estimates(engine, schema, camp.name)
    cat = partial["questions"]["categories"]["labels"][BIB]
    assert partial["estimable"] and partial["n_validated"] == 1
    assert not cat["overall"]["estimable"] and "no validated works" in cat["overall"]["reason"]
    labelled = first + _label(engine, schema, camp.id, uid)
    assert len(labelled) == 8
    out = frame_estimates(engine, schema, camp.id)
    json.dumps(out, allow_nan=False)
    assert (out["population"], out["n_sampled"], out["n_validated"]) == (24, 8, 8)
    assert {s["stratum"]: (s["N"], s["sampled"], s["validated"]) for s in out["strata"]} == {
        LOW: (16, 4, 4),
        HIGH: (8, 4, 4),
    }
    bib = out["questions"]["categories"]["labels"][BIB]
    low = [w for w in labelled if not _high(int(w[1:]))]
    y = [int(BIB in _truth(w)["categories"]) for w in labelled]
    strata = [HIGH if _high(int(w[1:])) else LOW for w in labelled]
    expected = stratified_prevalence(y, strata, {LOW: 16, HIGH: 8}).overall
    assert bib["overall"]["estimate"] == pytest.approx(expected.estimate)
    assert bib["overall"]["estimate"] == pytest.approx(
        (16 * sum(int(w[1:]) % 4 == 0 for w in low) / 4 + 8) / 24
    )
    assert bib["overall"]["lo"] <= bib["overall"]["estimate"] <= bib["overall"]["hi"]
    assert bib["overall"]["n"] == 8 and bib["overall"]["method"] == "korn-graubard"
    by_stratum = {s["stratum"]: s for s in bib["strata"]}
    assert by_stratum[HIGH]["estimate"] == 1.0 and by_stratum[HIGH]["n"] == 4
    codex = bib["systems"]["codex"]
    assert codex["precision"]["estimable"] and codex["n"] == 8
    assert codex["recall"]["estimate"] <= 1.0
    if "W09" not in labelled:  # codex's only false positive was not drawn
        assert codex["precision"]["estimate"] == 1.0
    genre = out["questions"]["genre"]
    assert set(genre["labels"]) == set(schema.question("genre").labels)
    assert "codex_scores" in genre["labels"]["methods"]["systems"]
    assert set(out["questions"]) == set(QUESTIONS)


def test_score_ordered_and_manual_campaigns_are_refused(
    engine: Engine, schema: Schema, seed_record: dict[str, Any], tmp_path: Path
) -> None:
    """No frame estimate from a score-ordered queue, said plainly."""
    _frame(engine, schema, seed_record, tmp_path)
    uid = add_user(engine, "ann")
    top = create_campaign(
        engine, name="top", strategy="score_max", sample_size=6, questions=QUESTIONS
    )
    _label(engine, schema, top.id, uid)
    out = frame_estimates(engine, schema, "top")
    assert out == {
        "campaign": "top",
        "campaign_id": top.id,
        "strategy": "score_max",
        "estimable": False,
        "reason": NOT_A_SAMPLE,
        "questions": {},
    }
    manual = create_campaign(engine, name="m", strategy="manual")
    assert "manual" in frame_estimates(engine, schema, manual.id)["reason"]


def test_random_campaign_is_one_stratum(
    engine: Engine, schema: Schema, seed_record: dict[str, Any], tmp_path: Path
) -> None:
    """A simple random sample: one stratum of the whole population, the sample mean."""
    _frame(engine, schema, seed_record, tmp_path)
    uid = add_user(engine, "ann")
    camp = create_campaign(
        engine, name="r", strategy="random", sample_size=10, questions=QUESTIONS, seed=5
    )
    with write_session(engine) as session:  # an added work is not part of the draw
        outside = next(
            f"W{i:02d}" for i in range(1, 25) if add_items(session, camp.id, [f"W{i:02d}"])
        )
    labelled = [w for w in _label(engine, schema, camp.id, uid) if w != outside]
    assert len(labelled) == 10
    out = frame_estimates(engine, schema, camp)
    assert out["strata"] == [{"stratum": "all", "N": 24, "sampled": 10, "validated": 10}]
    assert out["n_sampled"] == 10
    bib = out["questions"]["categories"]["labels"][BIB]["overall"]
    share = sum(BIB in _truth(w)["categories"] for w in labelled) / 10
    assert bib["estimate"] == pytest.approx(share)


def test_machine_report_from_the_database(
    engine: Engine, schema: Schema, seed_record: dict[str, Any], tmp_path: Path
) -> None:
    """Validated works only; a campaign restricts works and questions."""
    _frame(engine, schema, seed_record, tmp_path)
    uid = add_user(engine, "ann")
    top = create_campaign(engine, name="top", sample_size=6, questions=QUESTIONS)
    labelled = _label(engine, schema, top.id, uid, limit=5)
    other = create_campaign(engine, name="all-q", strategy="manual")
    report = machine_report(engine, schema)
    json.dumps(report, allow_nan=False)
    assert report["n_works"] == 5 and report["campaign"] is None
    assert list(report["questions"]) == schema.names
    cats = report["questions"]["categories"]
    codex = cats["systems"]["codex"]["labels"][BIB]
    truth = [BIB in _truth(w)["categories"] for w in labelled]
    calls = [_high(int(w[1:])) or w == "W09" for w in labelled]
    assert codex["tp"] == sum(t and c for t, c in zip(truth, calls, strict=True))
    assert codex["n"] == 5
    genre = report["questions"]["genre"]["systems"]["codex"]
    assert genre["confusion"]["n"] == 5  # the seed's codex says "methods" for every work
    assert report["questions"]["about_ca_system"]["n_works"] == 0
    opus = report["machine_scores"]["scores"]["score_opus"]
    assert opus["n"] == 5 and opus["positives"] == sum(truth)
    scoped = machine_report(engine, schema, "top")
    assert scoped["campaign"] == "top" and list(scoped["questions"]) == QUESTIONS
    assert machine_report(engine, schema, other.id)["n_works"] == 0


@pytest.mark.parametrize("campaign_id", [None, 1])
def test_validated_works_are_read_from_the_covering_index(
    sqlite_engine: Engine, campaign_id: int | None
) -> None:
    """On SQLite the validated works never touch the records' pages (the Monitor's every view)."""
    from labeling.reports.evaluation import validated_query

    # The query as it runs, its status a bound value: the export index is partial (validated
    # works only), and SQLite uses such an index only when it can see the status asked for.
    compiled = validated_query(campaign_id).compile(sqlite_engine)
    params = tuple(compiled.params[name] for name in compiled.positiontup or ())
    assert "human_validated" in params
    with sqlite_engine.connect() as conn:
        plan = [row[-1] for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}", params)]
    works = [step for step in plan if " works " in f" {step} "]
    assert works and all("COVERING INDEX ix_works_export" in step for step in works), plan
