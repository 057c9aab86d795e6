"""login session tokens: one token per browser tab, grouped by login, with role and rotation

Revision ID: 0007_login_session_tokens
Revises: 0006_import_run_outcome
Create Date: 2026-12-04 10:00:00

A local sign-in now survives a reload: its token is kept in a cookie, and a reload resumes
with a fresh token of the same login (labeling/auth/login_sessions.py). The table is rebuilt
rather than altered: its rows before this revision are useless anyway, as their tokens lived
only in the memory of the server being upgraded (a restart signs everyone out), and a rebuild
is the same on SQLite and PostgreSQL.
"""

import sqlalchemy as sa
from alembic import op

revision = "0007_login_session_tokens"
down_revision = "0006_import_run_outcome"
branch_labels = None
depends_on = None


def _common() -> list:
    """The columns and constraints both versions of the table share."""
    return [
        sa.Column("token", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_auth_sessions_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("token", name=op.f("pk_auth_sessions")),
    ]


def upgrade() -> None:
    op.drop_table("auth_sessions")
    op.create_table(
        "auth_sessions",
        *_common(),
        sa.Column("login", sa.String(length=64), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("superseded_at", sa.DateTime(timezone=True), nullable=True),
    )
    with op.batch_alter_table("auth_sessions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_auth_sessions_login"), ["login"], unique=False)
        batch_op.create_index(batch_op.f("ix_auth_sessions_user_id"), ["user_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("auth_sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_auth_sessions_user_id"))
        batch_op.drop_index(batch_op.f("ix_auth_sessions_login"))
    op.drop_table("auth_sessions")
    op.create_table("auth_sessions", *_common())
