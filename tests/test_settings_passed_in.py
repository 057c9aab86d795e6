"""Settings reach the domain from the caller (the CLI's overrides, a page's), one engine route."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine

import labeling.database as database
from db.engine import make_engine, upgrade, write_session
from db.models import AbstractCache, utcnow
from labeling.cli.main import main
from labeling.settings import Settings, get_settings


def _cached(url: str, text: str) -> None:
    """A migrated database at `url` whose abstract cache holds W1 with `text`."""
    engine = make_engine(url)
    upgrade(engine)
    with write_session(engine) as session:
        session.add(AbstractCache(work_id="W1", state="ok", text=text, fetched_at=utcnow()))
    engine.dispose()


@pytest.fixture
def env_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The environment's database (LABELING_DB_URL), with OpenAlex online but unreachable."""
    url = f"sqlite:///{tmp_path / 'env.db'}"
    for name, value in {
        "DB_URL": url,
        "OPENALEX_OFFLINE": "false",
        "OPENALEX_RETRIES": "0",
        "OPENALEX_URL": "http://127.0.0.1:9",
        "OPENALEX_TIMEOUT": "1",
    }.items():
        monkeypatch.setenv(f"LABELING_{name}", value)
    get_settings.cache_clear()
    yield url
    get_settings.cache_clear()
    database.dispose_all()


def test_cli_db_override_reaches_the_abstract_cache(env_db: str, tmp_path: Path) -> None:
    """`--db` chooses whose cache `abstracts show` reads: the override's, not the env's."""
    other = f"sqlite:///{tmp_path / 'other.db'}"
    _cached(env_db, "From the environment's database.")
    _cached(other, "From the --db database.")
    runner = CliRunner()
    shown = runner.invoke(main, ["--db", other, "abstracts", "show", "W1"])
    assert shown.exit_code == 0, shown.output
    assert "From the --db database." in shown.output
    assert "environment" not in shown.output
    default = runner.invoke(main, ["abstracts", "show", "W1"])
    assert default.exit_code == 0 and "From the environment's database." in default.output


def test_the_flow_uses_the_settings_it_is_given(env_db: str) -> None:
    """Offline settings passed in win over the environment's (online) ones: nothing fetched."""
    from labeling.review import flow

    engine = database.init_db(env_db)
    state = flow.abstract_of(engine, "W2", settings=Settings(openalex_offline=True))
    assert state.state == "offline"
    online = flow.abstract_of(engine, "W2", settings=get_settings())
    assert online.state == "error"  # the environment's URL was tried (and is unreachable)


def test_pages_and_cli_share_one_engine_migrated_once(
    env_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """migrated_engine (the pages' route) is get_engine's engine; it migrates once per URL."""
    runs: list[Engine] = []
    real = database.upgrade
    monkeypatch.setattr(database, "upgrade", lambda engine: (runs.append(engine), real(engine)))
    first = database.migrated_engine(get_settings())
    again = database.migrated_engine(get_settings())
    assert first is again is database.get_engine(env_db)
    assert runs == [first]
    database.dispose_all()  # a new start migrates again
    assert database.migrated_engine(get_settings()) is not first and len(runs) == 2
