"""Admin actions that the admin page needs beyond users: importing an uploaded frame."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from labeling.frames.importer import DEFAULT_BATCH_SIZE, FrameReadError, import_frame
from labeling.schema import Schema


@dataclass
class UploadResult:
    """What an uploaded frame import did, ready to show."""

    exit_code: int
    headline: str
    problems: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)


@dataclass
class Outcome:
    """One part of an import's result, shown in its colour: success, warning, info or error."""

    level: str
    text: str
    rows: list[dict[str, Any]] = field(default_factory=list)


def outcomes(result: UploadResult) -> list[Outcome]:
    """The result split by outcome: works stored (green), lines rejected (a warning with their
    list), inconsistencies imported anyway (info with their list), a failed read or a strict
    abort (error)."""
    c = result.counts
    if not c:  # the file could not be read at all
        return [Outcome("error", result.headline)]
    rejected = [p for p in result.problems if p["kind"] == "rejected"]
    noted = [p for p in result.problems if p["kind"] != "rejected"]
    out = []
    if c["aborted"]:
        out.append(
            Outcome(
                "error",
                f"Strict import aborted at a rejected line: nothing was "
                f"written ({c['lines']} lines read).",
            )
        )
    else:
        stored = c["inserted"] + c["updated"] + c["unchanged"]
        level = "success" if stored else "info"
        out.append(
            Outcome(
                level,
                f"{stored} works stored: {c['inserted']} inserted, "
                f"{c['updated']} updated, {c['unchanged']} unchanged.",
            )
        )
    if c["rejected"]:
        shown = "" if len(rejected) == c["rejected"] else f" (the first {len(rejected)})"
        out.append(
            Outcome("warning", f"{c['rejected']} line(s) rejected, not imported{shown}:", rejected)
        )
    if c["warnings"]:
        shown = "" if len(noted) == c["warnings"] else f" (the first {len(noted)})"
        out.append(
            Outcome(
                "info", f"{c['warnings']} inconsistency warning(s), imported anyway{shown}:", noted
            )
        )
    return out


def next_step(result: UploadResult) -> str | None:
    """What to do after an upload that stored works: queue them in a campaign (else None)."""
    c = result.counts
    if not c or c["aborted"] or not c["inserted"] + c["updated"] + c["unchanged"]:
        return None
    return (
        "Next: create a campaign on the Campaigns page, so that annotators get these works "
        "to label (pick the queue's order, the labels each work needs and, if you like, a "
        "filter)."
    )


def import_uploaded_frame(
    engine: Engine, schema: Schema, filename: str, data: bytes, *, strict: bool = False,
    batch_size: int | None = None,
) -> UploadResult:  # fmt: skip
    """Import an uploaded frame through the same importer as `labeling import-frame`.

    Args:
        engine: the database.
        schema: the label schema to check against.
        filename: the uploaded file's name (shown in messages).
        data: the file's bytes (plain or gzipped JSON Lines).
        strict: abort on the first bad line and write nothing.
        batch_size: records per transaction (None: the importer's default; the page
            passes LABELING_IMPORT_BATCH_SIZE, as the CLI does).
    """
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / Path(filename).name
        path.write_bytes(data)
        try:
            s = import_frame(engine, path, schema, strict=strict, progress=False,
                             batch_size=batch_size or DEFAULT_BATCH_SIZE)  # fmt: skip
        except FrameReadError as exc:
            return UploadResult(2, str(exc).replace(str(path), filename))
    verdict = "aborted (strict), nothing written" if s.aborted else "imported"
    headline = (
        f"{filename}: {verdict}: {s.lines} lines, {s.inserted} inserted, {s.updated} updated, "
        f"{s.unchanged} unchanged, {s.rejected} rejected, {s.warnings} warnings"
    )
    problems = [
        {"line": p.line, "work_id": p.work_id, "kind": p.kind, "reason": p.reason}
        for p in s.problems
    ]
    return UploadResult(s.exit_code, headline, problems, s.as_dict())
