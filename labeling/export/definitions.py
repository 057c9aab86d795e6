"""Gold-set definitions: filters, columns, pseudonyms, provenance fields and long rows."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

import pyarrow as pa
from sqlalchemy import Connection, exists, func, select

from db.models import Campaign, CampaignItem, Label, User, Work
from labeling.errors import InputError
from labeling.frames.machine_columns import SCORE_COLUMNS, SCORE_FROM_WORK, call_columns
from labeling.inputs import row_id, shown, storable
from labeling.schema import Question, Schema
from labeling.vocabulary import STATUS_VALIDATED

STATUS_FILTERS = ("validated", "labelled", "all")
VIA_CAMPAIGN = re.compile(r"^rule:([a-z]+:k=\d+):c(\d+)$")
PSEUDONYM_KEY_TAG = b"labeling-pseudonym-key-v1"
# (column, kind): kind is str, int, float, bool, list (of str) or, for answers, by question.
# human_status, right after the id: the human outcome, never to be confused with the frame's
# prediction_status and validation_status, which ship verbatim with the machine columns.
BASE_COLUMNS = [("work_id", "str"), ("human_status", "str"), ("doi", "str"), ("title", "str"),
                ("year", "int")]  # fmt: skip
PROVENANCE_COLUMNS = [
    ("validation_method", "str"),
    ("validation_rule", "str"),
    ("validation_campaign", "str"),
    ("validated_by", "str"),
    ("validated_via", "str"),
    # Other campaigns' verdicts on the validated answers (review.verdicts): one that differs
    # and is not settled yet, and the campaigns whose verdicts agree.
    ("dispute_open", "bool"),
    ("corroborated_by", "list"),
    ("n_labels", "int"),
    ("annotators", "list"),
    # Flags on those labels (skips included): how many, and each as "annotator: note".
    ("flags", "int"),
    ("flag_notes", "list"),
    ("agreement", "float"),
    ("first_labelled_at", "str"),
    ("last_labelled_at", "str"),
    ("model_version", "str"),
    ("model_version_current", "str"),
]
CURRENT = "_current"  # the suffix of the stored record's machine columns (current_columns)
SAMPLE_COLUMNS = [("sample_campaign", "str"), ("stratum", "str"), ("inclusion_prob", "float"),
                  ("weight", "float")]  # fmt: skip
LONG_COLUMNS = [
    ("work_id", "str"),
    ("annotator", "str"),
    ("question", "str"),
    ("value", "answer"),
    ("created_at", "str"),
    ("confidence", "int"),
    ("note", "str"),
    ("campaign", "str"),
    ("version", "int"),
    ("time_on_item_ms", "int"),
    ("model_version", "str"),
    ("scores_visible", "bool"),
    ("schema_hash", "str"),
    ("flagged", "bool"),
]
_ARROW = {"str": pa.string(), "answer": pa.string(), "int": pa.int64(), "float": pa.float64(),
          "bool": pa.bool_(), "list": pa.list_(pa.string())}  # fmt: skip


class ExportError(InputError):
    """An export that cannot be made (bad filter, unknown campaign or question)."""


@dataclass(frozen=True)
class ExportFilters:
    """Which works a gold set holds.

    status: "validated" (default), "labelled" (at least one non-skipped label) or "all";
    campaign: a campaign name or id (its items and only its labels); questions: the schema
    questions to export (None = all); since/until: keep works with a label created on or
    after `since` and on or before `until` (whole UTC days).
    """

    status: str = "validated"
    campaign: str | None = None
    questions: tuple[str, ...] | None = None
    since: date | None = None
    until: date | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (dates as ISO strings)."""
        return {
            "status": self.status,
            "campaign": self.campaign,
            "questions": list(self.questions) if self.questions else None,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
        }


class Pseudonymizer:
    """Stable annotator pseudonyms: HMAC-SHA256 of the name under a per-database key.

    The key is the SHA-256 of a fixed tag and the earliest users row (id, name, created_at
    to the microsecond): users are never deleted, so the key, and every pseudonym, stays
    the same for the life of the database, while differing between databases. Someone who
    holds only the export cannot reverse or recompute the pseudonyms.
    """

    def __init__(self, key: bytes | None) -> None:
        """Keep the key; None means pass names through unchanged."""
        self.key = key
        self._cache: dict[str, str] = {}

    @classmethod
    def for_database(cls, conn: Connection) -> Pseudonymizer:
        """The database's pseudonymizer (see the class docstring for the key)."""
        first = conn.execute(
            select(User.id, User.name, User.created_at).order_by(User.id).limit(1)
        ).first()
        seed = "" if first is None else f"{first.id}\0{first.name}\0{first.created_at.isoformat()}"
        return cls(hashlib.sha256(PSEUDONYM_KEY_TAG + b"\0" + seed.encode("utf-8")).digest())

    def __call__(self, name: str | None) -> str | None:
        """The pseudonym of `name` (the name itself without a key)."""
        if name is None or self.key is None:
            return name
        if name not in self._cache:
            digest = hmac.new(self.key, name.encode("utf-8"), hashlib.sha256).hexdigest()
            self._cache[name] = "annotator-" + digest[:12]
        return self._cache[name]


def select_questions(schema: Schema, names: Sequence[str] | None) -> list[Question]:
    """The schema questions to export, in schema order; ExportError names unknown ones."""
    if not names:
        return list(schema.questions)
    unknown = [n for n in names if n not in schema.names]
    if unknown:
        raise ExportError(f"unknown questions {', '.join(unknown)}: the schema has "
                          f"{', '.join(schema.names)}")  # fmt: skip
    return [q for q in schema.questions if q.name in set(names)]


def wide_columns(schema: Schema, questions: Sequence[Question]) -> list[tuple[str, str]]:
    """(name, kind) of every gold-set column, in file order."""
    answer_kind = {"multi": "list", "single": "str", "binary": "str"}
    cols = list(BASE_COLUMNS)
    cols += [(f"human_{q.name}", answer_kind[q.kind]) for q in questions]
    cols += PROVENANCE_COLUMNS
    machine = call_columns(schema, questions) + SCORE_COLUMNS
    return cols + machine + current_columns(schema, questions) + SAMPLE_COLUMNS


def current_columns(schema: Schema, questions: Sequence[Question]) -> list[tuple[str, str]]:
    """(name, kind) of the calls and scores of each work's stored record (`<column>_current`),
    beside those of the revision its labels were made on."""
    scores = [(c, k) for c, k in SCORE_COLUMNS if c in SCORE_FROM_WORK]
    return [(f"{c}{CURRENT}", k) for c, k in call_columns(schema, questions) + scores]


def arrow_schema(columns: list[tuple[str, str]]) -> pa.Schema:
    """The fixed Arrow schema of a column list (no pandas metadata)."""
    return pa.schema([pa.field(name, _ARROW[kind]) for name, kind in columns])


def resolve_campaign(conn: Connection, name_or_id: str | None) -> Any:
    """The campaign row named (or numbered) `name_or_id`, or None; ExportError if unknown."""
    if name_or_id is None:
        return None
    query = select(Campaign.id, Campaign.name)
    row = None
    if storable(str(name_or_id)):
        row = conn.execute(query.where(Campaign.name == str(name_or_id))).first()
    if row is None and (number := row_id(name_or_id)) is not None:
        row = conn.execute(query.where(Campaign.id == number)).first()
    if row is None:
        raise ExportError(f"no campaign named or numbered {shown(str(name_or_id))!r}")
    return row


def sample_design(conn: Connection, campaign_id: int | None, campaign_name: str | None) -> str:
    """What the design columns hold for an export of one campaign (None: all), for the
    manifest: a design belongs to one (work, probability sample) pair."""
    if (
        campaign_id is not None
        and conn.execute(
            select(Campaign.is_probability_sample).where(Campaign.id == campaign_id)
        ).scalar()
    ):
        return (f"sample_campaign, stratum, inclusion_prob and weight (1 / inclusion_prob): "
                f"each work's draw in the probability sample {campaign_name!r}")  # fmt: skip
    return ("sample_campaign, stratum, inclusion_prob and weight are empty: a design belongs "
            "to one (work, probability sample) pair, so they are filled only when --campaign "
            "names a probability-sample campaign")  # fmt: skip


def work_conditions(filters: ExportFilters, campaign_id: int | None) -> list[Any]:
    """SQL conditions on works for the filters."""
    if filters.status not in STATUS_FILTERS:
        raise ExportError(f"status must be one of {', '.join(STATUS_FILTERS)}, "
                          f"not {filters.status!r}")  # fmt: skip
    if filters.since and filters.until and filters.since > filters.until:
        raise ExportError(f"since ({filters.since}) is after until ({filters.until})")
    in_scope = [Label.work_id == Work.id]
    if campaign_id is not None:
        in_scope.append(Label.campaign_id == campaign_id)
    conds: list[Any] = []
    if filters.status == "validated":
        conds.append(Work.status == STATUS_VALIDATED)
    elif filters.status == "labelled":
        conds.append(exists().where(*in_scope, Label.skipped.is_(False)))
    if campaign_id is not None:
        conds.append(exists().where(CampaignItem.campaign_id == campaign_id,
                                    CampaignItem.work_id == Work.id))  # fmt: skip
    if filters.since or filters.until:
        when = list(in_scope)
        if filters.since:
            when.append(Label.created_at >= datetime.combine(filters.since, time()))
        if filters.until:
            when.append(Label.created_at < datetime.combine(filters.until + timedelta(1), time()))
        conds.append(exists().where(*when))
    return conds


def status_counts(conn: Connection, conds: list[Any]) -> dict[str, int]:
    """Number of matching works per status."""
    rows = conn.execute(
        select(Work.status, func.count()).where(*conds).group_by(Work.status).order_by(Work.status)
    )
    return {status: int(n) for status, n in rows}


def _iso(stamp: datetime | None) -> str | None:
    """A UTC timestamp as ISO 8601 text."""
    return stamp.isoformat(timespec="microseconds") if stamp is not None else None


def validation_fields(
    campaigns: dict[int, Any], pseudo: Pseudonymizer, via: str | None
) -> dict[str, Any]:
    """How a work was validated, from its validated_via (None: not validated)."""
    out = {"validation_method": None, "validation_rule": None, "validation_campaign": None,
           "validated_by": None, "validated_via": via}  # fmt: skip
    if not via:
        return out
    if via.startswith("adjudicated:"):
        lead = pseudo(via.removeprefix("adjudicated:"))
        out.update(validation_method="adjudicated", validated_by=lead,
                   validated_via=f"adjudicated:{lead}")  # fmt: skip
    elif match := VIA_CAMPAIGN.match(via):
        camp = campaigns.get(int(match.group(2)))
        out.update(validation_method="rule", validation_rule=match.group(1),
                   validation_campaign=camp.name if camp is not None else None)  # fmt: skip
    else:
        out["validation_method"] = via.split(":", 1)[0]
    return out


def long_rows(
    questions: Sequence[Question],
    campaigns: dict[int, Any],
    names: dict[int, str | None],
    work_id: str,
    labs: list[Any],
) -> list[dict[str, Any]]:
    """One row per question of each current label (the format import-labels reads)."""
    out = []
    for lab in labs:
        for q in questions:
            if q.name not in lab.answers:
                continue
            out.append({
                "work_id": work_id, "annotator": names.get(lab.user_id),
                "question": q.name, "value": lab.answers[q.name],
                "created_at": _iso(lab.created_at), "confidence": lab.confidence,
                "note": lab.note, "campaign": campaigns[lab.campaign_id].name,
                "version": lab.version, "time_on_item_ms": lab.time_on_item_ms,
                "model_version": lab.model_version, "scores_visible": lab.scores_visible,
                "schema_hash": lab.schema_hash, "flagged": lab.flagged,
            })  # fmt: skip
    return out
