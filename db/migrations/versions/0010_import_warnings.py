"""import warnings: the consistency warnings of each stored record, kept for re-imports

Revision ID: 0010_import_warnings
Revises: 0009_labels_campaign_time
Create Date: 2026-12-03 09:00:00

A re-import skips a line whose sha256 equals the stored `record_hash` without decoding it
(labeling/frames/known.py), yet still reports that line's consistency warnings, as an import
always has: they are kept with the record (`import_warnings`, a JSON array of messages,
computed under the stored `machine_hash`). Existing rows keep NULL: their lines are decoded
once more at the next import, which fills the column in.
"""

import sqlalchemy as sa
from alembic import op

revision = "0010_import_warnings"
down_revision = "0009_labels_campaign_time"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("works", sa.Column("import_warnings", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("works", schema=None) as batch_op:
        batch_op.drop_column("import_warnings")
