"""Label import: human labels from long CSV, JSONL or Parquet files, checked, grouped into
whole labels, each stored in its campaign, idempotently.

A label is identified by its campaign, work, annotator and, when the file has one, version:
the rows of one label are grouped, never the rows of two. Every row goes into the campaign
its `campaign` cell names (default "imported"), unless the caller forces one. A label is
stored whole or not at all: one bad row rejects every row of its label. The whole file is
read and checked before anything is written, so an unreadable file changes nothing.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, bindparam, select

from db.engine import read_session, write_session
from db.models import Campaign, ImportRun, Label, User, Work, utcnow
from labeling.auth.users import UserError, check_new_name, clean_name
from labeling.frames.checks import ID_RULE, normalize_work_id
from labeling.inputs import shown, storable
from labeling.review.campaigns import (
    MANUAL,
    CampaignInfo,
    add_items,
    find_campaign,
    get_or_create_campaign,
)
from labeling.review.label_read import (
    IMPORT_COLUMNS,
    NOT_UTF8,
    CellError,
    Row,
    answer_cell,
    label_fields,
    open_rows,
    text_cell,
    whole_cell,
)
from labeling.review.labels import (  # the version writer submits use
    LabelError,
    PreviousLabel,
    _latest,
    _record,
)
from labeling.review.validation import (
    AnswerError,
    campaign_questions,
    normalise_value,
    reevaluate_work,
)
from labeling.schema import Question, Schema
from labeling.vocabulary import VERDICT_CORROBORATED, VERDICT_DISPUTED

__all__ = ["DEFAULT_IMPORT_CAMPAIGN", "IMPORT_COLUMNS", "NOT_UTF8", "ImportProblem",
           "LabelImportSummary", "import_labels", "report_lines"]  # fmt: skip

DEFAULT_IMPORT_CAMPAIGN = "imported"
MAX_CAMPAIGN_NAME = 128
SHOWN_PROBLEMS = 50
_BATCH = 500
_CAMPAIGN = select(
    Campaign.id, Campaign.name, Campaign.overlap, Campaign.rule, Campaign.questions
).where(Campaign.id == bindparam("cid"))
_Key = tuple[str, str, str, str, int]  # campaign, source campaign, work, annotator, version


@dataclass(frozen=True)
class ImportProblem:
    """One rejected line of a labels file."""

    line: int
    work_id: str | None
    annotator: str | None
    reason: str


@dataclass
class LabelImportSummary:
    """What an import of human labels did (the import_runs table, the CLI and JSON)."""

    path: str
    campaign: str | None  # the campaign forced, else the only one used (None: several)
    rows: int = 0
    imported: int = 0  # labels stored
    duplicates: int = 0  # labels already stored
    rejected: int = 0  # lines
    works_added: int = 0  # campaign items added
    # Works validated elsewhere on which the imported labels' verdict agreed (corroborated)
    # or differed (a dispute across campaigns opened; the validated answers stay).
    corroborated: int = 0
    disputes_opened: int = 0
    users_created: list[str] = field(default_factory=list)
    campaigns_created: list[str] = field(default_factory=list)
    campaigns: list[str] = field(default_factory=list)  # every campaign labels went into
    problems: list[ImportProblem] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """Plain data."""
        return asdict(self)


@dataclass
class _Label:
    """The rows of one label read so far."""

    answers: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, tuple[Any, int]] = field(default_factory=dict)  # field -> (value, line)
    lines: list[int] = field(default_factory=list)
    bad: dict[int, str] = field(default_factory=dict)  # line -> why, of the bad rows


def report_lines(summary: LabelImportSummary) -> tuple[list[str], str]:
    """The problems as import-frame prints them (the first 50) and the closing line."""
    lines = []
    for p in summary.problems[:SHOWN_PROBLEMS]:
        where = f"line {p.line}" + (f" ({shown(p.work_id)})" if p.work_id else "")
        lines.append(f"rejected: {where}: {shown(p.reason)}")
    if len(summary.problems) > SHOWN_PROBLEMS:
        lines.append(f"... {len(summary.problems) - SHOWN_PROBLEMS} more problems; "
                     "use --json for all")  # fmt: skip
    done = (f"done: {summary.rows} rows, {summary.imported} labels imported, "
            f"{summary.duplicates} already present, {summary.rejected} rows rejected, "
            f"{summary.works_added} works added to campaigns, "
            f"{len(summary.users_created)} users created, "
            f"{len(summary.campaigns_created)} campaigns created, "
            f"{summary.corroborated} validated works corroborated, "
            f"{summary.disputes_opened} disputes opened across campaigns")  # fmt: skip
    return lines, done


def _campaign_name_problem(name: str) -> str | None:
    """Why a text cannot name a new campaign (None when it can)."""
    if not storable(name) or not name.isprintable() or not name.strip():
        return f"campaign name {shown(name)!r} is empty or has control characters"
    if len(name) > MAX_CAMPAIGN_NAME:
        return f"campaign name of {len(name)} characters, at most {MAX_CAMPAIGN_NAME}"
    return None


class _Campaigns:
    """The campaigns rows go into, looked up once by name; missing ones are created later."""

    def __init__(self, engine: Engine, schema: Schema, forced: str | int | None) -> None:
        """Resolve a forced campaign (name or id); LabelError when it cannot be a name."""
        self.engine, self.schema = engine, schema
        self.found: dict[str, CampaignInfo | None] = {}
        self._questions: dict[str, dict[str, Question]] = {}
        self.forced: str | None = None
        if forced is not None:
            info = find_campaign(engine, forced)
            self.forced = info.name if info is not None else str(forced)
            if info is None and (why := _campaign_name_problem(self.forced)):
                raise LabelError(f"--campaign: {why}")
            self.found[self.forced] = info

    def info(self, name: str) -> CampaignInfo | None:
        """The campaign with exactly this name, or None (to be created)."""
        if name not in self.found:
            info = find_campaign(self.engine, name)
            self.found[name] = info if info is not None and info.name == name else None
        return self.found[name]

    def questions(self, name: str) -> dict[str, Question]:
        """The questions a campaign asks (a new campaign asks all of the schema's)."""
        if name not in self._questions:
            info = self.info(name)
            asked = campaign_questions(info, self.schema) if info else self.schema.questions
            self._questions[name] = {q.name: q for q in asked}
        return self._questions[name]


def _add_row(label: _Label, line: int, qname: str, question: Question, row: Row) -> None:
    """Fold one row into its label; AnswerError, CellError or ValueError when it cannot be."""
    value = answer_cell(question, row.get("value"))
    for name, got in label_fields(row).items():
        before = label.meta.setdefault(name, (got, line))
        if before[0] != got:
            raise CellError(
                f"{name} {shown(str(got))[:60]!r} differs from line {before[1]}'s "
                f"{shown(str(before[0]))[:60]!r} (rows of one label agree)"
            )
    earlier = label.answers.get(qname)
    if earlier is not None and question.kind == "multi":
        value = normalise_value(question, sorted(set(earlier) | set(value)))
    elif earlier is not None and earlier != value:
        raise AnswerError(f"question '{qname}' already answered {earlier!r} above")
    label.answers[qname] = value


def _read(path: Path, campaigns: _Campaigns, summary: LabelImportSummary) -> dict[_Key, _Label]:
    """Read and group a labels file into labels; lines that fit no label are rejected."""
    labels: dict[_Key, _Label] = {}
    for line, row in open_rows(path):
        summary.rows += 1
        if isinstance(row, str):
            _reject(summary, line, None, None, row)
            continue
        try:
            wid = text_cell(row, "work_id", strip=True) or ""
            who = text_cell(row, "annotator", strip=True) or ""
            qname = text_cell(row, "question", strip=True) or ""
            source = text_cell(row, "campaign")
            version = whole_cell(row, "version", 1)
        except CellError as exc:
            _reject(summary, line, _cell(row, "work_id"), _cell(row, "annotator"), str(exc))
            continue
        if not wid or not who or not qname:
            _reject(summary, line, wid, who, "work_id, annotator and question are required")
            continue
        if normalize_work_id(wid) != wid:
            _reject(
                summary, line, wid, who, f"work_id {wid!r} is not an OpenAlex work id ({ID_RULE})"
            )
            continue
        target = campaigns.forced or source or DEFAULT_IMPORT_CAMPAIGN
        if (why := _campaign_name_problem(target)) is not None:
            _reject(summary, line, wid, who, why)
            continue
        # Forced into one campaign, the file's campaign still tells two labels apart.
        origin = (source or DEFAULT_IMPORT_CAMPAIGN) if campaigns.forced else ""
        label = labels.setdefault((target, origin, wid, who, version or 0), _Label())
        label.lines.append(line)
        questions = campaigns.questions(target)
        try:
            if qname not in questions:
                raise AnswerError(
                    f"unknown question '{qname}'"
                    if qname not in campaigns.schema.names
                    else f"question '{qname}' is not asked in campaign '{target}'"
                )
            _add_row(label, line, qname, questions[qname], row)
        except (AnswerError, CellError, ValueError, TypeError) as exc:
            label.bad[line] = str(exc)
    return labels


def _cell(row: Row, key: str) -> str | None:
    """A cell for a problem report: text as is, anything else left out."""
    value = row.get(key)
    return value if isinstance(value, str) and value else None


def _reject(summary: LabelImportSummary, line: int, wid: Any, who: Any, reason: str) -> None:
    """Count and describe one rejected line."""
    summary.rejected += 1
    summary.problems.append(ImportProblem(line, wid or None, who or None, reason))


def _reject_label(summary: LabelImportSummary, key: _Key, label: _Label, reason: str) -> None:
    """Reject every line of a label: a bad row with its own reason, the others with `reason`."""
    for line in label.lines:
        _reject(summary, line, key[2], key[3], label.bad.get(line, reason))


def _bad_name(name: str) -> str | None:
    """Why an annotator name cannot be a user (None when it can)."""
    try:
        if clean_name(name) != name:
            return f"annotator name {name!r} has surrounding spaces"
    except UserError as exc:
        return f"annotator: {exc}"
    return None


def _check(engine: Engine, labels: dict[_Key, _Label], summary: LabelImportSummary) -> None:
    """Drop whole labels with a bad row, an unknown work, a bad annotator name, or two
    sources forced into one campaign; every line of a dropped label is rejected."""
    for key, label in list(labels.items()):
        if label.bad:
            line, why = min(label.bad.items())
            _reject_label(summary, key, label, f"part of a rejected label (line {line}: {why})")
            del labels[key]
    wanted = sorted({key[2] for key in labels})
    known: set[str] = set()
    with read_session(engine) as session:
        for i in range(0, len(wanted), _BATCH):
            chunk = wanted[i : i + _BATCH]
            known |= set(session.execute(select(Work.id).where(Work.id.in_(chunk))).scalars())
    sources: dict[tuple[str, str, str], set[str]] = {}
    for target, source, wid, who, _ in labels:
        sources.setdefault((target, wid, who), set()).add(source)
    for key, label in list(labels.items()):
        target, _, wid, who, _ = key
        problem = f"unknown work {wid}" if wid not in known else _bad_name(who)
        if problem is None and len(sources[(target, wid, who)]) > 1:
            names = ", ".join(repr(s) for s in sorted(sources[(target, wid, who)]))
            problem = (f"labels of {who} from campaigns {names} would both go into "
                       f"campaign '{target}' (import without --campaign)")  # fmt: skip
        if problem:
            _reject_label(summary, key, label, problem)
            del labels[key]


def _users(engine: Engine, labels: dict[_Key, _Label], summary: LabelImportSummary
           ) -> dict[str, int]:  # fmt: skip
    """Ids of the annotators by name, creating the missing ones (no password).

    A new name that renders like an existing user's (auth.users.check_new_name) creates no
    one: its labels are rejected, line by line, so no label is filed under a look-alike.
    """
    names = {k[3] for k in labels}
    refused: dict[str, str] = {}
    with write_session(engine) as session:
        found = dict(session.execute(select(User.name, User.id).where(User.name.in_(names))).all())
        for name in sorted(names - set(found)):
            try:
                check_new_name(session, name)
            except UserError as exc:
                refused[name] = f"annotator: {exc}"
                continue
            user = User(name=name, role="annotator", password_hash=None, active=True,
                        failed_logins=0, created_at=utcnow())  # fmt: skip
            session.add(user)
            session.flush()
            found[name] = user.id
            summary.users_created.append(name)
    for key in [k for k in labels if k[3] in refused]:
        _reject_label(summary, key, labels.pop(key), refused[key[3]])
    summary.problems.sort(key=lambda p: p.line)
    return found


def _campaign_ids(campaigns: _Campaigns, names: set[str], summary: LabelImportSummary
                  ) -> dict[str, int]:  # fmt: skip
    """Ids of the campaigns by name, creating the missing ones as manual campaigns."""
    ids = {}
    for name in sorted(names):
        info = campaigns.info(name)
        if info is None:
            info = get_or_create_campaign(campaigns.engine, name, strategy=MANUAL)
            summary.campaigns_created.append(name)
        ids[name] = info.id
    summary.campaigns = sorted(names)
    if summary.campaign is None and len(names) == 1:
        summary.campaign = summary.campaigns[0]
    return ids


def _submission_id(campaign_id: int, wid: str, who: str, answers: dict[str, Any],
                   version: int) -> str:  # fmt: skip
    """A deterministic submission id for an imported label's content (and version, if given:
    a file's history may hold the same answers twice)."""
    parts: list[Any] = [campaign_id, wid, who, answers] + ([version] if version else [])
    content = json.dumps(parts, sort_keys=True, ensure_ascii=False)
    return "imp-" + hashlib.sha256(content.encode("utf-8")).hexdigest()[:60]


def _store(engine: Engine, schema: Schema, labels: dict[_Key, _Label], users: dict[str, int],
           cids: dict[str, int], summary: LabelImportSummary) -> None:  # fmt: skip
    """Write the labels in batches (one transaction each), in key order: a file's versions
    of one label in version order."""
    keys = sorted(labels)
    for i in range(0, len(keys), _BATCH):
        batch = keys[i : i + _BATCH]
        with write_session(engine) as session:
            camps = {}
            for target in sorted({k[0] for k in batch}):
                cid = cids[target]
                camps[target] = session.connection().execute(_CAMPAIGN, {"cid": cid}).one()
                summary.works_added += add_items(session, cid, [k[2] for k in batch
                                                                if k[0] == target])  # fmt: skip
            touched: dict[tuple[str, str], None] = {}
            for key in batch:
                target, _, wid, who, version = key
                label, uid, camp = labels[key], users[who], camps[target]
                sid = _submission_id(camp.id, wid, who, label.answers, version)
                prev = _latest(session, camp.id, wid, uid)
                seen = session.execute(select(Label.id).where(Label.submission_id == sid)).first()
                if seen or (prev and not prev.skipped and prev.answers == label.answers):
                    summary.duplicates += 1
                    continue
                meta = {k: v for k, (v, _) in label.meta.items()}
                values = {
                    "answers": label.answers, "skipped": False, "flagged": False,
                    "note": None, "confidence": None, "time_on_item_ms": None,
                    "model_version": None, "scores_visible": None, **meta,
                    "schema_hash": meta.get("schema_hash", schema.hash), "source": "import",
                    "submission_id": sid, "created_at": meta.get("created_at") or utcnow(),
                }  # fmt: skip
                # The file's version is kept when it is newer than the stored ones: _record
                # writes prev.version + 1, so it is handed a stand-in previous version (the
                # same skipped state, so the label counts towards overlap as it should).
                if version > (prev.version if prev else 0) + 1:
                    prev = PreviousLabel(version - 1, prev.skipped if prev else True)
                _record(session, camp, wid, uid, prev, values, schema=None, evaluate=False)
                summary.imported += 1
                touched[(target, wid)] = None
            for target, wid in touched:
                cross = reevaluate_work(session, wid, camps[target], schema, None).cross
                if cross == VERDICT_CORROBORATED:
                    summary.corroborated += 1
                elif cross == VERDICT_DISPUTED:
                    summary.disputes_opened += 1


def import_labels(
    engine: Engine, path: str | Path, schema: Schema, *, campaign: str | int | None = None
) -> LabelImportSummary:
    """Import human labels from a long-format CSV, JSONL or Parquet file (idempotent).

    Args:
        engine: the database.
        path: .csv or .jsonl (optionally .gz) or .parquet, with columns work_id, annotator,
            question, value and optional campaign, version, created_at, confidence, note,
            time_on_item_ms, model_version, scores_visible, schema_hash, flagged (an export's
            --long file has them all). Value: a label name (single), yes/no (binary), ";"-separated
            label names (multi; empty = none chosen).
        schema: the label schema.
        campaign: name or id of the one campaign to file every label under (created if
            missing); None: each row's `campaign` cell, else "imported" (created if missing).
            Works not yet in a campaign are added to it.

    Returns:
        Counts of imported labels, duplicates (already present) and rejected lines, with
        every problem (line number, work id, reason).

    Raises:
        LabelError: a bad --campaign name, or a file that cannot be read (unknown type,
            missing columns, unreadable part-way); nothing is written then.
    """
    path = Path(path)
    started = utcnow()
    campaigns = _Campaigns(engine, schema, campaign)
    summary = LabelImportSummary(path=str(path), campaign=campaigns.forced)
    labels = _read(path, campaigns, summary)
    _check(engine, labels, summary)
    summary.problems.sort(key=lambda p: p.line)
    if labels:
        users = _users(engine, labels, summary)
        cids = _campaign_ids(campaigns, {k[0] for k in labels}, summary)
        _store(engine, schema, labels, users, cids, summary)
    with write_session(engine) as session:
        session.add(ImportRun(kind="labels", path=str(path), summary=summary.as_dict(),
                              started_at=started, finished_at=utcnow()))  # fmt: skip
    return summary
