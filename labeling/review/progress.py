"""An annotator's progress in a campaign: their own counts and the campaign's, never stale."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from sqlalchemy import Engine, func, select

from db.engine import read_session
from db.models import Campaign, CampaignItem, Label
from labeling.review.labels import latest_versions


@dataclass(frozen=True)
class Progress:
    """The annotator's own counts and the campaign's (never anyone else's labels)."""

    mine_labelled: int
    mine_skipped: int
    items: int
    done: int
    started: int = 0  # works with a label or more, not yet all they need
    overlap: int = 1  # labels each work needs (the campaign's k)

    @property
    def remaining(self) -> int:
        """Works of the campaign that still need labels."""
        return max(0, self.items - self.done)

    @property
    def fraction(self) -> float:
        """Share of the campaign's works that have all their labels."""
        return self.done / self.items if self.items else 0.0

    @property
    def started_fraction(self) -> float:
        """Share of the campaign's works with some but not all of their labels."""
        return self.started / self.items if self.items else 0.0

    def line(self, campaign: str) -> str:
        """The progress line: the annotator's labels, then works complete and started.

        A work is complete once it has all k labels, so in a campaign with k = 2 an
        annotator's first labels complete nothing yet; they show as works started.
        """
        mine = f"your labels: {self.mine_labelled}"
        if self.mine_skipped:
            mine += f" (and {self.mine_skipped} skipped)"
        needs = f" (each needs {self.overlap} labels)" if self.overlap > 1 else ""
        return (
            f"{campaign} · {mine} · works complete: {self.done} of {self.items}{needs} · "
            f"started: {self.started}"
        )


@dataclass(frozen=True)
class CampaignCounts:
    """A campaign's works: in the queue, complete (all k labels), started (some), and k."""

    items: int
    done: int
    started: int
    overlap: int


# Campaign counts scan the campaign's queue; they change only when a label is written, so they
# are reused until the newest label id moves (one index lookup), never for a fixed time.
_counts: dict[tuple[str, int], tuple[int | None, CampaignCounts]] = {}
_lock = threading.Lock()


def campaign_counts(engine: Engine, campaign_id: int) -> CampaignCounts:
    """The campaign's works by how far their labels are, exact as of the newest label."""
    key = (engine.url.render_as_string(), campaign_id)
    with read_session(engine) as session:
        mark = session.execute(select(func.max(Label.id))).scalar_one()
        with _lock:
            hit = _counts.get(key)
        if hit is not None and hit[0] == mark:
            return hit[1]
        items, done, started = session.execute(
            select(
                func.count(),
                func.count().filter(CampaignItem.done),
                func.count().filter(CampaignItem.n_labels > 0, ~CampaignItem.done),
            ).where(CampaignItem.campaign_id == campaign_id)
        ).one()
        overlap = session.execute(
            select(Campaign.overlap).where(Campaign.id == campaign_id)
        ).scalar_one_or_none()
    counts = CampaignCounts(int(items), int(done), int(started), int(overlap or 1))
    with _lock:
        _counts[key] = (mark, counts)
    return counts


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
    c = campaign_counts(engine, campaign_id)
    return Progress(mine.get(False, 0), mine.get(True, 0), c.items, c.done, c.started, c.overlap)
