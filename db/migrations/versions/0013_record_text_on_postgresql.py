"""record text on postgresql: PostgreSQL keeps each frame record as text, not json

Revision ID: 0013_record_text_on_postgresql
Revises: 0012_export_index_record_hash
Create Date: 2026-12-04 12:20:00

The `json` type checks every value it is given, and that check took a third of the
server's time to COPY 200,000 seed-shaped records (backend CPU 8.3-8.6 s as json, 4.9-6.3 s
as text; bench/RESULTS.md, issue 16, ninth pass). The importer has decoded and checked
each record before it writes it, so the server's check adds nothing. The models read and
write the column as JSON on both engines (db.models.JSONText); in SQL, `record::json` reads
it as JSON. The column keeps its lz4 compression. SQLite stores the text as it is: nothing
to do there. On PostgreSQL the change rewrites the works table, which stays locked until it
ends: 79.6 s for 1,000,000 works here (the downgrade 101.5 s).
"""

import sqlalchemy as sa
from alembic import op

revision = "0013_record_text_on_postgresql"
down_revision = "0012_export_index_record_hash"
branch_labels = None
depends_on = None


def _retype(sql_type: str) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    method = bind.execute(sa.text(
        "SELECT attcompression FROM pg_attribute "
        "WHERE attrelid = 'works'::regclass AND attname = 'record'"
    )).scalar()  # fmt: skip
    op.execute(f"ALTER TABLE works ALTER COLUMN record TYPE {sql_type} USING record::{sql_type}")
    if method == "l":  # a new type may take the server's default compression
        op.execute("ALTER TABLE works ALTER COLUMN record SET COMPRESSION lz4")


def upgrade() -> None:
    _retype("text")


def downgrade() -> None:
    _retype("json")
