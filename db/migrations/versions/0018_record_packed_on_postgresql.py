"""record packed on postgresql: PostgreSQL keeps each frame record packed, as bytea

Revision ID: 0018_record_packed_on_postgresql
Revises: 0017_record_packed_with_dict
Create Date: 2026-12-05 14:50:00

From this revision the tool packs a record on PostgreSQL as it does on SQLite (db.types:
byte 2 and the LZ4 block of its JSON text compressed against a fixed dictionary), and the
column is `bytea` with STORAGE EXTERNAL: the server moves the packed record (about 1.3 KB)
out of line as it is, in one TOAST chunk, where it compressed the 3 KB text with lz4 into
about 2 KB, two chunks. A 1M import, 5 pairs side by side: 41.6-45.2 -> 37.9-39.8 s (4.5 s
less, the median), the server's CPU 30.5-33.1 -> 22.8-23.8 s, the database 4.0 -> 2.6 GB
(bench/RESULTS.md, issue 16, twenty-second pass).

The other variable-length columns of works become STORAGE MAIN. For a row over 2 KB the
server first compresses the EXTENDED columns one by one, the largest first, and only then
moves an EXTERNAL one out: it tried pglz on the doi, the title, the hash and the rest of
every row before it moved the record out. `machine` (about 460 bytes) stays EXTENDED, with
lz4 where the server has it (about 280 bytes, 287 with pglz). The server's CPU for a 1M
import 22.7-23.0 -> 18.5-18.6 s, the import 2.3-3.0 s faster (2 pairs). A MAIN column is
still compressed, then moved out, when a row is too long once the record is out.

The upgrade retypes the column in SQL: each record stays its text, as UTF-8 bytes, compressed
by the server as before (records imported or updated from then on are packed); db.types
reads both. It rewrites the works table, which stays locked until it ends: 25 s for
1,000,000 works here. The downgrade turns packed records back into text in Python (10,000
rows a statement), then the column into text: 169 s for 1,000,000 packed records. SQLite is
unchanged.
"""

from pathlib import Path

import lz4.block
import sqlalchemy as sa
from alembic import op

revision = "0018_record_packed_on_postgresql"
down_revision = "0017_record_packed_with_dict"
branch_labels = None
depends_on = None

LZ4_BLOCK, LZ4_DICTIONARY_2 = b"\x01", b"\x02"  # db.types', as this revision wrote them
BATCH = 10_000


def _dictionary() -> bytes:
    # db/data/pack_dictionary_2.json never changes once rows are packed with it.
    return (Path(__file__).resolve().parents[2] / "data" / "pack_dictionary_2.json").read_bytes()


def _lz4_available(bind: sa.Connection) -> bool:
    return bool(bind.execute(sa.text(
        "SELECT count(*) FROM pg_settings "
        "WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)"
    )).scalar())  # fmt: skip


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    # One statement, so that the rewrite compresses the records of before with lz4 (a new
    # type takes the server's default, pglz) and the table is rewritten once.
    compression = ", ALTER COLUMN record SET COMPRESSION lz4" if _lz4_available(bind) else ""
    retype = "ALTER TABLE works ALTER COLUMN record TYPE bytea USING convert_to(record, 'UTF8')"
    op.execute(retype + compression)
    op.execute("ALTER TABLE works ALTER COLUMN record SET STORAGE EXTERNAL")
    if compression:
        op.execute("ALTER TABLE works ALTER COLUMN machine SET COMPRESSION lz4")
    _set_storage(bind, "x", "MAIN")


def _set_storage(bind: sa.Connection, storage: str, to: str) -> None:
    """Set the storage of the works columns whose storage is `storage`, but the record's and
    the machine columns'."""
    names = bind.execute(sa.text(
        "SELECT attname FROM pg_attribute WHERE attrelid = 'works'::regclass AND attnum > 0 "
        "AND NOT attisdropped AND attstorage = :storage AND attname NOT IN ('record', 'machine') "
        "ORDER BY attnum"
    ), {"storage": storage}).scalars().all()  # fmt: skip
    if names:
        alters = ", ".join(f'ALTER COLUMN "{name}" SET STORAGE {to}' for name in names)
        op.execute(f"ALTER TABLE works {alters}")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    _set_storage(bind, "m", "EXTENDED")
    op.execute("ALTER TABLE works ALTER COLUMN machine SET COMPRESSION default")
    dictionary = _dictionary()
    select = sa.text(
        "SELECT id, record FROM works WHERE id > :last "
        "AND substring(record FROM 1 FOR 1) IN ('\\x01'::bytea, '\\x02'::bytea) "
        "ORDER BY id LIMIT :n"
    )
    update = sa.text("UPDATE works SET record = :text WHERE id = :id")
    last = ""
    while rows := bind.execute(select, {"last": last, "n": BATCH}).all():
        texts = []
        for work_id, record in rows:
            record = bytes(record)
            if record[:1] == LZ4_DICTIONARY_2:
                data = lz4.block.decompress(record[1:], dict=dictionary)
            else:
                data = lz4.block.decompress(record[1:])
            texts.append({"id": work_id, "text": data})
        bind.execute(update, texts)
        last = rows[-1][0]
    compression = ", ALTER COLUMN record SET COMPRESSION lz4" if _lz4_available(bind) else ""
    retype = "ALTER TABLE works ALTER COLUMN record TYPE text USING convert_from(record, 'UTF8')"
    op.execute(retype + compression)
