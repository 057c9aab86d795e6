"""label summaries: each work's current labels in brief, for the export

Revision ID: 0005_label_summaries
Revises: 0004_export_machine_columns
Create Date: 2026-12-01 15:30:00

A cache of derived rows that the export fills (see db/models.py LabelSummary): databases
start with it empty, and the first export computes every summary from the labels and stores
it.
"""

import sqlalchemy as sa
from alembic import op

revision = "0005_label_summaries"
down_revision = "0004_export_machine_columns"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "label_summaries",
        sa.Column("work_id", sa.String(length=32), nullable=False),
        sa.Column("label_rows", sa.Integer(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column("first_at", sa.String(length=40), nullable=True),
        sa.Column("last_at", sa.String(length=40), nullable=True),
        sa.Column("model_version", sa.String(length=128), nullable=True),
        sa.ForeignKeyConstraint(
            ["work_id"],
            ["works.id"],
            name=op.f("fk_label_summaries_work_id_works"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("work_id", name=op.f("pk_label_summaries")),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table("label_summaries")
