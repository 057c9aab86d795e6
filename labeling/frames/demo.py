"""The demo database: a real sample frame, cached abstracts, users and campaigns."""

from __future__ import annotations

import gzip
import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Required, TypedDict

from sqlalchemy import Engine, select
from sqlalchemy.engine import make_url

from db.engine import read_session, write_session
from db.models import AbstractCache, Campaign, utcnow
from db.sqlite_files import SIDE_SUFFIXES, is_sqlite_path
from labeling.errors import InputError
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


DEMO_CAMPAIGNS = ("demo-top", "demo-blind", "demo-sample")
_SQLITE_HEADER = b"SQLite format 3\x00"
# The tables every revision of this tool's database has: without them it is someone else's.
_TOOL_TABLES = ("alembic_version", "users", "works", "campaigns", "labels", "import_runs")
_SHOWN = 5  # names listed in a refusal before "..."
_LABELS = ("label", "labels")


class DemoResetRefused(InputError):
    """`demo --reset` found something the demo did not write; nothing was deleted."""


def _listed(values: Sequence[object]) -> str:
    """At most _SHOWN values, comma-separated, with "..." when there are more."""
    shown = ", ".join(str(v) for v in values[:_SHOWN])
    return shown + (", ..." if len(values) > _SHOWN else "")


def _counted(n: int, noun: tuple[str, str], qualifier: str = "",
             values: Sequence[object] = ()) -> str:  # fmt: skip
    """`3 labels by users the demo did not create (alice, bob)`: count, noun, first values."""
    text = f"{n} {noun[0] if n == 1 else noun[1]}" + (f" {qualifier}" if qualifier else "")
    return f"{text} ({_listed(values)})" if values else text


def _demo_frame_ids() -> set[str]:
    """The work ids of the bundled demo frame."""
    with gzip.open(DEMO_FRAME, "rt", encoding="utf-8") as fh:
        return {json.loads(line)["id"] for line in fh if line.strip()}


def _is_demo_frame_path(path: str) -> bool:
    """Whether an import run read the bundled demo frame (of this or another checkout)."""
    parts = Path(path).parts
    return tuple(parts[-3:]) == ("labeling", "data", DEMO_FRAME.name)


def _not_demo(conn: sqlite3.Connection) -> list[str]:
    """What a tool database holds that `build_demo` did not write, one phrase each."""
    demo_users = [name for name, _role in DEMO_USERS]
    users = dict(conn.execute("SELECT id, name FROM users").fetchall())
    campaigns = dict(conn.execute("SELECT id, name FROM campaigns").fetchall())
    found: list[str] = []
    foreign_labels: dict[str, int] = {}
    outside = 0
    for user_id, campaign_id, n in conn.execute(
        "SELECT user_id, campaign_id, count(*) FROM labels GROUP BY user_id, campaign_id"
    ):
        who = users.get(user_id, f"user id {user_id}")
        if who not in demo_users:
            foreign_labels[who] = foreign_labels.get(who, 0) + n
        elif campaigns.get(campaign_id) not in DEMO_CAMPAIGNS:
            outside += n
    if foreign_labels:
        found.append(
            _counted(
                sum(foreign_labels.values()),
                _LABELS,
                "by users the demo did not create",
                sorted(foreign_labels),
            )
        )
    if outside:
        found.append(_counted(outside, _LABELS, "in campaigns the demo did not create"))
    other_users = sorted(n for n in users.values() if n not in demo_users)
    if other_users:
        found.append(
            _counted(len(other_users), ("user", "users"), "the demo did not create", other_users)
        )
    other_campaigns = sorted(n for n in campaigns.values() if n not in DEMO_CAMPAIGNS)
    if other_campaigns:
        found.append(
            _counted(
                len(other_campaigns),
                ("campaign", "campaigns"),
                "the demo did not create",
                other_campaigns,
            )
        )
    demo_ids = _demo_frame_ids()
    works = [w for (w,) in conn.execute("SELECT id FROM works ORDER BY id") if w not in demo_ids]
    if works:
        found.append(_counted(len(works), ("work", "works"), "not in the demo frame", works))
    runs = [path for kind, path in conn.execute("SELECT kind, path FROM import_runs ORDER BY id")
            if kind != "frame" or not _is_demo_frame_path(path)]  # fmt: skip
    if runs:
        found.append(
            _counted(
                len(runs), ("import run", "import runs"), "of files other than the demo frame", runs
            )
        )
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    if "sso_identities" in tables:
        (sso,) = conn.execute("SELECT count(*) FROM sso_identities").fetchone()
        if sso:
            found.append(_counted(sso, ("single sign-on mapping", "single sign-on mappings")))
    return found


def demo_reset_problems(path: Path) -> list[str]:
    """Why deleting the SQLite file `path` would lose something other than the demo's data.

    Empty when the file is missing, empty, or a database of this tool holding only what
    `build_demo` writes (its frame, users and campaigns, and labels the demo users made in
    the demo campaigns: someone trying the demo). The file is opened read-only.
    """
    if not path.exists():
        return []
    if not path.is_file():
        return [f"{path} is not a file"]
    with path.open("rb") as fh:
        header = fh.read(len(_SQLITE_HEADER))
    if not header:
        return []  # a 0-byte file: SQLite's empty database, nothing to lose
    if header != _SQLITE_HEADER:
        return ["it is not a SQLite database"]
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        return [f"it cannot be opened ({exc})"]
    try:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
        missing = [t for t in _TOOL_TABLES if t not in tables]
        if missing:
            return [f"it is not a database of this tool (no {', '.join(missing)} tables)"]
        return _not_demo(conn)
    except (sqlite3.Error, ValueError, KeyError) as exc:
        return [f"it cannot be read as a database of this tool ({exc})"]
    finally:
        conn.close()


def reset_sqlite(url: str, *, force: bool = False) -> None:
    """Delete a demo SQLite database and its journal files (refuses other engines).

    Args:
        url: the database URL.
        force: delete even a database holding what the demo did not write.

    Raises:
        InputError: not a SQLite file; DemoResetRefused: it holds other data (nothing deleted).
    """
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not is_sqlite_path(parsed.database):
        raise InputError("--reset only deletes SQLite files; drop a PostgreSQL database yourself")
    path = Path(parsed.database)
    if not force:
        problems = demo_reset_problems(path)
        if problems:
            raise DemoResetRefused(
                f"refusing to reset {path}: {'; '.join(problems)}; --force deletes it anyway"
            )
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
    # Names as in DEMO_CAMPAIGNS, which `demo --reset` recognises as the demo's own.
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
