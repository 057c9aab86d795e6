"""What a frame import did: its counts, the problems it found, and how it failed.

The summary counts committed batches only, so that it matches the database; the reporter
keeps the first problems for the screen and streams all of them to a report file.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from labeling.frames.frame_file import FrameReadError
from labeling.frames.store import StoredCounts

MAX_PROBLEMS_KEPT = 1000


@dataclass
class Problem:
    """One reported line: rejected (skipped) or a warning (imported, but inconsistent)."""

    line: int
    work_id: str | None
    kind: str
    reason: str


@dataclass
class ImportSummary:
    """Counts of one frame import, plus the first problems found."""

    path: str
    lines: int = 0
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    # Of the updated works, those whose content changed under an unchanged model_version
    # (the content they replaced is kept in predictions, as for a new model_version).
    content_changed_same_version: int = 0
    rejected: int = 0
    warnings: int = 0
    aborted: bool = False
    failed: bool = False
    error: str | None = None
    problems: list[Problem] = field(default_factory=list)

    @property
    def stored(self) -> int:
        """Records now in the database as this file has them (committed)."""
        return self.inserted + self.updated + self.unchanged

    @property
    def exit_code(self) -> int:
        """0 all imported, 3 lines rejected or --strict aborted, 2 the import failed part-way."""
        if self.failed:
            return 2
        return 3 if (self.rejected or self.aborted) else 0

    def add(self, counts: StoredCounts) -> None:
        """Count a committed batch."""
        self.inserted += counts.inserted
        self.updated += counts.updated
        self.unchanged += counts.unchanged
        self.content_changed_same_version += counts.content_changed_same_version

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the counts (problems excluded)."""
        d = asdict(self)
        d.pop("problems")
        return d


class ImportFailed(FrameReadError):
    """The import stopped part-way; what it committed stays, `summary` counts it."""

    def __init__(self, message: str, summary: ImportSummary) -> None:
        super().__init__(message)
        self.summary = summary


def failure_message(reason: str, s: ImportSummary, strict: bool) -> str:
    """One line: what failed, how far the import got, and what re-running does."""
    counts = (
        f"before the failure {s.lines} lines read, {s.stored} stored ({s.inserted} inserted, "
        f"{s.updated} updated, {s.unchanged} unchanged), {s.rejected} rejected"
    )
    if strict:
        after = "--strict: nothing was written"
    elif s.stored:
        after = "the stored works stay; re-running the repaired file continues idempotently"
    else:
        after = "nothing was stored"
    return f"{reason}; {counts}; {after}"


class Reporter:
    """Counts problems, keeps the first ones, and streams all of them to a report file."""

    def __init__(self, summary: ImportSummary, report_path: Path | None) -> None:
        self.summary = summary
        self.fh: IO[bytes] | None = report_path.open("wb") if report_path else None

    def add(self, line: int, work_id: str | None, kind: str, reason: str) -> None:
        if kind == "rejected":
            self.summary.rejected += 1
        else:
            self.summary.warnings += 1
        problem = Problem(line, work_id, kind, reason)
        if len(self.summary.problems) < MAX_PROBLEMS_KEPT:
            self.summary.problems.append(problem)
        if self.fh:
            self.fh.write(orjson.dumps(asdict(problem)) + b"\n")

    def close(self) -> None:
        if self.fh:
            self.fh.close()
