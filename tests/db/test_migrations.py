"""The migrations build exactly the schema the models describe, on both engines."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection, Engine

from db.models import Base, index_applies


def test_migrated_database_matches_the_models(engine: Engine) -> None:
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    # An index the models keep for one engine only is not built on the others.
    elsewhere = {ix.name for table in Base.metadata.tables.values() for ix in table.indexes
                 if not index_applies(ix, engine.dialect.name)}  # fmt: skip
    diff = [d for d in diff if not (d[0] == "add_index" and d[1].name in elsewhere)]
    assert diff == []


_STORAGE = (
    "SELECT attname, format_type(atttypid, atttypmod), attstorage, attcompression "
    "FROM pg_attribute WHERE attrelid = 'works'::regclass AND attnum > 0 "
    "AND NOT attisdropped AND attstorage <> 'p'"
)


def _has_lz4(conn: Connection) -> bool:
    from sqlalchemy import text

    return bool(conn.execute(text(
        "SELECT count(*) FROM pg_settings "
        "WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)"
    )).scalar())  # fmt: skip


@pytest.mark.pg
def test_postgres_moves_only_the_packed_record_out_of_line(pg_url: str) -> None:
    """At head the record is bytea, moved out of line as it is (STORAGE EXTERNAL): packed by
    the tool, nothing for the server to compress. Every other variable-length column is
    MAIN, so that the server does not try to compress each of them before it moves the
    record out (it tries EXTENDED columns first); `machine` (about 460 bytes) is compressed,
    with lz4 where the server has it. A column added later must say its storage too."""
    from sqlalchemy import text

    from db.engine import make_engine

    engine = make_engine(pg_url)
    with engine.connect() as conn:
        has_lz4 = _has_lz4(conn)
        columns = {name: tuple(rest) for name, *rest in conn.execute(text(_STORAGE))}
    engine.dispose()
    lz4 = "l" if has_lz4 else ""
    assert columns.pop("record") == ("bytea", "e", lz4)
    assert columns.pop("machine") == ("text", "x", lz4)
    assert len(columns) >= 19
    assert {name: storage for name, (_, storage, _) in columns.items() if storage != "m"} == {}


@pytest.mark.pg
def test_0018_packs_new_records_reads_old_ones_and_turns_them_back_into_text(
    pg_url: str,
) -> None:
    """Records of before 0018 stay their text (UTF-8 bytes, compressed by the server) and
    read as before; new ones are packed; the downgrade turns both into text."""
    from sqlalchemy import select, text

    from db.engine import make_engine, read_session
    from db.models import Work
    from tests.factories import insert_works, work_row

    engine = make_engine(pg_url)
    # Over 2 KB: the server compresses a value only in a row over its TOAST threshold.
    old = {"id": "W1", "title": "tab\there é 𝔘", "n": [1.5, None, True], "pad": "ab" * 2000}
    new = {"id": "W2", "title": "é 𝔘 new", "n": [0.25]}
    old_text, new_text = orjson.dumps(old).decode(), orjson.dumps(new).decode()
    stored = "SELECT id, record FROM works ORDER BY id"
    try:
        _migrate(engine, "0017_record_packed_with_dict", down=True)
        with engine.begin() as conn:
            conn.execute(text(
                "INSERT INTO works (id, record, record_hash, status, is_gold, imported_at, "
                "updated_at) VALUES ('W1', :r, 'h', 'machine_predicted_unvalidated', false, "
                "now(), now())"), {"r": old_text})  # fmt: skip
        _migrate(engine, "head")
        insert_works(engine, [work_row("W2") | {"record": new}])
        with engine.connect() as conn:
            rows = dict(conn.execute(text(stored)).all())
            method = conn.execute(text(
                "SELECT pg_column_compression(record) FROM works WHERE id = 'W1'"
            )).scalar()  # fmt: skip
            has_lz4 = _has_lz4(conn)
        assert bytes(rows["W1"]) == old_text.encode() and bytes(rows["W2"][:1]) == b"\x02"
        assert method == ("lz4" if has_lz4 else "pglz")  # by the server, as before the retype
        with read_session(engine) as session:
            read = dict(session.execute(select(Work.id, Work.record)).all())
        assert read == {"W1": old, "W2": new}
        _migrate(engine, "0017_record_packed_with_dict", down=True)
        with engine.connect() as conn:
            assert dict(conn.execute(text(stored)).all()) == {"W1": old_text, "W2": new_text}
            storage = {name: (s, c) for name, _, s, c in conn.execute(text(_STORAGE))}
        assert storage.pop("record") == ("x", "l" if has_lz4 else "")
        assert set(storage.values()) == {("x", "")}  # as before 0018
        _migrate(engine, "head")
        with read_session(engine) as session:
            assert dict(session.execute(select(Work.id, Work.record)).all()) == read
    finally:
        engine.dispose()


def _migrate(engine: Engine, revision: str, down: bool = False) -> None:
    from alembic import command

    from db.engine import alembic_config

    cfg = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        (command.downgrade if down else command.upgrade)(cfg, revision)


@pytest.mark.pg
def test_postgres_keeps_records_as_text_and_reads_them_as_before(pg_url: str) -> None:
    """0013 turns the json column into text (lz4 kept) and back, every record unchanged."""
    from sqlalchemy import text

    from db.engine import make_engine

    engine = make_engine(pg_url)
    record = '{"id":"W1","title":"tab\\there é 𝔘","n":[1.5,null,true]}'
    column = (
        "SELECT data_type, attcompression FROM information_schema.columns c "
        "JOIN pg_attribute a ON a.attrelid = 'works'::regclass AND a.attname = c.column_name "
        "WHERE c.table_name = 'works' AND c.column_name = 'record'"
    )
    try:
        _migrate(engine, "0012_export_index_record_hash", down=True)
        with engine.begin() as conn:
            before = tuple(conn.execute(text(column)).one())
            conn.execute(text(
                "INSERT INTO works (id, record, record_hash, status, is_gold, imported_at, "
                "updated_at) VALUES ('W1', :r, 'h', 'machine_predicted_unvalidated', false, "
                "now(), now())"), {"r": record})  # fmt: skip
        _migrate(engine, "0017_record_packed_with_dict")  # 0018 packs it: see below
        with engine.connect() as conn:
            after = tuple(conn.execute(text(column)).one())
            stored = conn.execute(text("SELECT record FROM works")).scalar()
        assert before[0] == "json" and after == ("text", before[1])
        assert stored == record
        _migrate(engine, "0012_export_index_record_hash", down=True)
        with engine.connect() as conn:
            assert tuple(conn.execute(text(column)).one()) == before
            assert conn.execute(text("SELECT record::text FROM works")).scalar() == record
    finally:
        engine.dispose()


def test_sqlite_records_are_packed_and_unpacked_by_a_downgrade(sqlite_engine: Engine) -> None:
    """0014 keeps text records as they are; its downgrade turns packed ones back into text."""
    from sqlalchemy import select, text

    from db.engine import read_session
    from db.models import Work
    from tests.factories import insert_works, work_row

    record = {"id": "W1", "title": "tab\there é 𝔘", "n": [1.5, None, True]}
    _migrate(sqlite_engine, "0013_record_text_on_postgresql", down=True)
    with sqlite_engine.begin() as conn:  # a record as the earlier revision wrote it
        conn.execute(text(
            "INSERT INTO works (id, record, record_hash, status, is_gold, imported_at, "
            "updated_at) VALUES ('W0', '{\"id\": \"W0\"}', 'h', 'machine_predicted_unvalidated', "
            "0, '2026-12-04 00:00:00', '2026-12-04 00:00:00')"))  # fmt: skip
    _migrate(sqlite_engine, "head")
    insert_works(sqlite_engine, [work_row("W1") | {"record": record}])
    stored = "SELECT id, typeof(record) FROM works ORDER BY id"
    with sqlite_engine.connect() as conn:
        assert conn.execute(text(stored)).all() == [("W0", "text"), ("W1", "blob")]
    _migrate(sqlite_engine, "0013_record_text_on_postgresql", down=True)
    with sqlite_engine.connect() as conn:
        assert conn.execute(text(stored)).all() == [("W0", "text"), ("W1", "text")]
        texts = conn.execute(text("SELECT record FROM works ORDER BY id")).scalars().all()
    assert texts == ['{"id": "W0"}', '{"id":"W1","title":"tab\\there é 𝔘","n":[1.5,null,true]}']
    _migrate(sqlite_engine, "head")
    with read_session(sqlite_engine) as session:
        read = {w: r for w, r in session.execute(select(Work.id, Work.record))}
    assert read == {"W0": {"id": "W0"}, "W1": record}


def test_the_score_indexes_go_and_come_back_with_a_downgrade(engine: Engine) -> None:
    """0015 drops the six score indexes (also when a killed bulk load left them missing)."""
    from sqlalchemy import inspect, text

    columns = ("score_gpt", "score_max", "score_opus", "score_spread", "teacher_disagreement",
               "threshold_uncertainty")  # fmt: skip
    scores = {f"ix_works_{c}" for c in columns}

    def works_indexes() -> set[str]:
        return {ix["name"] for ix in inspect(engine).get_indexes("works")}

    assert not works_indexes() & scores
    _migrate(engine, "0014_record_packed_on_sqlite", down=True)
    assert works_indexes() >= scores
    with engine.begin() as conn:  # as a bulk load killed before its rebuild leaves one
        conn.execute(text("DROP INDEX ix_works_score_max"))
    _migrate(engine, "head")
    assert not works_indexes() & scores


def test_a_downgrade_packs_the_records_again_without_the_dictionary(sqlite_engine: Engine) -> None:
    """0017's downgrade repacks byte-2 records as byte 1, which earlier revisions read."""
    import lz4.block
    from sqlalchemy import select, text

    from db.engine import read_session
    from db.models import Work
    from tests.factories import insert_works, work_row

    records = {f"W{i}": {"id": f"W{i}", "title": "é 𝔘" * i, "n": [i, None]} for i in range(3)}
    insert_works(sqlite_engine, [work_row(w) | {"record": r} for w, r in records.items()])
    packed = "SELECT id, substr(record, 1, 1), record FROM works ORDER BY id"
    with sqlite_engine.connect() as conn:
        assert {k for _, k, _ in conn.execute(text(packed))} == {b"\x02"}
    _migrate(sqlite_engine, "0016_export_index_validated_only", down=True)
    with sqlite_engine.connect() as conn:
        rows = conn.execute(text(packed)).all()
    assert {k for _, k, _ in rows} == {b"\x01"}
    # exactly as 0016's code read them: an LZ4 block on its own
    assert {w: orjson.loads(lz4.block.decompress(r[1:])) for w, _, r in rows} == records
    _migrate(sqlite_engine, "head")
    with read_session(sqlite_engine) as session:
        assert dict(session.execute(select(Work.id, Work.record)).all()) == records


def test_every_revision_id_fits_the_version_table() -> None:
    """alembic_version.version_num is varchar(32) on PostgreSQL: a longer id fails there."""
    from alembic.script import ScriptDirectory

    from db.engine import alembic_config

    ids = [
        s.revision
        for s in ScriptDirectory.from_config(alembic_config("sqlite://")).walk_revisions()
    ]
    assert len(ids) >= 17
    assert [i for i in ids if len(i) > 32] == []


def test_0020_keeps_every_prediction_and_label_both_ways(engine: Engine) -> None:
    """Rows of before 0020 keep their values (revision unknown: NULL); a downgrade keeps the
    revisions kept under one model version, the later ones renamed `<version>#<revision>`."""
    from datetime import UTC, datetime

    from sqlalchemy import text

    from tests.factories import insert_works, work_row

    when = datetime(2026, 12, 4, tzinfo=UTC)
    prediction, scores = {"model_version": "v1", "s": [0.25, 1e-7]}, {"score_opus": 0.5}
    _migrate(engine, "0019_verdict_history", down=True)
    insert_works(engine, [work_row("W1")])
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO predictions (work_id, model_version, prediction, machine_scores, "
                "imported_at) VALUES ('W1', 'v1', :p, :m, :t)"
            ),
            {"p": orjson.dumps(prediction).decode(), "m": orjson.dumps(scores).decode(), "t": when},
        )
        conn.execute(
            text(
                "INSERT INTO users (id, name, role, active, failed_logins, created_at) "
                "VALUES (1, 'ann', 'annotator', :y, 0, :t)"
            ),
            {"y": True, "t": when},
        )
        conn.execute(
            text(
                "INSERT INTO campaigns (id, name, strategy, is_probability_sample, overlap, blind, "
                "lease_seconds, rule, gold_rate, active, created_at) VALUES (1, 'c', 'score_max', "
                ":n, 1, :n, 900, 'unanimous', 0, :y, :t)"
            ),
            {"n": False, "y": True, "t": when},
        )
        conn.execute(text(
            "INSERT INTO labels (campaign_id, work_id, user_id, version, answers, skipped, "
            "flagged, source, created_at) VALUES (1, 'W1', 1, 1, '{\"q\": \"a\"}', :n, :n, "
            "'app', :t)"), {"n": False, "t": when})  # fmt: skip
    _migrate(engine, "head")
    old = "SELECT work_id, model_version, prediction, machine_scores FROM predictions ORDER BY id"
    with engine.begin() as conn:
        rows = [(w, v, _json(p), _json(m)) for w, v, p, m in conn.execute(text(old))]
        assert rows == [("W1", "v1", prediction, scores)]
        assert conn.execute(text("SELECT revision, record FROM predictions")).all() == [
            (None, None)]  # fmt: skip
        [(revision, answers)] = conn.execute(text("SELECT revision, answers FROM labels")).all()
        assert (revision, _json(answers)) == (None, {"q": "a"})
        for rev in ("a" * 64, "b" * 64):  # two contents replaced under v1 since
            conn.execute(text(
                "INSERT INTO predictions (work_id, model_version, revision, prediction, "
                "imported_at) VALUES ('W1', 'v1', :r, :p, :t)"),
                {"r": rev, "p": orjson.dumps({"rev": rev}).decode(), "t": when})  # fmt: skip
    _migrate(engine, "0019_verdict_history", down=True)
    with engine.connect() as conn:
        kept = [(v, _json(p)) for _, v, p, _ in conn.execute(text(old))]
        assert _json(conn.execute(text("SELECT answers FROM labels")).scalar()) == {"q": "a"}
    assert kept == [("v1", prediction), ("v1#aaaaaaaaaaaa", {"rev": "a" * 64}),
                    ("v1#bbbbbbbbbbbb", {"rev": "b" * 64})]  # fmt: skip
    _migrate(engine, "head")


def _json(value: Any) -> Any:
    """A JSON column read with text(): its text on SQLite, decoded by psycopg on PostgreSQL."""
    return orjson.loads(value) if isinstance(value, str) else value
