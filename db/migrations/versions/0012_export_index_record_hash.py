"""export index record hash: the covering export index also holds each record's hash (SQLite)

Revision ID: 0012_export_index_record_hash
Revises: 0011_record_lz4
Create Date: 2026-12-03 14:45:00

The Monitor reads the validated works of a campaign (id, record hash, final answers) on every
view after a label, to know whether the machine comparisons it keeps still hold. On SQLite the
record hash sits behind the 3 KB record, on its overflow pages: reading 23,678 of them took
0.13-0.38 s on the large bench database, the same read from the covering index 0.035 s.
PostgreSQL has no such index (its records are out of line): nothing to do there.
"""

from alembic import op

revision = "0012_export_index_record_hash"
down_revision = "0011_record_lz4"
branch_labels = None
depends_on = None

BEFORE = ["status", "id", "validated_via", "model_version", "year", "doi", "title",
          "final_answers", "machine_hash", "machine", "score_opus", "score_gpt", "score_spread",
          "teacher_disagreement", "threshold_uncertainty"]  # fmt: skip
AFTER = [*BEFORE, "record_hash"]


def _rebuild(columns: list[str]) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.drop_index("ix_works_export", table_name="works")
    op.create_index("ix_works_export", "works", columns, unique=False)


def upgrade() -> None:
    _rebuild(AFTER)


def downgrade() -> None:
    _rebuild(BEFORE)
