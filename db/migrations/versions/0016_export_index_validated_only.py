"""export index validated only: the covering export index holds the validated works alone (SQLite)

Revision ID: 0016_export_index_validated_only
Revises: 0015_drop_score_indexes
Create Date: 2026-12-05 01:40:00

Every reader of ix_works_export asks for the validated works (`status = 'human_validated'`:
the export's default, the evaluation report, the Monitor), yet it held an entry for every
work: 782 MB of a 1M-work database, sorted and written at the end of every bulk load. As a
partial index it holds only what is read: a frame's works are never validated when they
come, so an import writes none of it and no longer drops and rebuilds it. A 1M SQLite import:
the index builds at its end 14.3-15.8 s -> 4.2-4.5 s, the database 4.40 -> 3.62 GB
(bench/RESULTS.md, issue 16, sixteenth pass). No query loses it: an export of every work or
of the labelled ones walks the works in id order through the primary key, as it did before
(the same query plans on a 1M-work database). PostgreSQL has no such index.
"""

from alembic import op
from sqlalchemy import text

revision = "0016_export_index_validated_only"
down_revision = "0015_drop_score_indexes"
branch_labels = None
depends_on = None

COLUMNS = ["status", "id", "validated_via", "model_version", "year", "doi", "title",
           "final_answers", "machine_hash", "machine", "score_opus", "score_gpt", "score_spread",
           "teacher_disagreement", "threshold_uncertainty", "record_hash"]  # fmt: skip
VALIDATED = "human_validated"  # labeling.vocabulary.STATUS_VALIDATED, as this revision knew it


def _rebuild(where: str | None) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    # if_exists: a bulk load killed before its end leaves the deferred indexes missing.
    op.drop_index("ix_works_export", table_name="works", if_exists=True)
    condition = {"sqlite_where": text(where)} if where else {}
    op.create_index("ix_works_export", "works", COLUMNS, unique=False, **condition)


def upgrade() -> None:
    _rebuild(f"status = '{VALIDATED}'")


def downgrade() -> None:
    _rebuild(None)
