"""Database glue for the lead's numbers: humans vs machines, and frame estimates.

Loads validated works (and, for estimates, a probability-sample campaign's design and items)
and calls the pure functions of ``labeling.stats.machines`` and ``labeling.stats.estimates``. The
output is
JSON-safe. For frame estimates, sampled works that are not validated yet (unlabelled, in
review, disputed, skipped) are treated as missing at random within their stratum: the weights
become N_h / (validated works of stratum h). The report shows the response per stratum so a
lead can judge that assumption (disputed works are rarely missing at random).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
from sqlalchemy import Engine, Select, Text, cast, select

from db.engine import read_session
from db.fetch import driver_rows
from db.models import CampaignItem, Work
from labeling.frames.revisions import labelled_revisions
from labeling.review.campaigns import CampaignInfo, get_campaign
from labeling.review.validation import campaign_questions
from labeling.schema import Question, Schema
from labeling.stats.estimates import design_groups, estimability, stratified_prevalence
from labeling.stats.machine_arrays import MEMO, encode, layout
from labeling.stats.machines import compare, human_value, systems
from labeling.stats.ratios import precision_recall_many
from labeling.vocabulary import STATUS_VALIDATED

ALL = "all"
_CHUNK = 500  # ids per IN (...) query
MISSING_AT_RANDOM = (
    "sampled works not validated yet are assumed missing at random within their stratum"
)


def _campaign(engine: Engine, campaign: str | int | CampaignInfo) -> CampaignInfo:
    """The CampaignInfo for a name, id or CampaignInfo."""
    return campaign if isinstance(campaign, CampaignInfo) else get_campaign(engine, campaign)


def encoded_records(
    engine: Engine,
    schema: Schema,
    ids: Sequence[str],
    hashes: Sequence[str],
    kept: Mapping[str, dict[str, Any]] | None = None,
) -> np.ndarray:
    """The works' records encoded under the schema (machine_arrays), read only when new.

    Records change only on re-import, which changes their hash: the per-process memo keyed on
    the hash reads and parses a record once. kept: earlier revisions' records by their hash
    (labeling.frames.revisions), for works whose labels were made on one.
    """
    kept = kept or {}
    missing = [w for w, h in zip(ids, hashes, strict=True)
               if h not in kept and not MEMO.has(schema, h)]  # fmt: skip
    records: dict[str, Any] = {}
    with read_session(engine) as session:
        for i in range(0, len(missing), _CHUNK):
            chunk = missing[i : i + _CHUNK]
            records.update(
                session.execute(select(Work.id, Work.record).where(Work.id.in_(chunk))).all()
            )
    return MEMO.matrix(
        schema,
        list(hashes),
        [kept.get(h) or records.get(w) for w, h in zip(ids, hashes, strict=True)],
    )


@dataclass
class Validated:
    """Validated works in id order: their final answers and encoded records (one row each).

    The final answers are parsed, and the records encoded, when first asked for: the Monitor
    needs only the texts and hashes while its status parts are kept (status_parts)."""

    ids: list[str]
    texts: list[str | None]  # the final answers' JSON text
    hashes: list[str]  # the hashes of the records the labels were made on (memo keys)
    schema: Schema = field(repr=False)
    engine: Engine = field(repr=False)
    # Earlier revisions' records by hash, for works whose labels were made on one.
    kept: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    _finals: list[dict[str, Any]] | None = field(default=None, repr=False)
    _matrix: np.ndarray | None = field(default=None, repr=False)
    _humans: dict[str, list[Any]] = field(default_factory=dict, repr=False)

    @property
    def finals(self) -> list[dict[str, Any]]:
        """Each work's final answers."""
        if self._finals is None:
            self._finals = [dict(orjson.loads(t) or {}) if t else {} for t in self.texts]
        return self._finals

    @property
    def matrix(self) -> np.ndarray:
        """Each work's record encoded under the schema (machine_arrays), one row each."""
        if self._matrix is None:
            self._matrix = encoded_records(self.engine, self.schema, self.ids, self.hashes,
                                           self.kept)  # fmt: skip
        return self._matrix

    def humans(self, question: Question) -> list[Any]:
        """Each work's final answer to a question in comparable form (machines.human_value),
        computed once for the machines and the estimates."""
        if question.name not in self._humans:
            self._humans[question.name] = [
                human_value(question, f.get(question.name)) for f in self.finals
            ]
        return self._humans[question.name]

    def position(self) -> dict[str, int]:
        """Row of each work id."""
        return {w: i for i, w in enumerate(self.ids)}

    def final_texts(self) -> dict[str, str | None]:
        """Each work's final answers as the database's JSON text (what labels compare to)."""
        return dict(zip(self.ids, self.texts, strict=True))


def validated_query(campaign_id: int | None) -> Select[str, str, str]:
    """(id, record hash, final answers as text) of the validated works, in id order.

    The answers come as text, parsed when asked for: the Monitor compares labels to the text
    itself. On SQLite every column is in the covering index ix_works_export (migration 0012):
    the records' own pages are never read.
    """
    query = (
        select(Work.id, Work.record_hash, cast(Work.final_answers, Text))
        .where(Work.status == STATUS_VALIDATED)
        .order_by(Work.id)
    )
    if campaign_id is not None:
        query = query.join(CampaignItem, CampaignItem.work_id == Work.id).where(
            CampaignItem.campaign_id == campaign_id
        )
    return query


def validated_works(engine: Engine, schema: Schema, campaign_id: int | None) -> Validated:
    """The validated works of a campaign (None: all), read once for machines and estimates.

    Args:
        engine: the database.
        schema: the schema the records are encoded under.
        campaign_id: the campaign whose queue holds the works; None = every validated work.
    """
    # Read through the driver's cursor: no result processing is needed (0.1 s of 23,678 works).
    with read_session(engine) as session:
        rows = driver_rows(session.connection(), validated_query(campaign_id))
        # The machine side a work is compared on is the revision its labels were made on.
        earlier = labelled_revisions(session.connection(), campaign_id=campaign_id,
                                     conditions=[Work.status == STATUS_VALIDATED])  # fmt: skip
    ids = [r[0] for r in rows]
    texts: list[str | None] = [r[2] for r in rows]
    hashes = [earlier[w][0] if w in earlier else h for w, h, _ in rows]
    kept = {rev: record for rev, record in earlier.values()}
    return Validated(ids, texts, hashes, schema, engine, kept)


def machine_report(
    engine: Engine,
    schema: Schema,
    campaign: str | int | CampaignInfo | None = None,
    *,
    validated: Validated | None = None,
) -> dict[str, Any]:
    """Every machine call and score against the validated human answers.

    Args:
        engine: the database.
        schema: the label schema.
        campaign: restrict to the works of this campaign (name, id or CampaignInfo) and its
            questions; None = every validated work, every question.
        validated: validated_works of the same campaign, when already read.
    """
    info = _campaign(engine, campaign) if campaign is not None else None
    v = validated or validated_works(engine, schema, info.id if info else None)
    questions = [q.name for q in campaign_questions(info, schema)] if info else None
    report = compare(
        schema, [(f, None) for f in v.finals], questions, encoded=v.matrix, humans=v.humans
    )
    report["campaign"] = info.name if info else None
    return report


def design_population(info: CampaignInfo) -> tuple[dict[str, int], dict[str, int]]:
    """N_h and sampled n_h per stratum from the campaign's recorded design."""
    design = info.sample or {}
    if design.get("strata"):
        rows = design["strata"]
        return (
            {r["stratum"]: int(r["N_h"]) for r in rows},
            {r["stratum"]: int(r["n_h"]) for r in rows},
        )
    return {ALL: int(design.get("N", 0))}, {ALL: int(design.get("n", 0))}


def drawn_items(engine: Engine, campaign_id: int) -> list[Any]:
    """The drawn items (work id, stratum) in queue order (gold and added items have no
    inclusion probability), as the driver's tuples (iterating the result costs 0.3 s per
    50,000 items, fetching its Row objects 0.15 s)."""
    query = (
        select(CampaignItem.work_id, CampaignItem.stratum)
        .where(CampaignItem.campaign_id == campaign_id, CampaignItem.inclusion_prob.is_not(None))
        .order_by(CampaignItem.position)
    )
    with read_session(engine) as session:
        return driver_rows(session.connection(), query)


def _question_estimates(
    question: Question,
    units: Sequence[tuple[str, Any]],
    matrix: np.ndarray,
    schema: Schema,
    population: dict[str, int],
) -> dict[str, Any]:
    """Prevalence per label and each system's frame precision/recall for one question."""
    strata = np.array([s for s, _ in units], dtype=object)
    groups = design_groups(strata, list(population))
    names = systems(question, schema.teachers)
    arrays = encode(question, [h for _, h in units], matrix, layout(schema), names, schema.teachers)
    out: dict[str, Any] = {"n": len(units), "labels": {}}
    for j, lab in enumerate(arrays.labels):
        y = arrays.human[:, j].astype(int)
        prev = stratified_prevalence(y, strata, population, groups=groups)
        entry: dict[str, Any] = {**prev.as_dict(), "systems": {}}
        # Every system's precision and recall of this label in one batch (ratios.py).
        rules = [(arrays.systems[n].present, arrays.systems[n].calls[:, j]) for n in names]
        batch = precision_recall_many(y, rules, groups, population)
        for (name, source), pr in zip(names.items(), batch, strict=True):
            entry["systems"][name] = {
                "source": source,
                "n": int(arrays.systems[name].present.sum()),
                **{k: v.as_dict() for k, v in pr.items()},
            }
        out["labels"][lab] = entry
    return out


def frame_estimates(
    engine: Engine,
    schema: Schema,
    campaign: str | int | CampaignInfo,
    *,
    validated: Validated | None = None,
    drawn: list[Any] | None = None,
) -> dict[str, Any]:
    """Design-based prevalence of every label in the frame, and each system's precision/recall.

    Args:
        engine: the database.
        schema: the label schema.
        campaign: a probability-sample campaign (name, id or CampaignInfo); any other
            campaign gets a plain refusal (estimable False and the reason).
        validated: validated_works of the same campaign, when already read.
        drawn: drawn_items of the campaign, when already read.
    """
    info = _campaign(engine, campaign)
    head: dict[str, Any] = {
        "campaign": info.name,
        "campaign_id": info.id,
        "strategy": info.strategy,
    }
    verdict = estimability(info.is_probability_sample, info.strategy)
    if not verdict.estimable:
        return {**head, "estimable": False, "reason": verdict.reason, "questions": {}}
    population, sampled = design_population(info)
    rows = drawn if drawn is not None else drawn_items(engine, info.id)
    v = validated or validated_works(engine, schema, info.id)
    where = v.position()
    chosen = [(r[1], where[r[0]]) for r in rows if r[0] in where and v.finals[where[r[0]]]]
    matrix = v.matrix[[i for _, i in chosen]]
    finals = [(s, v.finals[i]) for s, i in chosen]
    per_stratum: dict[str, dict[str, Any]] = {
        s: {"stratum": s, "N": population[s], "sampled": sampled.get(s, 0), "validated": 0}
        for s in population
    }
    strata = [s or ALL for s, _ in finals]
    for s in strata:
        per_stratum[s]["validated"] += 1
    questions: dict[str, Any] = {}
    for q in campaign_questions(info, schema):
        every = v.humans(q)
        humans = [every[i] for _, i in chosen]
        rows_of = [i for i, h in enumerate(humans) if h is not None]
        units = [(strata[i], humans[i]) for i in rows_of]
        questions[q.name] = _question_estimates(q, units, matrix[rows_of], schema, population)
    return {
        **head,
        "estimable": True,
        "reason": None,
        "design": info.sample,
        "population": sum(population.values()),
        "n_sampled": len(rows),
        "n_validated": len(finals),
        "strata": list(per_stratum.values()),
        "assumption": MISSING_AT_RANDOM,
        "questions": questions,
    }
