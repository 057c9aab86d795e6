"""An annotator's progress in a campaign: their own counts and the campaign's, never stale."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from sqlalchemy import Engine, func, select

from db.engine import read_session
from db.models import CampaignItem, Label
from labeling.review.labels import latest_versions

# Campaign counts scan the campaign's queue; they change only when a label is written, so they
# are reused until the newest label id moves (one index lookup), never for a fixed time.
_counts: dict[tuple[str, int], tuple[int | None, tuple[int, int]]] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class Progress:
    """The annotator's own counts and the campaign's (never anyone else's labels)."""

    mine_labelled: int
    mine_skipped: int
    items: int
    done: int

    @property
    def remaining(self) -> int:
        """Works of the campaign that still need labels."""
        return max(0, self.items - self.done)

    @property
    def fraction(self) -> float:
        """Share of the campaign's works that have all their labels."""
        return self.done / self.items if self.items else 0.0


def campaign_counts(engine: Engine, campaign_id: int) -> tuple[int, int]:
    """(works in the campaign, works with all their labels), exact as of the newest label."""
    key = (engine.url.render_as_string(), campaign_id)
    with read_session(engine) as session:
        mark = session.execute(select(func.max(Label.id))).scalar_one()
        with _lock:
            hit = _counts.get(key)
        if hit is not None and hit[0] == mark:
            return hit[1]
        items, done = session.execute(
            select(func.count(), func.count().filter(CampaignItem.done)).where(
                CampaignItem.campaign_id == campaign_id
            )
        ).one()
    with _lock:
        _counts[key] = (mark, (int(items), int(done)))
    return int(items), int(done)


def forget_progress() -> None:
    """Drop reused campaign counts (tests that rebuild a database under the same URL)."""
    with _lock:
        _counts.clear()


def my_progress(engine: Engine, campaign_id: int, user_id: int) -> Progress:
    """The user's labelled and skipped works (latest versions) and the campaign's counts."""
    latest = latest_versions(campaign_id, user_id)
    with read_session(engine) as session:
        rows = session.execute(
            select(Label.skipped, func.count())
            .join(latest, (Label.work_id == latest.c.work_id) & (Label.version == latest.c.v))
            .where(Label.campaign_id == campaign_id, Label.user_id == user_id)
            .group_by(Label.skipped)
        ).all()
    mine = {bool(skipped): n for skipped, n in rows}
    items, done = campaign_counts(engine, campaign_id)
    return Progress(mine.get(False, 0), mine.get(True, 0), items, done)
