"""Shared fixtures: migrated SQLite and PostgreSQL databases, records, small factories."""

from __future__ import annotations

import copy
import json
import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from db.engine import make_engine, upgrade
from labeling.schema import Schema, load_schema
from labeling.settings import DEFAULT_SCHEMA

FIXTURES = Path(__file__).parent / "fixtures"
PG_URL = os.environ.get("LABELING_TEST_PG_URL")


def examples(n: int) -> int:
    """Hypothesis examples for a property test: n, times LABELING_TEST_EXAMPLES (default 1).

    The default keeps the whole suite inside its time budget; a deeper search is one variable
    away (LABELING_TEST_EXAMPLES=10 ./scripts/test.sh -k props).
    """
    return max(1, round(n * float(os.environ.get("LABELING_TEST_EXAMPLES", "1"))))


@pytest.fixture(autouse=True)
def _restore_main_module() -> Iterator[None]:
    """Put back sys.modules["__main__"] after each test.

    Streamlit's script runner (AppTest) installs the page it ran as __main__; a later test
    that starts "spawn" processes would make every child re-run that page script.
    """
    main = sys.modules.get("__main__")
    yield
    if main is not None:
        sys.modules["__main__"] = main


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file that each test copies (migrating once is the slow part)."""
    path = tmp_path_factory.mktemp("tmpl") / "template.db"
    engine = make_engine(f"sqlite:///{path}")
    upgrade(engine)
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    engine.dispose()
    return path


@pytest.fixture
def sqlite_url(sqlite_template: Path, tmp_path: Path) -> str:
    """URL of a fresh, migrated SQLite database in tmp_path."""
    path = tmp_path / "labeling.db"
    shutil.copyfile(sqlite_template, path)
    return f"sqlite:///{path}"


def _pg_admin_engine() -> Engine:
    url = make_url(PG_URL).set(database="postgres")
    return create_engine(url, isolation_level="AUTOCOMMIT")


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    """Name of a migrated PostgreSQL template database, created once per test session."""
    if not PG_URL:
        pytest.skip("PostgreSQL tests need LABELING_TEST_PG_URL (e.g. postgresql+psycopg://...)")
    base = make_url(PG_URL)
    # One template per xdist worker: workers start together and would drop each other's.
    name = f"{base.database}_tmpl{os.environ.get('PYTEST_XDIST_WORKER', '')}"
    admin = _pg_admin_engine()
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    engine = make_engine(base.set(database=name).render_as_string(hide_password=False))
    upgrade(engine)
    engine.dispose()
    yield name
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def pg_url(pg_template: str) -> Iterator[str]:
    """URL of a fresh, migrated PostgreSQL database cloned from the template."""
    base = make_url(PG_URL)
    name = f"{base.database}_{uuid.uuid4().hex[:10]}"
    admin = _pg_admin_engine()
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"'))
    yield base.set(database=name).render_as_string(hide_password=False)
    from labeling.database import dispose_all

    dispose_all()
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("pg", marks=pytest.mark.pg)])
def db_url(request: pytest.FixtureRequest) -> str:
    """A fresh migrated database URL, once on SQLite and once on PostgreSQL."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_url")
    return request.getfixturevalue("pg_url")


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    """An engine on a fresh migrated database (both engines)."""
    eng = make_engine(db_url)
    yield eng
    eng.dispose()


@pytest.fixture
def sqlite_engine(sqlite_url: str) -> Iterator[Engine]:
    """An engine on a fresh migrated SQLite database only."""
    eng = make_engine(sqlite_url)
    yield eng
    eng.dispose()


@pytest.fixture(scope="session")
def schema() -> Schema:
    """The default schema shipped with the tool."""
    return load_schema(DEFAULT_SCHEMA)


@pytest.fixture(scope="session")
def seed_record() -> dict[str, Any]:
    """The seed record of the brief, exactly as delivered."""
    return json.loads((FIXTURES / "seed_record.json").read_text(encoding="utf-8"))


def make_record(seed: dict[str, Any], work_id: str, **changes: Any) -> dict[str, Any]:
    """A copy of the seed record with a new id and top-level or dotted-path changes."""
    rec = copy.deepcopy(seed)
    rec["id"] = work_id
    for key, value in changes.items():
        node = rec
        parts = key.split("__")
        for part in parts[:-1]:
            node = node[part]
        node[parts[-1]] = value
    return rec


def write_jsonl(path: Path, records: list[Any]) -> Path:
    """Write records (dicts or raw strings) as JSON Lines."""
    with path.open("w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(rec if isinstance(rec, str) else json.dumps(rec))
            fh.write("\n")
    return path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser journeys and the benches' own runs count as slow.

    `./scripts/test.sh -m "not slow"` is the developer's quick loop (README): a Chromium test
    starts a server and a browser, and a bench test a whole subprocess, so each costs seconds
    even when it passes quickly. CI runs everything.
    """
    for item in items:
        if item.get_closest_marker("e2e") or "tests/bench/" in item.nodeid:
            item.add_marker(pytest.mark.slow)
