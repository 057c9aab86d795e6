"""The Monitor's numbers that a new label alone cannot change, kept while their inputs stay equal.

Humans vs machines, the frame estimates and the sample-size plan are functions of the
campaign's validated works (their ids, final answers and records), the campaign's drawn items
and design, and the schema: nothing else. Most labels change none of these (a first label of a
work, a skip, a label that leaves a work disputed), so the page does not have to recompute
them after every label. They are kept per process under a digest of exactly those inputs,
read afresh on every view: any change of a final answer, a status to or from validated, a
record (re-import changes its hash), the queue's drawn items or the campaign's design gives a
new key and a recomputation. A key on the newest status event would miss final answers that
change while the status stays (a third label on a validated work writes no event).
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from labeling.reports.evaluation import Validated, drawn_items, frame_estimates, machine_report
from labeling.reports.monitor.clock import Clock
from labeling.reports.monitor.design import plan_line
from labeling.review.campaigns import CampaignInfo
from labeling.schema import Schema

CACHE_SIZE = 8  # campaigns (or states of one) kept per process


@dataclass(frozen=True)
class StatusParts:
    """Humans vs machines (machine_report), frame estimates and the plan's sentence."""

    machines: dict[str, Any]
    estimates: dict[str, Any]
    plan: str


class _Cache:
    """The last CACHE_SIZE StatusParts by input digest, shared by the page's threads."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        """An empty cache of at most `size` entries."""
        self.size = size
        self._parts: OrderedDict[str, StatusParts] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> StatusParts | None:
        """The parts under key, or None (counted as a hit or a miss)."""
        with self._lock:
            found = self._parts.get(key)
            if found is None:
                self.misses += 1
            else:
                self.hits += 1
                self._parts.move_to_end(key)
            return found

    def put(self, key: str, parts: StatusParts) -> None:
        """Keep parts under key, dropping the oldest entry beyond the size."""
        with self._lock:
            self._parts[key] = parts
            while len(self._parts) > self.size:
                self._parts.popitem(last=False)

    def clear(self) -> None:
        """Forget everything (the bench's uncached figure, tests)."""
        with self._lock:
            self._parts.clear()
            self.hits = self.misses = 0


CACHE = _Cache()


def inputs_key(
    schema: Schema, campaign: CampaignInfo, validated: Validated, drawn: list[Any]
) -> str | None:
    """A digest of everything the status parts read, or None when the records' hashes are
    unknown (a Validated built by hand: its records could change unseen, nothing is kept)."""
    if len(validated.hashes) != len(validated.ids):
        return None
    # The queue counts change with every label and are not read by these parts.
    design = dataclasses.replace(campaign, n_items=0, n_done=0)
    digest = hashlib.blake2b(digest_size=20)
    for part in (
        schema.hash,
        repr(design),
        "\x1f".join(validated.ids),
        "\x1f".join(validated.hashes),
        "\x1f".join(t if t is not None else "\x00" for t in validated.texts),
        "\x1f".join(f"{w}\x1e{s}" for w, s in drawn),
    ):
        digest.update(part.encode())
        digest.update(b"\x1d")
    return digest.hexdigest()


def status_parts(
    engine: Engine,
    schema: Schema,
    campaign: CampaignInfo,
    validated: Validated,
    timings: dict[str, float] | None = None,
) -> StatusParts:
    """Humans vs machines, frame estimates and the plan, reused while their inputs are equal.

    Args:
        engine: the database.
        schema: the label schema.
        campaign: the campaign.
        validated: validated_works of the campaign, read for this view.
        timings: filled with the seconds of each step when given (bench/monitor.py).
    """
    clock = Clock(timings)
    drawn = clock("status key", drawn_items, engine, campaign.id)
    key = clock("status key", inputs_key, schema, campaign, validated, drawn)
    found = CACHE.get(key) if key is not None else None
    if found is not None:
        return found
    machines = clock(
        "humans vs machines", machine_report, engine, schema, campaign, validated=validated
    )
    estimates = clock(
        "estimates",
        frame_estimates,
        engine,
        schema,
        campaign,
        validated=validated,
        drawn=drawn,
    )
    plan = clock("plan", plan_line, engine, schema, campaign, validated, drawn)
    parts = StatusParts(machines, estimates, plan)
    if key is not None:
        CACHE.put(key, parts)
    return parts
