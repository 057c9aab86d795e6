"""Label import: human labels from long CSV, JSONL or Parquet files, checked, grouped, stored
idempotently."""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, bindparam, select

from db.engine import read_session, write_session
from db.models import Campaign, ImportRun, Label, User, Work, utcnow
from labeling.campaigns import MANUAL, add_items, find_campaign, get_or_create_campaign
from labeling.labels import LabelError, _latest, _record  # the version writer submits use
from labeling.record import ID_RULE, normalize_work_id
from labeling.schema import Schema
from labeling.users import UserError, clean_name
from labeling.validation import AnswerError, campaign_questions, normalise_value, reevaluate_work

DEFAULT_IMPORT_CAMPAIGN = "imported"
IMPORT_COLUMNS = ("work_id", "annotator", "question", "value")
NOT_UTF8 = "not UTF-8 text"
_BATCH = 500
_CAMPAIGN = select(
    Campaign.id, Campaign.name, Campaign.overlap, Campaign.rule, Campaign.questions
).where(Campaign.id == bindparam("cid"))


@dataclass(frozen=True)
class ImportProblem:
    """One rejected line of a labels file."""

    line: int
    work_id: str | None
    annotator: str | None
    reason: str


@dataclass
class LabelImportSummary:
    """What an import of human labels did."""

    path: str
    campaign: str
    rows: int = 0
    imported: int = 0
    duplicates: int = 0
    rejected: int = 0
    works_added: int = 0
    users_created: list[str] = field(default_factory=list)
    problems: list[ImportProblem] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """Plain data (for the import_runs table, the CLI and JSON)."""
        return asdict(self)


def _is_utf8(text: str) -> bool:
    """False when decoding left lone surrogates (the bytes were not UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _read_parquet(path: Path) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """(row number from 1, row) per row of a Parquet labels file (an export's --long file)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise LabelError(f"{path}: not a readable Parquet file ({exc})") from exc
    missing = [c for c in IMPORT_COLUMNS if c not in parquet.schema_arrow.names]
    if missing:
        raise LabelError(f"{path}: missing columns {', '.join(missing)}")
    number = 0
    for batch in parquet.iter_batches(batch_size=10_000):
        for row in batch.to_pylist():
            number += 1
            yield number, row


def _read_rows(path: Path) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """(line number, row) per data line; a string instead of a row is a parse problem."""
    if path.name.lower().endswith(".parquet"):
        yield from _read_parquet(path)
        return
    name = path.name.lower().removesuffix(".gz")
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    # Undecodable bytes become lone surrogates, so a line in another encoding is rejected
    # with its number instead of aborting the whole file.
    with opener(path, "rt", encoding="utf-8-sig", errors="surrogateescape", newline="") as fh:
        if name.endswith(".csv"):
            reader = csv.DictReader(fh)
            missing = [c for c in IMPORT_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise LabelError(f"{path}: missing columns {', '.join(missing)}")
            for row in reader:
                if not all(_is_utf8(v) for v in row.values() if isinstance(v, str)):
                    yield reader.line_num, NOT_UTF8
                    continue
                yield reader.line_num, row
        elif name.endswith((".jsonl", ".ndjson", ".json")):
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                if not _is_utf8(line):
                    yield number, NOT_UTF8
                    continue
                try:
                    obj = json.loads(line)
                except ValueError as exc:
                    yield number, f"not valid JSON ({exc.msg})"
                    continue
                except RecursionError:
                    yield number, "not valid JSON (nested too deeply)"
                    continue
                yield number, obj if isinstance(obj, dict) else "not a JSON object"
        else:
            raise LabelError(f"{path}: expected a .csv, .jsonl (optionally .gz) or .parquet file")


def _parse_value(question: Any, raw: Any) -> Any:
    """One cell of a labels file as a checked answer."""
    if question.kind == "multi":
        if raw is None or isinstance(raw, str):
            raw = [p.strip() for p in (raw or "").split(";") if p.strip()]
        return normalise_value(question, raw)
    if raw is None or raw == "":
        raise AnswerError(f"question '{question.name}': no value")
    return normalise_value(question, raw)


def _parse_meta(row: dict[str, Any], group: dict[str, Any]) -> None:
    """Fold a row's created_at, confidence and note into its group."""
    created = row.get("created_at")
    if created not in (None, ""):
        stamp = datetime.fromisoformat(str(created).replace("Z", "+00:00"))
        stamp = stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp.astimezone(UTC)
        group["created_at"] = max(group.get("created_at") or stamp, stamp)
    conf = row.get("confidence")
    if conf not in (None, ""):
        group["confidence"] = int(conf)
    if row.get("note") not in (None, ""):
        group["note"] = str(row["note"])


def _group_rows(
    path: Path, questions: dict[str, Any], summary: LabelImportSummary
) -> dict[tuple[str, str], dict[str, Any]]:
    """Read, check and group a labels file by (work, annotator); rejects go to the summary."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}

    def reject(line: int, wid: Any, who: Any, reason: str) -> None:
        """Count and describe one rejected line."""
        summary.rejected += 1
        summary.problems.append(ImportProblem(line, wid or None, who or None, reason))

    for line, row in _read_rows(path):
        summary.rows += 1
        if isinstance(row, str):
            reject(line, None, None, row)
            continue
        wid = str(row.get("work_id") or "").strip()
        who = str(row.get("annotator") or "").strip()
        qname = str(row.get("question") or "").strip()
        if not wid or not who or not qname:
            reject(line, wid, who, "work_id, annotator and question are required")
            continue
        if normalize_work_id(wid) != wid:
            reject(line, wid, who, f"work_id {wid!r} is not an OpenAlex work id ({ID_RULE})")
            continue
        if qname not in questions:
            reject(line, wid, who, f"unknown question '{qname}'")
            continue
        try:
            value = _parse_value(questions[qname], row.get("value"))
            group = groups.setdefault((wid, who), {"answers": {}, "lines": []})
            _parse_meta(row, group)
        except (AnswerError, ValueError, TypeError) as exc:
            reject(line, wid, who, str(exc))
            continue
        before = group["answers"].get(qname)
        if before is not None and questions[qname].kind == "multi":
            value = normalise_value(questions[qname], sorted(set(before) | set(value)))
        elif before is not None and before != value:
            reject(line, wid, who, f"question '{qname}' already answered {before!r} above")
            continue
        group["answers"][qname] = value
        group["lines"].append(line)
    return {key: g for key, g in groups.items() if g["answers"]}


def _bad_name(name: str) -> str | None:
    """Why an annotator name cannot be a user (None when it can)."""
    try:
        if clean_name(name) != name:
            return f"annotator name {name!r} has surrounding spaces"
    except UserError as exc:
        return f"annotator: {exc}"
    return None


def _users(engine: Engine, names: set[str], summary: LabelImportSummary) -> dict[str, int]:
    """Ids of the annotators by name, creating the missing ones (no password)."""
    with write_session(engine) as session:
        found = dict(session.execute(select(User.name, User.id).where(User.name.in_(names))).all())
        for name in sorted(names - set(found)):
            user = User(name=name, role="annotator", password_hash=None, active=True,
                        failed_logins=0, created_at=utcnow())
            session.add(user)
            session.flush()
            found[name] = user.id
            summary.users_created.append(name)
    return found


def _submission_id(campaign_id: int, wid: str, who: str, answers: dict[str, Any]) -> str:
    """A deterministic submission id for an imported label's content."""
    content = json.dumps([campaign_id, wid, who, answers], sort_keys=True, ensure_ascii=False)
    return "imp-" + hashlib.sha256(content.encode("utf-8")).hexdigest()[:60]


def import_labels(
    engine: Engine, path: str | Path, schema: Schema, *, campaign: str | int | None = None
) -> LabelImportSummary:
    """Import human labels from a long-format CSV or JSONL file (idempotent).

    Args:
        engine: the database.
        path: .csv or .jsonl (optionally .gz) or .parquet, with columns work_id, annotator,
            question, value and optional created_at, confidence, note. Value: a label name (single),
            yes/no (binary), ";"-separated label names (multi; empty = none chosen).
        schema: the label schema.
        campaign: name or id of the campaign to file the labels under; None = "imported"
            (created if missing). Works not yet in the campaign are added to it.

    Returns:
        Counts of imported labels, duplicates (already present) and rejected lines, with
        every problem (line number, work id, reason).
    """
    path = Path(path)
    started = utcnow()
    name = DEFAULT_IMPORT_CAMPAIGN if campaign is None else str(campaign)
    # The contract: a named campaign that does not exist yet is created.
    info = find_campaign(engine, name) or get_or_create_campaign(engine, name, strategy=MANUAL)
    summary = LabelImportSummary(path=str(path), campaign=info.name)
    questions = {q.name: q for q in campaign_questions(info, schema)}
    groups = _group_rows(path, questions, summary)
    wanted = sorted({wid for wid, _ in groups})
    known: set[str] = set()
    with read_session(engine) as session:
        for i in range(0, len(wanted), _BATCH):
            chunk = wanted[i : i + _BATCH]
            known |= set(session.execute(select(Work.id).where(Work.id.in_(chunk))).scalars())
    for (wid, who), group in list(groups.items()):
        problem = f"unknown work {wid}" if wid not in known else _bad_name(who)
        if problem:
            for line in group["lines"]:
                summary.rejected += 1
                summary.problems.append(ImportProblem(line, wid, who, problem))
            del groups[(wid, who)]
    users = _users(engine, {who for _, who in groups}, summary) if groups else {}
    keys = sorted(groups)
    for i in range(0, len(keys), _BATCH):
        with write_session(engine) as session:
            camp = session.connection().execute(_CAMPAIGN, {"cid": info.id}).one()
            summary.works_added += add_items(session, info.id, [w for w, _ in keys[i : i + _BATCH]])
            touched: list[str] = []
            for wid, who in keys[i : i + _BATCH]:
                group, uid = groups[(wid, who)], users[who]
                sid = _submission_id(info.id, wid, who, group["answers"])
                prev = _latest(session, info.id, wid, uid)
                seen = session.execute(select(Label.id).where(Label.submission_id == sid)).first()
                if seen or (prev and not prev.skipped and prev.answers == group["answers"]):
                    summary.duplicates += 1
                    continue
                values = {
                    "answers": group["answers"], "skipped": False, "flagged": False,
                    "note": group.get("note"), "confidence": group.get("confidence"),
                    "schema_hash": schema.hash, "source": "import", "submission_id": sid,
                    "created_at": group.get("created_at") or utcnow(),
                }
                _record(session, camp, wid, uid, prev, values, schema=None, evaluate=False)
                summary.imported += 1
                touched.append(wid)
            for wid in dict.fromkeys(touched):
                reevaluate_work(session, wid, camp, schema, None)
    with write_session(engine) as session:
        session.add(ImportRun(kind="labels", path=str(path), summary=summary.as_dict(),
                              started_at=started, finished_at=utcnow()))
    return summary
