"""record packed with a dictionary: SQLite packs each frame record against a fixed dictionary

Revision ID: 0017_record_packed_with_dict
Revises: 0016_export_index_validated_only
Create Date: 2026-12-05 13:50:00

From this revision the tool packs a record on SQLite as byte 2 and the LZ4 block of its JSON
text compressed against a fixed dictionary, a real frame record
(db/data/pack_dictionary_2.json, db.types.DICTIONARY_2), instead of byte 1 and a block
compressed on its own: 1.3 KB a record instead of 2.0 KB, and a 1M-work database of 2.84 GB instead of
3.63 GB (bench/RESULTS.md, issue 16, twenty-first pass). Records packed before still read,
so the upgrade changes no row. The downgrade packs every record of byte 2 again as byte 1,
for the code of earlier revisions, which reads byte 1 only (10,000 rows a statement).
PostgreSQL is unchanged: its record stays text, compressed by the server.
"""

from pathlib import Path

import lz4.block
import sqlalchemy as sa
from alembic import op

revision = "0017_record_packed_with_dict"
down_revision = "0016_export_index_validated_only"
branch_labels = None
depends_on = None

LZ4_BLOCK, LZ4_DICTIONARY_2 = b"\x01", b"\x02"  # db.types', as this revision wrote them
BATCH = 10_000


def _dictionary() -> bytes:
    # db/data/pack_dictionary_2.json never changes once rows are packed with it.
    return (Path(__file__).resolve().parents[2] / "data" / "pack_dictionary_2.json").read_bytes()


def upgrade() -> None:
    pass


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    dictionary = _dictionary()
    select = sa.text(
        "SELECT rowid, record FROM works WHERE rowid > :last AND typeof(record) = 'blob' "
        "AND substr(record, 1, 1) = :kind ORDER BY rowid LIMIT :n"
    )
    update = sa.text("UPDATE works SET record = :packed WHERE rowid = :rowid")
    last = -1
    while rows := bind.execute(select, {"last": last, "kind": LZ4_DICTIONARY_2, "n": BATCH}).all():
        packed = []
        for rowid, record in rows:
            data = lz4.block.decompress(record[1:], dict=dictionary)
            packed.append({"rowid": rowid, "packed": LZ4_BLOCK + lz4.block.compress(data)})
        bind.execute(update, packed)
        last = rows[-1][0]
