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
