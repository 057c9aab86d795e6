"""campaign assist arms: the share of (work, annotator) assignments shown the teachers' scores

Revision ID: 0008_campaign_assist_arms
Revises: 0007_login_session_tokens
Create Date: 2026-12-03 09:00:00

A campaign may randomise, per (work, annotator), whether the teachers' scores are shown
before the label is submitted (labeling/review/assist.py). `assist_rate` is that share
(NULL: the campaign's `blind` flag decides, as before: blind 0, otherwise 1) and
`assist_seed` seeds the draw, so every assignment is reproducible; each label records the
arm it was given in `labels.scores_visible`.
"""

import sqlalchemy as sa
from alembic import op

revision = "0008_campaign_assist_arms"
down_revision = "0007_login_session_tokens"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.add_column(sa.Column("assist_rate", sa.Float(), nullable=True))
        batch.add_column(sa.Column("assist_seed", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.drop_column("assist_seed")
        batch.drop_column("assist_rate")
