"""The demo database: a real sample frame, cached abstracts, users and campaigns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Required, TypedDict

from sqlalchemy import Engine, select
from sqlalchemy.engine import make_url

from db.engine import read_session, write_session
from db.models import AbstractCache, Campaign, utcnow
from db.sqlite_files import SIDE_SUFFIXES
from labeling.frames.importer import import_frame
from labeling.schema import Schema
from labeling.settings import PACKAGE_DIR

DEMO_FRAME = PACKAGE_DIR / "data" / "demo_frame.jsonl.gz"
DEMO_ABSTRACTS = PACKAGE_DIR / "data" / "demo_abstracts.json"
DEMO_PASSWORD = "demo"
DEMO_USERS = (
    ("annotator", "annotator"),
    ("annotator2", "annotator"),
    ("lead", "lead"),
    ("exporter", "exporter"),
    ("admin", "admin"),
)


def reset_sqlite(url: str) -> None:
    """Delete a SQLite database file and its journal files (refuses other engines)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        raise ValueError("--reset only deletes SQLite files; drop a PostgreSQL database yourself")
    for suffix in ("", *SIDE_SUFFIXES):
        Path(parsed.database + suffix).unlink(missing_ok=True)


def seed_abstract_cache(engine: Engine, abstracts: dict[str, str | None]) -> int:
    """Store known abstracts (or their absence) so the demo never needs the network."""
    with write_session(engine) as session:
        have = set(session.scalars(select(AbstractCache.work_id)))
        now = utcnow()
        added = 0
        for work_id, text in abstracts.items():
            if work_id in have:
                continue
            session.add(
                AbstractCache(
                    work_id=work_id,
                    state="ok" if text else "absent",
                    text=text or None,
                    fetched_at=now,
                )  # fmt: skip
            )
            added += 1
    return added


class _DemoCampaign(TypedDict, total=False):
    """The create_campaign arguments a demo campaign sets (name is always given)."""

    name: Required[str]
    strategy: str
    overlap: int
    blind: bool
    sample_size: int
    seed: int


def build_demo(engine: Engine, schema: Schema) -> str:
    """Import the bundled frame, cache its abstracts, add demo users and campaigns."""
    from labeling.auth.users import add_user, get_user
    from labeling.review.campaigns import create_campaign

    summary = import_frame(engine, DEMO_FRAME, schema, progress=False)
    abstracts = json.loads(DEMO_ABSTRACTS.read_text(encoding="utf-8"))
    cached = seed_abstract_cache(engine, abstracts)
    for name, role in DEMO_USERS:
        if get_user(engine, name) is None:
            add_user(engine, name, role, DEMO_PASSWORD)
    lead = get_user(engine, "lead")
    with read_session(engine) as session:
        existing = set(session.scalars(select(Campaign.name)))
    campaigns: list[_DemoCampaign] = [
        {"name": "demo-top", "strategy": "score_max", "overlap": 2},
        {"name": "demo-blind", "strategy": "teacher_disagreement", "overlap": 1, "blind": True},
        {"name": "demo-sample", "strategy": "stratified", "sample_size": 40, "overlap": 2,
         "seed": 7},
    ]  # fmt: skip
    made = 0
    for spec in campaigns:
        if spec["name"] not in existing:
            create_campaign(engine, created_by=lead.id if lead else None, **spec)
            made += 1
    return (
        f"demo frame: {summary.inserted} inserted, {summary.unchanged} unchanged, "
        f"{summary.warnings} warnings; {cached} abstracts cached; {made} campaigns created"
    )
