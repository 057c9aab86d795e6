"""queue indexes: labels by user and work, partial gold index

Revision ID: 0002_queue_indexes
Revises: 0001_initial_schema
Create Date: 2026-11-29 18:45:00.554704
"""

import sqlalchemy as sa
from alembic import op

revision = "0002_queue_indexes"
down_revision = "0001_initial_schema"
branch_labels = None
depends_on = None


def upgrade() -> None:

    with op.batch_alter_table("labels", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_labels_user"))
        batch_op.create_index("ix_labels_user", ["user_id", "campaign_id", "work_id"], unique=False)

    with op.batch_alter_table("works", schema=None) as batch_op:
        batch_op.create_index(
            "ix_works_gold",
            ["id"],
            unique=False,
            sqlite_where=sa.text("is_gold = 1"),
            postgresql_where=sa.text("is_gold"),
        )


def downgrade() -> None:

    with op.batch_alter_table("works", schema=None) as batch_op:
        batch_op.drop_index(
            "ix_works_gold",
            sqlite_where=sa.text("is_gold = 1"),
            postgresql_where=sa.text("is_gold"),
        )

    with op.batch_alter_table("labels", schema=None) as batch_op:
        batch_op.drop_index("ix_labels_user")
        batch_op.create_index(
            batch_op.f("ix_labels_user"), ["user_id", "campaign_id"], unique=False
        )
