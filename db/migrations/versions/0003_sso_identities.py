"""sso identities: single-sign-on identities, e-mail and domain rules mapped to users

Revision ID: 0003_sso_identities
Revises: 0002_queue_indexes
Create Date: 2026-11-30 10:00:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0003_sso_identities"
down_revision = "0002_queue_indexes"
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "sso_identities",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("issuer", sa.String(length=512), nullable=False),
        sa.Column("value", sa.String(length=320), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("role", sa.String(length=16), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=True),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "kind IN ('subject', 'email', 'domain')", name=op.f("ck_sso_identities_kind")
        ),
        sa.CheckConstraint(
            "(kind = 'domain' AND user_id IS NULL AND role IS NOT NULL AND role IN ('annotator', 'lead', 'exporter', 'admin')) OR (kind <> 'domain' AND user_id IS NOT NULL AND role IS NULL)",
            name=op.f("ck_sso_identities_target"),
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_sso_identities_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sso_identities")),
        sa.UniqueConstraint(
            "kind", "issuer", "value", name=op.f("uq_sso_identities_kind_issuer_value")
        ),
    )
    with op.batch_alter_table("sso_identities", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sso_identities_user_id"), ["user_id"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("sso_identities", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sso_identities_user_id"))

    op.drop_table("sso_identities")
