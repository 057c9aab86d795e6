"""The process's engines, one per URL, migrated on first use."""

from __future__ import annotations

import threading

from sqlalchemy import Engine

from db.engine import make_engine, upgrade
from db.indexes import ensure_work_indexes
from labeling.settings import Settings, get_settings

_engines: dict[str, Engine] = {}
_migrated: set[str] = set()
_lock = threading.Lock()
_migrating = threading.Lock()


def get_engine(url: str | None = None, *, settings: Settings | None = None) -> Engine:
    """The shared engine for `url` (default: the settings' URL), created on first use."""
    settings = settings or get_settings()
    url = url or settings.database_url
    with _lock:
        engine = _engines.get(url)
        if engine is None:
            engine = make_engine(url, busy_timeout_ms=settings.sqlite_busy_timeout_ms)
            _engines[url] = engine
        return engine


def init_db(url: str | None = None, *, settings: Settings | None = None) -> Engine:
    """Apply all migrations and return the engine (safe to call on every start)."""
    engine = get_engine(url, settings=settings)
    upgrade(engine)
    ensure_work_indexes(engine)
    return engine


def migrated_engine(settings: Settings) -> Engine:
    """The shared engine of the settings' database, migrated once per process (the pages).

    The first call per URL runs init_db; later ones only look the engine up, so a page run
    costs no migration check.
    """
    url = settings.database_url
    with _migrating:
        if url not in _migrated:
            init_db(url, settings=settings)
            _migrated.add(url)
    return get_engine(url, settings=settings)


def dispose_all() -> None:
    """Close every pooled connection (tests and forked workers); the next use migrates again."""
    with _migrating, _lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()
        _migrated.clear()
