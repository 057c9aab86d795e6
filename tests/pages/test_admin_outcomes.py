"""A frame upload's result, split by outcome: stored green, rejected lines a warning with list."""

from __future__ import annotations

from typing import Any

import pytest

from labeling.frames.upload import UploadResult, next_step, outcomes
from tests.pages.test_app_shell import app_env  # noqa: F401 - fixture


def counts(**kw: Any) -> dict[str, Any]:
    base = {
        "path": "f.jsonl",
        "lines": 0,
        "inserted": 0,
        "updated": 0,
        "unchanged": 0,
        "rejected": 0,
        "warnings": 0,
        "aborted": False,
    }
    return {**base, **kw}


def rejected(line: int) -> dict[str, Any]:
    return {"line": line, "work_id": None, "kind": "rejected", "reason": "not JSON"}


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        # the case: 5 works stored and 2 lines rejected is not all red
        (
            UploadResult(
                3, "h", [rejected(3), rejected(6)], counts(lines=7, inserted=5, rejected=2)
            ),
            [
                ("success", "5 works stored: 5 inserted, 0 updated, 0 unchanged.", 0),
                ("warning", "2 line(s) rejected, not imported:", 2),
            ],
        ),
        (
            UploadResult(0, "h", [], counts(lines=3, inserted=1, updated=1, unchanged=1)),
            [("success", "3 works stored: 1 inserted, 1 updated, 1 unchanged.", 0)],
        ),
        (
            UploadResult(
                0,
                "h",
                [{"line": 2, "work_id": "W1", "kind": "warning", "reason": "x"}],
                counts(lines=2, inserted=2, warnings=1),
            ),
            [
                ("success", "2 works stored: 2 inserted, 0 updated, 0 unchanged.", 0),
                ("info", "1 inconsistency warning(s), imported anyway:", 1),
            ],
        ),
        (
            UploadResult(3, "h", [rejected(1)], counts(lines=4, rejected=1, aborted=True)),
            [
                (
                    "error",
                    "Strict import aborted at a rejected line: nothing was written (4 lines read).",
                    0,
                ),
                ("warning", "1 line(s) rejected, not imported:", 1),
            ],
        ),
        (
            UploadResult(3, "h", [rejected(1)], counts(lines=1, rejected=1)),
            [
                ("info", "0 works stored: 0 inserted, 0 updated, 0 unchanged.", 0),
                ("warning", "1 line(s) rejected, not imported:", 1),
            ],
        ),
        (
            UploadResult(3, "h", [rejected(1)], counts(lines=300, inserted=1, rejected=299)),
            [
                ("success", "1 works stored: 1 inserted, 0 updated, 0 unchanged.", 0),
                ("warning", "299 line(s) rejected, not imported (the first 1):", 1),
            ],
        ),
        (UploadResult(2, "f.jsonl: not gzip"), [("error", "f.jsonl: not gzip", 0)]),
    ],
)
def test_outcomes(result: UploadResult, expected: list[tuple[str, str, int]]) -> None:
    got = [(o.level, o.text, len(o.rows)) for o in outcomes(result)]
    assert got == expected


def test_a_real_upload_is_split(app_env: str, seed_record: dict[str, Any]) -> None:  # noqa: F811
    """Through the importer: stored works in green, the bad line as a warning with its line."""
    import json

    from labeling.database import get_engine
    from labeling.frames.upload import import_uploaded_frame
    from labeling.schema import load_schema
    from labeling.settings import DEFAULT_SCHEMA
    from tests.conftest import make_record

    lines = [json.dumps(make_record(seed_record, f"W{700 + i}")) for i in range(5)]
    lines.insert(2, "{not json")
    result = import_uploaded_frame(
        get_engine(app_env),
        load_schema(DEFAULT_SCHEMA),
        "f.jsonl",
        ("\n".join(lines) + "\n").encode(),
    )
    parts = outcomes(result)
    assert parts[0].level == "success" and parts[0].text.startswith("5 works stored")
    assert parts[1].level == "warning" and [p["line"] for p in parts[1].rows] == [3]


def test_the_next_step_after_an_upload_is_a_campaign_only_when_works_were_stored() -> None:
    stored = UploadResult(3, "h", [rejected(3)], counts(lines=3, inserted=1, unchanged=1))
    assert (next_step(stored) or "").startswith("Next: create a campaign on the Campaigns page")
    none = UploadResult(3, "h", [rejected(1)], counts(lines=1, rejected=1))
    aborted = UploadResult(3, "h", [rejected(1)], counts(lines=1, inserted=1, aborted=True))
    unread = UploadResult(2, "cannot read f.jsonl")
    assert [next_step(r) for r in (none, aborted, unread)] == [None, None, None]
