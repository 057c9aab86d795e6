"""initial schema: works, predictions, users, campaigns, queue, labels, history, caches

Revision ID: 0001_initial_schema
Revises:
Create Date: 2026-11-29 17:33:13.618421
"""

import sqlalchemy as sa
from alembic import op

revision = "0001_initial_schema"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "abstract_cache",
        sa.Column("work_id", sa.String(length=32), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("fetched_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("retry_after", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "state IN ('ok', 'absent', 'error')", name=op.f("ck_abstract_cache_state")
        ),
        sa.PrimaryKeyConstraint("work_id", name=op.f("pk_abstract_cache")),
    )
    op.create_table(
        "import_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_import_runs")),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("password_hash", sa.String(length=255), nullable=True),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("failed_logins", sa.Integer(), nullable=False),
        sa.Column("locked_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "role IN ('annotator', 'lead', 'exporter', 'admin')", name=op.f("ck_users_role")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("name", name=op.f("uq_users_name")),
    )
    op.create_table(
        "works",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("doi", sa.String(length=255), nullable=True),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("year", sa.Integer(), nullable=True),
        sa.Column("lang", sa.String(length=16), nullable=True),
        sa.Column("type", sa.String(length=64), nullable=True),
        sa.Column("venue", sa.Text(), nullable=True),
        sa.Column("topic", sa.Text(), nullable=True),
        sa.Column("field", sa.String(length=128), nullable=True),
        sa.Column("cited_by", sa.Integer(), nullable=True),
        sa.Column("is_retracted", sa.Boolean(), nullable=True),
        sa.Column("has_abstract", sa.Boolean(), nullable=True),
        sa.Column("ca_institutions", sa.Text(), nullable=True),
        sa.Column("funders", sa.Text(), nullable=True),
        sa.Column("keywords", sa.Text(), nullable=True),
        sa.Column("routes", sa.JSON(), nullable=True),
        sa.Column("record", sa.JSON(), nullable=False),
        sa.Column("record_hash", sa.String(length=64), nullable=False),
        sa.Column("model_version", sa.String(length=128), nullable=True),
        sa.Column("prediction_status", sa.String(length=64), nullable=True),
        sa.Column("score_opus", sa.Float(), nullable=True),
        sa.Column("score_gpt", sa.Float(), nullable=True),
        sa.Column("score_max", sa.Float(), nullable=True),
        sa.Column("score_spread", sa.Float(), nullable=True),
        sa.Column("teacher_disagreement", sa.Float(), nullable=True),
        sa.Column("threshold_uncertainty", sa.Float(), nullable=True),
        sa.Column("status", sa.String(length=40), nullable=False),
        sa.Column("final_answers", sa.JSON(), nullable=True),
        sa.Column("validated_via", sa.String(length=64), nullable=True),
        sa.Column("is_gold", sa.Boolean(), nullable=False),
        sa.Column("imported_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "status IN ('machine_predicted_unvalidated', 'human_in_review', 'human_disputed', 'human_validated')",
            name=op.f("ck_works_status"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_works")),
    )
    with op.batch_alter_table("works", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_works_field"), ["field"], unique=False)
        batch_op.create_index(batch_op.f("ix_works_score_gpt"), ["score_gpt"], unique=False)
        batch_op.create_index(batch_op.f("ix_works_score_max"), ["score_max"], unique=False)
        batch_op.create_index(batch_op.f("ix_works_score_opus"), ["score_opus"], unique=False)
        batch_op.create_index(batch_op.f("ix_works_score_spread"), ["score_spread"], unique=False)
        batch_op.create_index(batch_op.f("ix_works_status"), ["status"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_works_teacher_disagreement"), ["teacher_disagreement"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_works_threshold_uncertainty"), ["threshold_uncertainty"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_works_year"), ["year"], unique=False)

    op.create_table(
        "auth_sessions",
        sa.Column("token", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_auth_sessions_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("token", name=op.f("pk_auth_sessions")),
    )
    op.create_table(
        "campaigns",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("filter", sa.JSON(), nullable=True),
        sa.Column("strategy", sa.String(length=32), nullable=False),
        sa.Column("sample", sa.JSON(), nullable=True),
        sa.Column("is_probability_sample", sa.Boolean(), nullable=False),
        sa.Column("overlap", sa.Integer(), nullable=False),
        sa.Column("blind", sa.Boolean(), nullable=False),
        sa.Column("questions", sa.JSON(), nullable=True),
        sa.Column("lease_seconds", sa.Integer(), nullable=False),
        sa.Column("rule", sa.String(length=32), nullable=False),
        sa.Column("gold_rate", sa.Float(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("created_by", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("overlap >= 1", name=op.f("ck_campaigns_overlap_positive")),
        sa.ForeignKeyConstraint(
            ["created_by"], ["users.id"], name=op.f("fk_campaigns_created_by_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_campaigns")),
        sa.UniqueConstraint("name", name=op.f("uq_campaigns_name")),
    )
    op.create_table(
        "exports",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("format", sa.String(length=16), nullable=False),
        sa.Column("filters", sa.JSON(), nullable=True),
        sa.Column("path", sa.Text(), nullable=True),
        sa.Column("row_count", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_exports_user_id_users")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_exports")),
    )
    op.create_table(
        "predictions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("work_id", sa.String(length=32), nullable=False),
        sa.Column("model_version", sa.String(length=128), nullable=False),
        sa.Column("prediction", sa.JSON(), nullable=True),
        sa.Column("machine_scores", sa.JSON(), nullable=True),
        sa.Column("imported_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["work_id"], ["works.id"], name=op.f("fk_predictions_work_id_works"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_predictions")),
        sa.UniqueConstraint(
            "work_id", "model_version", name=op.f("uq_predictions_work_id_model_version")
        ),
    )
    op.create_table(
        "adjudications",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("work_id", sa.String(length=32), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=True),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("answers", sa.JSON(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["campaign_id"], ["campaigns.id"], name=op.f("fk_adjudications_campaign_id_campaigns")
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_adjudications_user_id_users")
        ),
        sa.ForeignKeyConstraint(
            ["work_id"],
            ["works.id"],
            name=op.f("fk_adjudications_work_id_works"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_adjudications")),
    )
    with op.batch_alter_table("adjudications", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_adjudications_work_id"), ["work_id"], unique=False)

    op.create_table(
        "campaign_items",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("work_id", sa.String(length=32), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("stratum", sa.String(length=64), nullable=True),
        sa.Column("inclusion_prob", sa.Float(), nullable=True),
        sa.Column("n_labels", sa.Integer(), nullable=False),
        sa.Column("done", sa.Boolean(), nullable=False),
        sa.Column("is_gold", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_campaign_items_campaign_id_campaigns"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["work_id"],
            ["works.id"],
            name=op.f("fk_campaign_items_work_id_works"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_campaign_items")),
        sa.UniqueConstraint(
            "campaign_id", "work_id", name=op.f("uq_campaign_items_campaign_id_work_id")
        ),
    )
    with op.batch_alter_table("campaign_items", schema=None) as batch_op:
        batch_op.create_index(
            "ix_campaign_items_queue", ["campaign_id", "done", "position"], unique=False
        )

    op.create_table(
        "labels",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("work_id", sa.String(length=32), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("answers", sa.JSON(), nullable=False),
        sa.Column("skipped", sa.Boolean(), nullable=False),
        sa.Column("skip_reason", sa.String(length=64), nullable=True),
        sa.Column("flagged", sa.Boolean(), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("confidence", sa.Integer(), nullable=True),
        sa.Column("schema_hash", sa.String(length=64), nullable=True),
        sa.Column("scores_visible", sa.Boolean(), nullable=True),
        sa.Column("model_version", sa.String(length=128), nullable=True),
        sa.Column("time_on_item_ms", sa.Integer(), nullable=True),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("submission_id", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("version >= 1", name=op.f("ck_labels_version_positive")),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_labels_campaign_id_campaigns"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_labels_user_id_users")),
        sa.ForeignKeyConstraint(
            ["work_id"], ["works.id"], name=op.f("fk_labels_work_id_works"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_labels")),
        sa.UniqueConstraint(
            "campaign_id",
            "work_id",
            "user_id",
            "version",
            name=op.f("uq_labels_campaign_id_work_id_user_id_version"),
        ),
        sa.UniqueConstraint("submission_id", name=op.f("uq_labels_submission_id")),
    )
    with op.batch_alter_table("labels", schema=None) as batch_op:
        batch_op.create_index("ix_labels_user", ["user_id", "campaign_id"], unique=False)
        batch_op.create_index("ix_labels_work", ["work_id"], unique=False)

    op.create_table(
        "leases",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("work_id", sa.String(length=32), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("leased_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_leases_campaign_id_campaigns"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_leases_user_id_users")),
        sa.ForeignKeyConstraint(
            ["work_id"], ["works.id"], name=op.f("fk_leases_work_id_works"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_leases")),
        sa.UniqueConstraint("campaign_id", "work_id", name=op.f("uq_leases_campaign_id_work_id")),
    )
    with op.batch_alter_table("leases", schema=None) as batch_op:
        batch_op.create_index("ix_leases_user", ["user_id", "campaign_id"], unique=False)

    op.create_table(
        "status_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("work_id", sa.String(length=32), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=True),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("from_status", sa.String(length=40), nullable=True),
        sa.Column("to_status", sa.String(length=40), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["campaign_id"], ["campaigns.id"], name=op.f("fk_status_events_campaign_id_campaigns")
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_status_events_user_id_users")
        ),
        sa.ForeignKeyConstraint(
            ["work_id"],
            ["works.id"],
            name=op.f("fk_status_events_work_id_works"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_status_events")),
    )
    with op.batch_alter_table("status_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_status_events_work_id"), ["work_id"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("status_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_status_events_work_id"))

    op.drop_table("status_events")
    with op.batch_alter_table("leases", schema=None) as batch_op:
        batch_op.drop_index("ix_leases_user")

    op.drop_table("leases")
    with op.batch_alter_table("labels", schema=None) as batch_op:
        batch_op.drop_index("ix_labels_work")
        batch_op.drop_index("ix_labels_user")

    op.drop_table("labels")
    with op.batch_alter_table("campaign_items", schema=None) as batch_op:
        batch_op.drop_index("ix_campaign_items_queue")

    op.drop_table("campaign_items")
    with op.batch_alter_table("adjudications", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_adjudications_work_id"))

    op.drop_table("adjudications")
    op.drop_table("predictions")
    op.drop_table("exports")
    op.drop_table("campaigns")
    op.drop_table("auth_sessions")
    with op.batch_alter_table("works", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_works_year"))
        batch_op.drop_index(batch_op.f("ix_works_threshold_uncertainty"))
        batch_op.drop_index(batch_op.f("ix_works_teacher_disagreement"))
        batch_op.drop_index(batch_op.f("ix_works_status"))
        batch_op.drop_index(batch_op.f("ix_works_score_spread"))
        batch_op.drop_index(batch_op.f("ix_works_score_opus"))
        batch_op.drop_index(batch_op.f("ix_works_score_max"))
        batch_op.drop_index(batch_op.f("ix_works_score_gpt"))
        batch_op.drop_index(batch_op.f("ix_works_field"))

    op.drop_table("works")
    op.drop_table("users")
    op.drop_table("import_runs")
    op.drop_table("abstract_cache")
