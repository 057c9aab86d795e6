"""export machine columns: stored machine digest per work, covering export index (SQLite)

Revision ID: 0004_export_machine_columns
Revises: 0003_sso_identities
Create Date: 2026-11-29 20:30:00

The works get the export's machine columns computed at import (`machine`, JSON text) and
the hash of the schema parts they depend on (`machine_hash`). Existing rows keep NULL: the
export computes their machine columns from the record, as before, and the next import of
the frame fills them in. On SQLite a covering index lets the export read what it needs
without reading every 3 KB record (see db/models.py).
"""

import sqlalchemy as sa
from alembic import op

revision = "0004_export_machine_columns"
down_revision = "0003_sso_identities"
branch_labels = None
depends_on = None

EXPORT_INDEX_COLUMNS = ["status", "id", "validated_via", "model_version", "year", "doi", "title",
                        "final_answers", "machine_hash", "machine", "score_opus", "score_gpt",
                        "score_spread", "teacher_disagreement", "threshold_uncertainty"]  # fmt: skip


def upgrade() -> None:
    op.add_column("works", sa.Column("machine", sa.Text(), nullable=True))
    op.add_column("works", sa.Column("machine_hash", sa.String(length=16), nullable=True))
    if op.get_bind().dialect.name == "sqlite":
        op.create_index("ix_works_export", "works", EXPORT_INDEX_COLUMNS, unique=False)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.drop_index("ix_works_export", table_name="works")
    with op.batch_alter_table("works", schema=None) as batch_op:
        batch_op.drop_column("machine_hash")
        batch_op.drop_column("machine")
