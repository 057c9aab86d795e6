"""drop score indexes: the six single-column indexes on the works' machine scores go

Revision ID: 0015_drop_score_indexes
Revises: 0014_record_packed_on_sqlite
Create Date: 2026-12-04 18:40:00

They were made for a queue read in score order; the queue has long been materialised in
campaign_items, so the only reader left is the creation of a campaign, and there they did
harm or nothing. On 1,000,000 works (bench/RESULTS.md, issue 16, twelfth pass), creating a
score_max campaign of every work took 12.6-14.0 s on SQLite with the index (SQLite walks it
and reads each row by rowid) and 7.5-7.6 s without; its top 5,000 5.7-5.9 s and 2.4 s; a
score-range filter of 34,904 works 0.34 s and 1.0-1.1 s. PostgreSQL did not use them: the
same campaigns took the same time either way. And every bulk load rebuilt them: a 1M
import's index builds took 14.1-16.9 s with them and 8.4-9.6 s without on SQLite, 5.2 s and
2.1-2.3 s on PostgreSQL (bench/import_ab.py, side by side).
"""

from alembic import op

revision = "0015_drop_score_indexes"
down_revision = "0014_record_packed_on_sqlite"
branch_labels = None
depends_on = None

COLUMNS = ["score_gpt", "score_max", "score_opus", "score_spread", "teacher_disagreement",
           "threshold_uncertainty"]  # fmt: skip


def upgrade() -> None:
    # if_exists: a bulk load killed between dropping and rebuilding the works indexes
    # leaves them missing until the next start rebuilds them.
    for column in COLUMNS:
        op.drop_index(f"ix_works_{column}", table_name="works", if_exists=True)


def downgrade() -> None:
    for column in COLUMNS:
        op.create_index(f"ix_works_{column}", "works", [column], unique=False, if_not_exists=True)
