"""labels campaign time index: the Monitor's live counts read an index, not the label rows

Revision ID: 0009_labels_campaign_time
Revises: 0008_campaign_assist_arms
Create Date: 2026-12-03 09:40:00

The live top of the Monitor counts a campaign's first submissions per minute, hour or day and
over the rate's window (labeling/reports/monitor/data.py: label_span, activity). Without this
index both read every label row of the campaign, answers included; with it they scan the
index alone.
"""

from alembic import op

revision = "0009_labels_campaign_time"
down_revision = "0008_campaign_assist_arms"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("labels", schema=None) as batch_op:
        batch_op.create_index(
            "ix_labels_campaign_time",
            ["campaign_id", "version", "created_at", "skipped"],
            unique=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("labels", schema=None) as batch_op:
        batch_op.drop_index("ix_labels_campaign_time")
