"""frame revisions: every content a work's record had is kept; labels name the one they saw

Revision ID: 0020_frame_revisions
Revises: 0019_verdict_history
Create Date: 2026-12-08 10:00:00

A re-import that changes a work's content under the same `model_version` used to overwrite
the record annotators were shown. Now the replaced content is kept in `predictions` every
time, keyed by (work, model version, revision), the revision being the replaced record's
`record_hash`, with the whole record (`record`, packed as `works.record` is). Each label
stores the `record_hash` of its work when it was stored (`labels.revision`).

Rows of before this revision keep NULL in both (their revision is unknown: the line they
were copied from was not kept), so every stored value stays as it was. The downgrade drops
the new columns and brings back the unique (work, model version): of the rows that share
one, the first keeps its model version and the later ones are renamed
`<model version>#<first 12 hex digits of the revision>`, so that none is lost.
"""

import sqlalchemy as sa
from alembic import op

from db.types import JSONText

revision = "0020_frame_revisions"
down_revision = "0019_verdict_history"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("predictions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("revision", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("record", JSONText(), nullable=True))
        batch_op.drop_constraint("uq_predictions_work_id_model_version", type_="unique")
        batch_op.create_unique_constraint(
            "uq_predictions_work_id_model_version_revision",
            ["work_id", "model_version", "revision"],
        )
    op.add_column("labels", sa.Column("revision", sa.String(length=64), nullable=True))


def downgrade() -> None:
    # Only rows written at this revision can share a (work, model version): rename the later.
    op.execute(
        "UPDATE predictions SET model_version = "
        "substr(model_version, 1, 115) || '#' || substr(revision, 1, 12) "
        "WHERE revision IS NOT NULL AND id > (SELECT min(p.id) FROM predictions p "
        "WHERE p.work_id = predictions.work_id AND p.model_version = predictions.model_version)"
    )
    with op.batch_alter_table("labels", schema=None) as batch_op:
        batch_op.drop_column("revision")
    with op.batch_alter_table("predictions", schema=None) as batch_op:
        batch_op.drop_constraint("uq_predictions_work_id_model_version_revision", type_="unique")
        batch_op.drop_column("record")
        batch_op.drop_column("revision")
        batch_op.create_unique_constraint(
            "uq_predictions_work_id_model_version", ["work_id", "model_version"]
        )
