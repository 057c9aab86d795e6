"""The works table's deferred indexes: dropped for a bulk load, rebuilt after it."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, inspect

from db.indexes import (
    BUILD_CACHE_KIB,
    DEFERRED,
    SORTER_THREADS,
    defer_indexes,
    ensure_work_indexes,
    work_indexes,
)


def _names(engine: Engine) -> set[str]:
    return {i["name"] for i in inspect(engine).get_indexes("works")}


def test_deferred_indexes_come_back_and_the_connection_as_it_was(engine: Engine) -> None:
    wanted = {i.name for i in work_indexes(engine.dialect.name)}
    deferred = wanted & DEFERRED
    assert "ix_works_gold" in wanted - deferred  # partial, and no work is gold at import
    if engine.dialect.name == "sqlite":  # partial, and no work comes validated
        assert "ix_works_export" in wanted - deferred
    assert wanted <= _names(engine)
    assert {i.name for i in defer_indexes(engine)} == deferred  # the table is empty
    assert _names(engine) & wanted == wanted - deferred
    ensure_work_indexes(engine)
    assert wanted <= _names(engine)
    if engine.dialect.name == "sqlite":  # the sorter's settings were for the rebuild only
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA threads").scalar() == 0
            assert conn.exec_driver_sql("PRAGMA cache_size").scalar() == -65536


def test_the_sorter_threads_and_the_small_cache_apply_to_the_rebuild(
    sqlite_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy.schema import Index

    seen: list[tuple[int, int]] = []
    real = Index.create

    def spying(self: Index, bind, checkfirst: bool = False) -> None:  # type: ignore[no-untyped-def]
        pragma = bind.exec_driver_sql
        seen.append((pragma("PRAGMA threads").scalar(), pragma("PRAGMA cache_size").scalar()))
        real(self, bind, checkfirst=checkfirst)

    defer_indexes(sqlite_engine)
    monkeypatch.setattr(Index, "create", spying)
    ensure_work_indexes(sqlite_engine)
    assert seen and set(seen) == {(SORTER_THREADS, -BUILD_CACHE_KIB)}


def _entries(engine: Engine, index: str) -> int:
    """The number of entries in an index of works (SQLite's ANALYZE counts them)."""
    with engine.begin() as conn:
        conn.exec_driver_sql("ANALYZE works")
        stat = conn.exec_driver_sql(
            "SELECT stat FROM sqlite_stat1 WHERE idx = ?", (index,)
        ).scalar_one_or_none()
    return int(stat.split()[0]) if stat else 0


def test_the_export_index_holds_the_validated_works_only(sqlite_engine: Engine) -> None:
    """Only validated works have an entry: an import of a frame writes nothing to it."""
    from sqlalchemy import update

    from db.engine import write_session
    from db.models import Work
    from labeling.vocabulary import STATUS_DISPUTED, STATUS_VALIDATED
    from tests.factories import insert_works, work_row

    rows = [work_row(f"W{i}") for i in range(1, 6)]
    rows += [work_row("W6", status=STATUS_VALIDATED), work_row("W7", status=STATUS_DISPUTED)]
    insert_works(sqlite_engine, rows)
    assert _entries(sqlite_engine, "ix_works_export") == 1
    assert _entries(sqlite_engine, "sqlite_autoindex_works_1") == 7
    with write_session(sqlite_engine) as session:
        session.execute(
            update(Work).where(Work.id.in_(["W2", "W7"])).values(status=STATUS_VALIDATED)
        )
    assert _entries(sqlite_engine, "ix_works_export") == 3
