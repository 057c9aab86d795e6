"""The statements a work's status change runs: its current answers, the work locked, the update."""

from __future__ import annotations

from sqlalchemy import JSON, bindparam, select, update

from db.models import Label, UTCDateTime, Work

_ANSWERS = (
    select(Label.user_id, Label.version, Label.skipped, Label.answers)
    .where(Label.campaign_id == bindparam("cid"), Label.work_id == bindparam("wid"))
    .order_by(Label.user_id, Label.version)
)
_LOCK_WORK = (
    select(Work.status, Work.validated_via, Work.final_answers, Work.is_gold)
    .where(Work.id == bindparam("wid"))
    .with_for_update()
)
_SET_STATUS = (
    update(Work)
    .where(Work.id == bindparam("wid"))
    .values(
        status=bindparam("st"),
        final_answers=bindparam("fa", type_=JSON(none_as_null=True)),
        validated_via=bindparam("via"),
        is_gold=bindparam("gold"),
        updated_at=bindparam("ts", type_=UTCDateTime()),
    )
)
