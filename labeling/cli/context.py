"""What every command receives: the settings with the CLI's overrides, an engine, the schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from labeling.settings import Settings, get_settings


class Context:
    """What every command needs: settings, an engine (migrated on demand), the schema."""

    def __init__(self, db_url: str | None, schema_path: str | None) -> None:
        settings = get_settings()
        updates: dict[str, Any] = {}
        if db_url:
            updates["db_url"] = db_url
        if schema_path:
            updates["schema_path"] = Path(schema_path)
        self.settings: Settings = settings.model_copy(update=updates) if updates else settings
        self._engine: Any = None

    @property
    def engine(self) -> Any:
        """The database engine, migrated to the latest revision on first use."""
        if self._engine is None:
            from labeling.database import init_db

            self._engine = init_db(self.settings.database_url, settings=self.settings)
        return self._engine

    def schema(self, path: str | None = None) -> Any:
        """The label schema; a malformed one raises SchemaError (an InputError: exit 2)."""
        from labeling.schema import load_schema

        return load_schema(path or self.settings.schema_path)


def echo_json(data: Any) -> None:
    """Print `data` as indented JSON (non-ASCII kept, NaN refused, other types as str)."""
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False, default=str))
