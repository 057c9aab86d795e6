"""The one settings object of the tool, read from `LABELING_*` environment variables."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

PACKAGE_DIR = Path(__file__).resolve().parent
DEFAULT_SCHEMA = PACKAGE_DIR / "data" / "schema.toml"


class Settings(BaseSettings):
    """Every setting of the tool; each field maps to `LABELING_<NAME>`."""

    model_config = SettingsConfigDict(env_prefix="LABELING_", extra="ignore")

    data_dir: Path = Field(
        default=Path("data"),
        description="Directory for the embedded SQLite database and other local files.",
    )
    db_url: str | None = Field(
        default=None,
        description=(
            "SQLAlchemy URL of the database. Default: sqlite:///<data_dir>/labeling.db. "
            "PostgreSQL: postgresql+psycopg://user:pass@host:5432/dbname."
        ),
    )
    schema_path: Path = Field(
        default=DEFAULT_SCHEMA,
        validation_alias="LABELING_SCHEMA",
        description="Path of the label schema TOML file (questions, labels, definitions).",
    )
    sqlite_busy_timeout_ms: int = Field(
        default=30_000, description="How long a SQLite writer waits for a lock before failing."
    )
    openalex_url: str = Field(
        default="https://api.openalex.org", description="Base URL of the OpenAlex API."
    )
    openalex_api_key: str | None = Field(
        default=None, description="OpenAlex API key (required by OpenAlex since 2026)."
    )
    openalex_mailto: str | None = Field(
        default=None, description="Contact e-mail sent to OpenAlex with each request."
    )
    openalex_timeout: float = Field(
        default=10.0, description="Seconds before an OpenAlex request times out."
    )
    openalex_retries: int = Field(
        default=3, description="Retries on 429/5xx/network errors, with exponential backoff."
    )
    openalex_offline: bool = Field(
        default=False,
        description="Never call OpenAlex; show cached abstracts only (the demo sets this).",
    )
    session_idle_minutes: int = Field(
        default=120, description="A login session expires after this many idle minutes."
    )
    import_batch_size: int = Field(
        default=5_000, description="Records per transaction when importing a frame."
    )

    @property
    def database_url(self) -> str:
        """The effective database URL (the SQLite default lives in data_dir)."""
        if self.db_url:
            return self.db_url
        return f"sqlite:///{(self.data_dir / 'labeling.db').resolve()}"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Settings from the environment, read once per process."""
    return Settings()
