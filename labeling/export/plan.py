"""One export, resolved once: format, schema, questions, campaign, columns and sizes.

Every layer of an export (the writers, the chunk builder, the worker processes, the manifest)
reads the same ExportPlan instead of resolving the filters again: the questions and the
campaign are looked up, and bad input refused, in plan_export alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine

from labeling.export.definitions import (
    ExportError,
    ExportFilters,
    resolve_campaign,
    select_questions,
    wide_columns,
    work_conditions,
)
from labeling.schema import Question, Schema

__all__ = ["CHUNK", "FORMATS", "RANGE_SIZE", "THRESHOLD", "ExportPlan", "plan_export"]

FORMATS = ("csv", "jsonl", "parquet")
CHUNK = 2_500  # works read and built per step
THRESHOLD = 100_000  # fewer matching works: one process (starting workers costs more)
# Works per worker task (whole chunks, at least one). A task returns its chunks at once, so
# one chunk per task keeps the peak memory where the old streaming pipes had it, at the same
# speed (bench/RESULTS.md, session 4); 5,000 cost about 30 MB more.
RANGE_SIZE = CHUNK


@dataclass(frozen=True)
class ExportPlan:
    """What one export writes and how: everything resolved, nothing left to look up."""

    fmt: str
    schema: Schema
    filters: ExportFilters
    questions: tuple[Question, ...]
    columns: tuple[tuple[str, str], ...]  # (name, kind) of the data file, in file order
    campaign_id: int | None
    campaign_name: str | None
    long: bool = False
    pseudonymize: bool = False
    chunk_size: int = CHUNK
    processes: int = 1
    threshold: int = THRESHOLD  # fewer matching works: built in the exporting process
    range_size: int = RANGE_SIZE  # works per worker task, rounded down to whole chunks

    def conditions(self) -> list[Any]:
        """SQL conditions on works selecting the works of the export."""
        return work_conditions(self.filters, self.campaign_id)


def plan_export(
    source: Engine | Connection,
    schema: Schema,
    *,
    fmt: str,
    filters: ExportFilters | None = None,
    long: bool = False,
    pseudonymize: bool = False,
    chunk_size: int = CHUNK,
    processes: int | None = None,
    threshold: int | None = None,
    range_size: int | None = None,
) -> ExportPlan:
    """Check and resolve an export; ExportError on a bad format, question, status, date range
    or campaign, in that order, before any file is touched.

    processes None: min(2, CPU count). threshold and range_size None: THRESHOLD and
    RANGE_SIZE (read when called, so tests may lower them).
    """
    filters = filters or ExportFilters()
    if fmt not in FORMATS:
        raise ExportError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    questions = select_questions(schema, filters.questions)
    work_conditions(filters, None)  # the status and date checks, before any query
    if isinstance(source, Engine):
        with source.connect() as conn:
            camp = resolve_campaign(conn, filters.campaign)
    else:
        camp = resolve_campaign(source, filters.campaign)
    return ExportPlan(
        fmt=fmt, schema=schema, filters=filters, questions=tuple(questions),
        columns=tuple(wide_columns(schema, questions)),
        campaign_id=None if camp is None else int(camp.id),
        campaign_name=None if camp is None else str(camp.name),
        long=long, pseudonymize=pseudonymize, chunk_size=chunk_size,
        processes=min(2, os.cpu_count() or 1) if processes is None else processes,
        threshold=THRESHOLD if threshold is None else threshold,
        range_size=RANGE_SIZE if range_size is None else range_size,
    )  # fmt: skip
