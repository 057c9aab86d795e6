"""The export plan: resolved once, checked in a fixed order, the one route of every export."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, insert

from db.engine import write_session
from db.models import Campaign, utcnow
from labeling.export import plan as export_plan
from labeling.export import table
from labeling.export.definitions import ExportError, ExportFilters, wide_columns
from labeling.export.gold_set import export_gold, preview
from labeling.export.plan import CHUNK, ExportPlan, plan_export
from labeling.schema import Schema


@pytest.fixture
def campaigns(engine: Engine) -> dict[str, int]:
    """Campaigns "first" and "7" (a name that is also a number, not its id): name -> id."""
    ids = {}
    with write_session(engine) as session:
        for name in ("first", "7"):
            row = insert(Campaign).values(name=name, strategy="manual", overlap=2)
            ids[name] = session.execute(row.values(created_at=utcnow())).inserted_primary_key[0]
    assert ids["7"] != 7
    return ids


def test_plan_resolves_questions_campaign_and_columns(
    engine: Engine, schema: Schema, campaigns: dict[str, int]
) -> None:
    names = tuple(reversed(schema.names[:2]))
    filters = ExportFilters(status="all", campaign="7", questions=names)
    plan = plan_export(engine, schema, fmt="csv", filters=filters, long=True, processes=3)
    assert isinstance(plan, ExportPlan)
    assert [q.name for q in plan.questions] == list(schema.names[:2])  # schema order
    assert (plan.campaign_id, plan.campaign_name) == (campaigns["7"], "7")  # the name wins
    assert plan.columns == tuple(wide_columns(schema, plan.questions))
    assert (plan.fmt, plan.long, plan.pseudonymize, plan.processes) == ("csv", True, False, 3)
    assert (plan.chunk_size, plan.threshold) == (CHUNK, export_plan.THRESHOLD)
    with engine.connect() as conn:  # a connection serves as well as an engine
        first = ExportFilters(campaign=str(campaigns["first"]))
        by_id = plan_export(conn, schema, fmt="jsonl", filters=first)
    assert (by_id.campaign_id, by_id.campaign_name) == (campaigns["first"], "first")
    with pytest.raises(AttributeError):
        plan.fmt = "parquet"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("fmt", "kw", "message"),
    [
        ("xlsx", {"questions": ("nope",)}, "format must be one of csv, jsonl, parquet, not 'xlsx'"),
        ("csv", {"questions": ("nope",), "status": "done"}, "unknown questions nope"),
        ("csv", {"status": "done", "campaign": "missing"}, "status must be one of"),
        ("csv", {"campaign": "missing"}, "no campaign named or numbered 'missing'"),
    ],
)
def test_bad_input_is_refused_in_order(
    engine: Engine, schema: Schema, tmp_path: Path, fmt: str, kw: dict[str, Any], message: str
) -> None:
    with pytest.raises(ExportError, match=message):
        plan_export(engine, schema, fmt=fmt, filters=ExportFilters(**kw))
    out = tmp_path / "out" / "gold.csv"
    with pytest.raises(ExportError, match=message):
        export_gold(engine, schema, out, fmt=fmt, filters=ExportFilters(**kw))
    assert not out.parent.exists()  # refused before any file or folder is made


def test_filters_are_resolved_once_per_export(
    engine: Engine,
    schema: Schema,
    campaigns: dict[str, int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: Counter[str] = Counter()
    for name in ("resolve_campaign", "select_questions"):
        real = getattr(export_plan, name)

        def counted(*args: Any, _real: Any = real, _name: str = name) -> Any:
            calls[_name] += 1
            return _real(*args)

        monkeypatch.setattr(export_plan, name, counted)
    filters = ExportFilters(status="all", campaign="first")
    export_gold(engine, schema, tmp_path / "g.csv", fmt="csv", filters=filters, long=True)
    assert calls == {"resolve_campaign": 1, "select_questions": 1}
    preview(engine, schema, filters)
    assert calls == {"resolve_campaign": 2, "select_questions": 2}
    # The chunk builder reads the plan: it has nothing left to resolve.
    assert not hasattr(table, "resolve_campaign") and not hasattr(table, "select_questions")
