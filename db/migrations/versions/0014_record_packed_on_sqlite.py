"""record packed on sqlite: SQLite keeps each frame record LZ4-compressed, as a BLOB

Revision ID: 0014_record_packed_on_sqlite
Revises: 0013_record_text_on_postgresql
Create Date: 2026-12-04 15:15:00

From this revision the tool writes a record on SQLite as one byte naming the packing (1: an
LZ4 block with its size) and the LZ4 block of its JSON text (db.types.JSONText): a 1M-work
import wrote a 4.31 GB file against 6.10 GB, and took 61-62 s against 71-76 s (bench/RESULTS.md,
issue 16, tenth pass). It reads records stored as text as before, so the upgrade changes no
row: records are packed as they are written again. The downgrade turns every packed record
back into its text, for the code of earlier revisions, which reads text only (10,000 rows a
statement; 36.3 s for 1,000,000 records here, the file growing from 4.31 to 6.25 GB).
PostgreSQL is unchanged: its record stays text, compressed by the server.
"""

import lz4.block
import sqlalchemy as sa
from alembic import op

revision = "0014_record_packed_on_sqlite"
down_revision = "0013_record_text_on_postgresql"
branch_labels = None
depends_on = None

LZ4_BLOCK = b"\x01"  # db.types.LZ4_BLOCK, kept here as this revision wrote it
BATCH = 10_000


def upgrade() -> None:
    pass


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    select = sa.text(
        "SELECT rowid, record FROM works WHERE rowid > :last AND typeof(record) = 'blob' "
        "ORDER BY rowid LIMIT :n"
    )
    update = sa.text("UPDATE works SET record = :text WHERE rowid = :rowid")
    last = -1
    while rows := bind.execute(select, {"last": last, "n": BATCH}).all():
        texts = []
        for rowid, packed in rows:
            if packed[:1] != LZ4_BLOCK:
                raise ValueError(f"works rowid {rowid}: record is not a packed JSON value")
            texts.append({"rowid": rowid, "text": lz4.block.decompress(packed[1:]).decode()})
        bind.execute(update, texts)
        last = rows[-1][0]
