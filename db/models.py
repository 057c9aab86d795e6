"""SQLAlchemy 2 models: the whole storage schema of the tool."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from db.types import JSONText, UTCDateTime
from labeling.vocabulary import (
    ACTS,
    ROLES,
    RUN_DONE,
    SSO_KINDS,
    STATUS_UNVALIDATED,
    STATUS_VALIDATED,
    STATUSES,
    VERDICT_OUTCOMES,
)

# Constraint names are fixed from day one so that migrations can name what they alter
# on both SQLite (batch mode) and PostgreSQL.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    """Timezone-aware now, the only clock the models use."""
    return datetime.now(UTC)


def _in(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)


EXPORT_INDEX_COLUMNS = (
    "status", "id", "validated_via", "model_version", "year", "doi", "title", "final_answers",
    "machine_hash", "machine", "score_opus", "score_gpt", "score_spread", "teacher_disagreement",
    "threshold_uncertainty", "record_hash",
)  # fmt: skip


def index_applies(index: Index, dialect: str) -> bool:
    """Whether an index of the models exists on a dialect (see Index.info["dialects"])."""
    return dialect in index.info.get("dialects", (dialect,))


class Base(DeclarativeBase):
    """Declarative base with the naming convention."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}

    if TYPE_CHECKING:
        # Every model here maps a Table (DeclarativeBase allows any FromClause, e.g. a subquery).
        __table__: ClassVar[Table]


class Work(Base):
    """One work of the frame: bibliographic fields, current machine scores, human status."""

    __tablename__ = "works"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    doi: Mapped[str | None] = mapped_column(String(255))
    title: Mapped[str | None] = mapped_column(Text)
    year: Mapped[int | None] = mapped_column(Integer, index=True)
    lang: Mapped[str | None] = mapped_column(String(16))
    type: Mapped[str | None] = mapped_column(String(64))
    venue: Mapped[str | None] = mapped_column(Text)
    topic: Mapped[str | None] = mapped_column(Text)
    field: Mapped[str | None] = mapped_column(String(128), index=True)
    cited_by: Mapped[int | None] = mapped_column(Integer)
    is_retracted: Mapped[bool | None] = mapped_column(Boolean)
    has_abstract: Mapped[bool | None] = mapped_column(Boolean)
    ca_institutions: Mapped[str | None] = mapped_column(Text)
    funders: Mapped[str | None] = mapped_column(Text)
    keywords: Mapped[str | None] = mapped_column(Text)
    routes: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    record: Mapped[dict[str, Any]] = mapped_column(JSONText, nullable=False)
    record_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    model_version: Mapped[str | None] = mapped_column(String(128))
    prediction_status: Mapped[str | None] = mapped_column(String(64))
    # Copies of the machine scores: a campaign's order is drawn from them once, when it is
    # created (campaign_items holds it). No index: see migration 0015_drop_score_indexes.
    score_opus: Mapped[float | None] = mapped_column(Float)
    score_gpt: Mapped[float | None] = mapped_column(Float)
    score_max: Mapped[float | None] = mapped_column(Float)
    score_spread: Mapped[float | None] = mapped_column(Float)
    teacher_disagreement: Mapped[float | None] = mapped_column(Float)
    threshold_uncertainty: Mapped[float | None] = mapped_column(Float)
    status: Mapped[str] = mapped_column(
        String(40), nullable=False, default=STATUS_UNVALIDATED, index=True
    )
    final_answers: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    validated_via: Mapped[str | None] = mapped_column(String(64))
    is_gold: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    imported_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # The export's machine columns computed at import (JSON text), and the hash of the schema
    # parts they were computed with (labeling.frames.machine_columns); NULL for rows from elsewhere.
    machine: Mapped[str | None] = mapped_column(Text)
    machine_hash: Mapped[str | None] = mapped_column(String(16))
    # Consistency warnings (JSON array, under machine_hash), reported again by a skipping re-import.
    import_warnings: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        CheckConstraint(f"status IN ({_in(STATUSES)})", name="status"),
        # Gold works are few: a partial index finds them without scanning the frame.
        Index(
            "ix_works_gold",
            "id",
            sqlite_where=text("is_gold = 1"),
            postgresql_where=text("is_gold"),
        ),  # fmt: skip
        # SQLite keeps a 3 KB record inline, one row per page: a gold-set export would read
        # the whole table. This covering index holds what the export reads of the validated
        # works, in id order: the export's default, the evaluation report and the Monitor read
        # them with `status = 'human_validated'`, the term SQLite needs to use a partial index.
        # The works a frame brings are never validated, so an import writes none of it
        # (migration 0016_export_index_validated_only). PostgreSQL moves the record out of line
        # (TOAST) and would refuse long titles in a B-tree entry: the index is SQLite's only.
        Index(
            "ix_works_export",
            *EXPORT_INDEX_COLUMNS,
            sqlite_where=text(f"status = '{STATUS_VALIDATED}'"),
            info={"dialects": ("sqlite",)},
        ),
    )


class Prediction(Base):
    """A work's machine output under one model_version; older versions are kept."""

    __tablename__ = "predictions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    work_id: Mapped[str] = mapped_column(ForeignKey("works.id", ondelete="CASCADE"))
    model_version: Mapped[str] = mapped_column(String(128), nullable=False)
    prediction: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    machine_scores: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    imported_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # The record_hash of the stored record this was copied from (the revision labels made on
    # it name), and that whole record; NULL for rows kept before migration 0020.
    revision: Mapped[str | None] = mapped_column(String(64))
    record: Mapped[dict[str, Any] | None] = mapped_column(JSONText)

    __table_args__ = (UniqueConstraint("work_id", "model_version", "revision"),)


class User(Base):
    """A person with one role; deactivated users keep their labels."""

    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128), nullable=False, unique=True)
    role: Mapped[str] = mapped_column(String(16), nullable=False)
    password_hash: Mapped[str | None] = mapped_column(String(255))
    active: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    failed_logins: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    locked_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (CheckConstraint(f"role IN ({_in(ROLES)})", name="role"),)


class AuthSession(Base):
    """One browser tab's login token (only its SHA-256), so a reload does not sign out.

    A sign-in opens a `login` and gives its tab a token; a reload resumes from the cookie
    with a token of its own in the same login (labeling/auth/login_sessions.py). `role` is the
    user's role at sign-in: a session whose user has another role now is refused.
    `superseded_at`: when a newer token of the login replaced this one in the cookie.
    """

    __tablename__ = "auth_sessions"

    token: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    login: Mapped[str] = mapped_column(String(64), index=True)
    role: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    last_seen: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    superseded_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class SSOIdentity(Base):
    """How a single-sign-on identity becomes a local user (see labeling/auth/sso.py).

    `subject`: the provider's issuer and subject claim, linked to one user. `email`: a
    verified e-mail address, linked to one user. `domain`: a verified address at this domain
    may sign in; on first sign-in a user with `role` is created and a `subject` row links it.
    """

    __tablename__ = "sso_identities"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), nullable=False)
    # Only `subject` rows name an issuer; e-mail and domain rules hold '' (any issuer).
    issuer: Mapped[str] = mapped_column(String(512), nullable=False, default="")
    value: Mapped[str] = mapped_column(String(320), nullable=False)
    user_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    role: Mapped[str | None] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    created_by: Mapped[str | None] = mapped_column(String(128))
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    __table_args__ = (
        UniqueConstraint("kind", "issuer", "value"),
        CheckConstraint(f"kind IN ({_in(SSO_KINDS)})", name="kind"),
        CheckConstraint(
            "(kind = 'domain' AND user_id IS NULL AND role IS NOT NULL AND role IN "
            f"({_in(ROLES)})) OR (kind <> 'domain' AND user_id IS NOT NULL AND role IS NULL)",
            name="target",
        ),
    )


class Campaign(Base):
    """A labelling campaign: which works, in what order, how many labels each."""

    __tablename__ = "campaigns"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128), nullable=False, unique=True)
    description: Mapped[str | None] = mapped_column(Text)
    filter: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    strategy: Mapped[str] = mapped_column(String(32), nullable=False, default="score_max")
    sample: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    is_probability_sample: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    overlap: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    blind: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    # Share of assignments shown the scores before submit (NULL: blind decides; review/assist).
    assist_rate: Mapped[float | None] = mapped_column(Float)
    assist_seed: Mapped[int | None] = mapped_column(Integer)
    questions: Mapped[list[Any] | None] = mapped_column(JSON)
    lease_seconds: Mapped[int] = mapped_column(Integer, nullable=False, default=900)
    rule: Mapped[str] = mapped_column(String(32), nullable=False, default="unanimous")
    gold_rate: Mapped[float] = mapped_column(Float, nullable=False, default=0.0)
    active: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    created_by: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (CheckConstraint("overlap >= 1", name="overlap_positive"),)


class CampaignItem(Base):
    """A work queued in a campaign, with its place and (for samples) inclusion probability."""

    __tablename__ = "campaign_items"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    work_id: Mapped[str] = mapped_column(ForeignKey("works.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer, nullable=False)
    stratum: Mapped[str | None] = mapped_column(String(64))
    inclusion_prob: Mapped[float | None] = mapped_column(Float)
    n_labels: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    done: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    is_gold: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)

    __table_args__ = (
        UniqueConstraint("campaign_id", "work_id"),
        Index("ix_campaign_items_queue", "campaign_id", "done", "position"),
    )


class Lease(Base):
    """A work held by one annotator until it expires; one holder per work at a time."""

    __tablename__ = "leases"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    work_id: Mapped[str] = mapped_column(ForeignKey("works.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    leased_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)

    __table_args__ = (
        UniqueConstraint("campaign_id", "work_id"),
        Index("ix_leases_user", "user_id", "campaign_id"),
    )


class Label(Base):
    """One version of one annotator's answer on one work; rows are only ever added."""

    __tablename__ = "labels"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    work_id: Mapped[str] = mapped_column(ForeignKey("works.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    version: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    answers: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    skipped: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    skip_reason: Mapped[str | None] = mapped_column(String(64))
    flagged: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    note: Mapped[str | None] = mapped_column(Text)
    confidence: Mapped[int | None] = mapped_column(Integer)
    schema_hash: Mapped[str | None] = mapped_column(String(64))
    scores_visible: Mapped[bool | None] = mapped_column(Boolean)
    model_version: Mapped[str | None] = mapped_column(String(128))
    time_on_item_ms: Mapped[int | None] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(String(16), nullable=False, default="app")
    submission_id: Mapped[str | None] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # The work's record_hash when the label was stored: the revision of the frame record it
    # was made on (NULL for labels of before migration 0020: unknown).
    revision: Mapped[str | None] = mapped_column(String(64))

    __table_args__ = (
        # The invariant behind "one label per annotator per work per round": a second
        # concurrent first submit of the same version fails here instead of duplicating.
        UniqueConstraint("campaign_id", "work_id", "user_id", "version"),
        CheckConstraint("version >= 1", name="version_positive"),
        Index("ix_labels_work", "work_id"),
        # Covers the claim's "has this user seen the work" anti-join without a heap read.
        Index("ix_labels_user", "user_id", "campaign_id", "work_id"),
        # Covers the Monitor's live counts (first submissions per minute, hour or day; the
        # rate's window): an index-only scan instead of reading every label row with its
        # answers (100,000 labels: 0.55 s -> see bench/RESULTS.md, issue 15).
        Index("ix_labels_campaign_time", "campaign_id", "version", "created_at", "skipped"),
    )


class LabelSummary(Base):
    """A work's current labels in brief, as the export reports them; derived from labels.

    A cache the export fills (labeling/export/summaries.py): it trusts a row only when
    label_rows equals the work's number of label rows (labels are only ever added, so the
    same count means the same labels) and it was made under the current schema, and
    otherwise recomputes it from the labels and stores it again.
    """

    __tablename__ = "label_summaries"

    work_id: Mapped[str] = mapped_column(
        ForeignKey("works.id", ondelete="CASCADE"), primary_key=True
    )
    # Every label row of the work when summarised: versions, skips, all campaigns.
    label_rows: Mapped[int] = mapped_column(Integer, nullable=False)
    # JSON: schema hash, number of current labels, annotator ids, [agreeing pairs, answers]
    # per schema question; NULL when the work has no current (non-skipped) label.
    summary: Mapped[str | None] = mapped_column(Text)
    first_at: Mapped[str | None] = mapped_column(String(40))  # ISO 8601 UTC, as exported
    last_at: Mapped[str | None] = mapped_column(String(40))
    model_version: Mapped[str | None] = mapped_column(String(128))  # newest stamped label's

    # Clustered by work id on SQLite, so the export reads a range of works in one pass.
    __table_args__ = ({"sqlite_with_rowid": False},)


class Adjudication(Base):
    """A lead's final answer for a work, which validates it whatever the labels say."""

    __tablename__ = "adjudications"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    work_id: Mapped[str] = mapped_column(ForeignKey("works.id", ondelete="CASCADE"), index=True)
    campaign_id: Mapped[int | None] = mapped_column(ForeignKey("campaigns.id"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    answers: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class StatusEvent(Base):
    """One change of a work's status: who, when, from what, to what, why."""

    __tablename__ = "status_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    work_id: Mapped[str] = mapped_column(ForeignKey("works.id", ondelete="CASCADE"), index=True)
    campaign_id: Mapped[int | None] = mapped_column(ForeignKey("campaigns.id"))
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    from_status: Mapped[str | None] = mapped_column(String(40))
    to_status: Mapped[str] = mapped_column(String(40), nullable=False)
    reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # What the act was and what it changed (events before migration 0019 hold NULL): the
    # validated answers, how they were validated and the gold mark, before and after.
    act: Mapped[str | None] = mapped_column(String(24))
    answers_before: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    answers_after: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    via_before: Mapped[str | None] = mapped_column(String(64))
    via_after: Mapped[str | None] = mapped_column(String(64))
    gold_before: Mapped[bool | None] = mapped_column(Boolean)
    gold_after: Mapped[bool | None] = mapped_column(Boolean)

    __table_args__ = (CheckConstraint(f"act IS NULL OR act IN ({_in(ACTS)})", name="act"),)


class CampaignVerdict(Base):
    """Another campaign's verdict on a work that was already validated: it corroborates the
    validated answers or opens a dispute across campaigns, which stays open (the work keeps
    its answers) until a lead adjudicates or reopens the work (`settled_at`)."""

    __tablename__ = "campaign_verdicts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    work_id: Mapped[str] = mapped_column(ForeignKey("works.id", ondelete="CASCADE"), index=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    outcome: Mapped[str] = mapped_column(String(16), nullable=False)
    # The campaign's concluded answers, and the questions on which they differ (disputed).
    answers: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    differing: Mapped[list[Any] | None] = mapped_column(JSON)
    # The validated answers it was compared with, and how they were validated.
    against: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    against_via: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    settled_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    settled_by: Mapped[int | None] = mapped_column(ForeignKey("users.id"))

    __table_args__ = (
        UniqueConstraint("work_id", "campaign_id"),
        CheckConstraint(f"outcome IN ({_in(VERDICT_OUTCOMES)})", name="outcome"),
    )


class AbstractCache(Base):
    """An abstract fetched from OpenAlex, its absence, or a recent failure to fetch it."""

    __tablename__ = "abstract_cache"

    work_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    state: Mapped[str] = mapped_column(String(16), nullable=False)
    text: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    fetched_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    retry_after: Mapped[datetime | None] = mapped_column(UTCDateTime())

    __table_args__ = (CheckConstraint("state IN ('ok', 'absent', 'error')", name="state"),)


class ImportRun(Base):
    """One run of a frame or labels import, its summary and how it ended."""

    __tablename__ = "import_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), nullable=False)
    path: Mapped[str] = mapped_column(Text, nullable=False)
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # A failed run's summary holds the counts reached before the failure; what it stored stays.
    status: Mapped[str] = mapped_column(
        String(16), nullable=False, default=RUN_DONE, server_default=RUN_DONE
    )
    error: Mapped[str | None] = mapped_column(Text)


class Export(Base):
    """One gold-set export and what it contained."""

    __tablename__ = "exports"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    format: Mapped[str] = mapped_column(String(16), nullable=False)
    filters: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    path: Mapped[str | None] = mapped_column(Text)
    row_count: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    sha256: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
