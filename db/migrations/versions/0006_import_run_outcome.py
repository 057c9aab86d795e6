"""import run outcome: status (running, done, failed) and the error of a failed run

Revision ID: 0006_import_run_outcome
Revises: 0005_label_summaries
Create Date: 2026-12-03 10:00:00

An import that fails part-way keeps what it stored (imports are resumable, see the README)
and records how far it got: `status` says how the run ended and `error` why it failed.
Existing runs that finished are "done"; those never finished (a killed process, or a
failure before this revision) are "running", as nothing recorded their end.
"""

import sqlalchemy as sa
from alembic import op

revision = "0006_import_run_outcome"
down_revision = "0005_label_summaries"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "import_runs",
        sa.Column("status", sa.String(length=16), nullable=False, server_default="done"),
    )
    op.add_column("import_runs", sa.Column("error", sa.Text(), nullable=True))
    op.execute("UPDATE import_runs SET status = 'running' WHERE finished_at IS NULL")


def downgrade() -> None:
    with op.batch_alter_table("import_runs", schema=None) as batch_op:
        batch_op.drop_column("error")
        batch_op.drop_column("status")
