"""Fixtures of the report tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from labeling.review import flow
from labeling.schema import Schema
from tests.reports.test_evaluation import _frame


@pytest.fixture
def frame(
    engine: Engine,
    schema: Schema,
    seed_record: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Engine:
    """The 24-work test frame, with the label flow's minimum dwell off."""
    monkeypatch.setattr(flow, "MIN_DWELL", 0.0)
    _frame(engine, schema, seed_record, tmp_path)
    return engine
