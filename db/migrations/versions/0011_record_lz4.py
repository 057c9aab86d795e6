"""record lz4: PostgreSQL compresses each stored frame record with lz4 instead of pglz

Revision ID: 0011_record_lz4
Revises: 0010_import_warnings
Create Date: 2026-12-03 09:45:00

A 3 KB record is moved out of line and compressed (TOAST) as it is written. With pglz that
compression was the PostgreSQL backend's largest cost in a frame import: COPY of 30,000
seed-shaped records took 3.8 s with pglz and 1.8 s with lz4 in the same minute, for 30%
more bytes on disk (58 MB -> 75 MB). Rows stored before keep pglz (PostgreSQL reads
both); servers built without lz4 keep pglz. SQLite stores the text as it is: nothing to do.
"""

import sqlalchemy as sa
from alembic import op

revision = "0011_record_lz4"
down_revision = "0010_import_warnings"
branch_labels = None
depends_on = None

_HAS_LZ4 = (
    "SELECT count(*) FROM pg_settings "
    "WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)"
)


def _set_compression(method: str) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql" or not bind.execute(sa.text(_HAS_LZ4)).scalar():
        return
    op.execute(f"ALTER TABLE works ALTER COLUMN record SET COMPRESSION {method}")


def upgrade() -> None:
    _set_compression("lz4")


def downgrade() -> None:
    _set_compression("pglz")
