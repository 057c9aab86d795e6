"""verdict history: status events record what they changed; other campaigns' verdicts

Revision ID: 0019_verdict_history
Revises: 0018_record_packed_on_postgresql
Create Date: 2026-12-07 23:55:00

A validated answer changes only by an explicit, recorded act (README, "Ground truth"): every
status event now says which act it was and the validated answers, `validated_via` and gold
mark before and after, even when the status stays `human_validated`. Events written before
this revision keep NULL there (what they changed was not recorded); those whose reason says
they were an adjudication or a reopen get that act.

`campaign_verdicts` holds another campaign's verdict on a work that was already validated:
`corroborated` (it agrees) or `disputed` (it differs on a question; open until a lead
adjudicates or reopens the work, `settled_at`). The work keeps its validated answers meanwhile.
"""

import sqlalchemy as sa
from alembic import op

revision = "0019_verdict_history"
down_revision = "0018_record_packed_on_postgresql"
branch_labels = None
depends_on = None

ACTS = ("rule", "adjudication", "reopen", "model", "gold", "corroboration", "cross_dispute")


def _in(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)


def upgrade() -> None:
    with op.batch_alter_table("status_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("act", sa.String(length=24), nullable=True))
        batch_op.add_column(sa.Column("answers_before", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("answers_after", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("via_before", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("via_after", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("gold_before", sa.Boolean(), nullable=True))
        batch_op.add_column(sa.Column("gold_after", sa.Boolean(), nullable=True))
        batch_op.create_check_constraint("act", f"act IS NULL OR act IN ({_in(ACTS)})")
    op.execute("UPDATE status_events SET act = 'adjudication' WHERE reason LIKE 'adjudicated by %'")
    op.execute("UPDATE status_events SET act = 'reopen' WHERE reason LIKE 'reopened by %'")
    op.create_table(
        "campaign_verdicts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("work_id", sa.String(length=32), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("answers", sa.JSON(), nullable=False),
        sa.Column("differing", sa.JSON(), nullable=True),
        sa.Column("against", sa.JSON(), nullable=True),
        sa.Column("against_via", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("settled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("settled_by", sa.Integer(), nullable=True),
        sa.CheckConstraint(
            "outcome IN ('corroborated', 'disputed')", name=op.f("ck_campaign_verdicts_outcome")
        ),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_campaign_verdicts_campaign_id_campaigns"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["settled_by"], ["users.id"], name=op.f("fk_campaign_verdicts_settled_by_users")
        ),
        sa.ForeignKeyConstraint(
            ["work_id"],
            ["works.id"],
            name=op.f("fk_campaign_verdicts_work_id_works"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_campaign_verdicts")),
        sa.UniqueConstraint(
            "work_id", "campaign_id", name=op.f("uq_campaign_verdicts_work_id_campaign_id")
        ),
    )
    op.create_index(
        op.f("ix_campaign_verdicts_work_id"), "campaign_verdicts", ["work_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_campaign_verdicts_work_id"), table_name="campaign_verdicts")
    op.drop_table("campaign_verdicts")
    with op.batch_alter_table("status_events", schema=None) as batch_op:
        batch_op.drop_constraint("act", type_="check")
        for column in ("gold_after", "gold_before", "via_after", "via_before", "answers_after",
                       "answers_before", "act"):  # fmt: skip
            batch_op.drop_column(column)
