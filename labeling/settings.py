"""The one settings object of the tool, read from `LABELING_*` environment variables."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, field_validator
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
        default=20_000,
        ge=1,
        description=(
            "Records per transaction when importing a frame (handed to the writer 5,000 at a"
            " time whatever this is, so memory does not grow with it; up to 50,000, a SQLite"
            " import's rows are staged in temporary files and a transaction's lines, about"
            " 500 bytes each, are held whole)."
        ),
    )
    export_processes: int | None = Field(
        default=None,
        ge=1,
        description=(
            "Worker processes that build a large gold-set export (unset: 2, or 1 on a one-core"
            " machine; 1: none, less memory and slower)."
        ),
    )
    sso_provider: str = Field(
        default="",
        description=(
            "Single sign-on: name of the [auth.<name>] block of .streamlit/secrets.toml to sign "
            "in with (st.login), or 'default' for a bare [auth] block. Empty: SSO is off."
        ),
    )
    sso_label: str = Field(
        default="",
        description="Name on the sign-in button ('Sign in with <label>'); default: the provider.",
    )
    sso_assume_email_verified: bool = Field(
        default=False,
        description=(
            "Treat an e-mail without an email_verified claim as verified (Microsoft Entra ID "
            "sends none). email_verified=false is always refused."
        ),
    )
    local_login_roles: str = Field(
        default="annotator,lead,exporter,admin",
        description=(
            "Comma-separated roles that may sign in with a local password; e.g. 'admin' keeps "
            "a break-glass admin while everyone else uses single sign-on."
        ),
    )

    @field_validator("sso_provider")
    @classmethod
    def _provider_name(cls, value: str) -> str:
        """Streamlit refuses provider names with underscores; say so at start-up."""
        value = value.strip()
        if "_" in value:
            raise ValueError("LABELING_SSO_PROVIDER cannot contain '_' (Streamlit forbids it)")
        return value

    @field_validator("local_login_roles")
    @classmethod
    def _known_roles(cls, value: str) -> str:
        """Refuse a role name that does not exist, so a typo is not silently ignored."""
        from labeling.vocabulary import ROLES

        unknown = [r.strip() for r in value.split(",") if r.strip() and r.strip() not in ROLES]
        if unknown:
            raise ValueError(f"unknown role(s) in LABELING_LOCAL_LOGIN_ROLES: {unknown}")
        return value

    @property
    def sso_enabled(self) -> bool:
        """Whether single sign-on is configured."""
        return bool(self.sso_provider)

    @property
    def sso_button_label(self) -> str:
        """The provider's name as users read it on the sign-in button."""
        return self.sso_label.strip() or self.sso_provider.capitalize()

    @property
    def local_login_role_set(self) -> frozenset[str]:
        """The roles of local_login_roles, as a set."""
        return frozenset(r.strip() for r in self.local_login_roles.split(",") if r.strip())

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
