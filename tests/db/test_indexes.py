"""The works table's deferred indexes: dropped for a bulk load, rebuilt after it."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, inspect

from db.indexes import SORTER_THREADS, defer_indexes, ensure_work_indexes, work_indexes


def _names(engine: Engine) -> set[str]:
    return {i["name"] for i in inspect(engine).get_indexes("works")}


def test_deferred_indexes_come_back_and_the_connection_as_it_was(engine: Engine) -> None:
    wanted = {i.name for i in work_indexes(engine.dialect.name)}
    assert wanted <= _names(engine)
    assert {i.name for i in defer_indexes(engine)} == wanted  # the table is empty
    assert not wanted & _names(engine)
    ensure_work_indexes(engine)
    assert wanted <= _names(engine)
    if engine.dialect.name == "sqlite":  # the sorter threads were for the rebuild only
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA threads").scalar() == 0


def test_the_sorter_threads_apply_to_the_rebuild(
    sqlite_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy.schema import Index

    seen: list[int] = []
    real = Index.create

    def spying(self: Index, bind, checkfirst: bool = False) -> None:  # type: ignore[no-untyped-def]
        seen.append(bind.exec_driver_sql("PRAGMA threads").scalar())
        real(self, bind, checkfirst=checkfirst)

    defer_indexes(sqlite_engine)
    monkeypatch.setattr(Index, "create", spying)
    ensure_work_indexes(sqlite_engine)
    assert seen and set(seen) == {SORTER_THREADS}
