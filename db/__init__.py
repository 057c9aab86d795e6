"""Storage: SQLAlchemy models, the engine factory and Alembic migrations."""
