"""The migrations build exactly the schema the models describe, on both engines."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine

from db.models import Base, index_applies


def test_migrated_database_matches_the_models(engine: Engine) -> None:
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    # An index the models keep for one engine only is not built on the others.
    elsewhere = {ix.name for table in Base.metadata.tables.values() for ix in table.indexes
                 if not index_applies(ix, engine.dialect.name)}  # fmt: skip
    diff = [d for d in diff if not (d[0] == "add_index" and d[1].name in elsewhere)]
    assert diff == []


@pytest.mark.pg
def test_postgres_compresses_new_records_with_lz4_when_it_can(pg_url: str) -> None:
    from sqlalchemy import text

    from db.engine import make_engine

    engine = make_engine(pg_url)
    with engine.connect() as conn:
        has_lz4 = conn.execute(text(
            "SELECT count(*) FROM pg_settings "
            "WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)"
        )).scalar()  # fmt: skip
        method = conn.execute(text(
            "SELECT attcompression FROM pg_attribute "
            "WHERE attrelid = 'works'::regclass AND attname = 'record'"
        )).scalar()  # fmt: skip
    engine.dispose()
    assert method == ("l" if has_lz4 else "")
