"""Parsing and checking a frame's lines, in worker processes or in the importer's own.

Everything here is a pure function of the bytes and the schema, so it runs in worker
processes as well as in the importer's own.
"""

from __future__ import annotations

import atexit
import codecs
import hashlib
import json
import math
import re
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import msgspec
import orjson
from sqlalchemy import Connection, Engine

from db.bulk import RowEncoder
from db.engine import EngineSpec
from db.staging import StageWriter
from labeling import collector
from labeling.frames.checks import check_record, normalize_work_id, score_paths
from labeling.frames.frame_file import Chunk, FrameReadError, SpanReadError, renumber
from labeling.frames.known import Known, known_hashes
from labeling.frames.machine_columns import MachinePlan, machine_digest, machine_hash, machine_plan
from labeling.frames.store import add_rows
from labeling.frames.typed import typed_chunk
from labeling.schema import Schema

MAX_VALUE_PROBLEMS = 3
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")


class Parsed(msgspec.Struct, gc=False):
    """One line after parsing and checking (in a worker): what the writer needs.

    A msgspec Struct, not a dataclass: it is built and pickled in C. A worker builds one a
    line and sends them back pickled; as a slots dataclass with its own __reduce__, the
    pickling took 8.1 us a line, 3.8 us as a Struct (issue 16, thirteenth pass). Untracked
    by the cycle collector (gc=False): it only holds values decoded from a line.
    """

    line: int
    work_id: str | None
    errors: list[str]
    warnings: list[str]
    columns: dict[str, Any] | None = None
    text: str | None = None
    digest: str | None = None
    binary: bool = False  # not UTF-8 text at all
    array: bool = False  # looks like the start of a JSON array (a frame is JSON Lines)
    known: bool = False  # the line is the stored record (same sha256): not decoded
    # The works row ready to insert, built by the worker (db.bulk.RowEncoder): a tuple on
    # SQLite, a binary COPY row on PostgreSQL, the record packed in both. It replaces
    # `columns` and `text`, as it holds the record: see store.add_rows.
    row: Any = None


def not_text(line: bytes) -> str | None:
    """Why a raw line is not UTF-8 text (None when it is): binary data, UTF-16, control bytes.

    JSON allows no raw control character other than tab, CR and LF anywhere in a line, so
    such a byte means the line is not JSON text at all, as does invalid UTF-8.
    """
    control = _CONTROL.search(line)
    if control:
        at = control.start()
        return f"not text: control byte 0x{line[at]:02x} at column {at + 1}"
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text: byte 0x{line[exc.start]:02x} at column {exc.start + 1}"
    return None


def starts_json_array(line: bytes) -> bool:
    """Whether a (first) line opens a JSON array of objects rather than holding one object."""
    text = line.strip()
    if not text.startswith(b"["):
        return False
    rest = text[1:].lstrip()
    return rest in (b"", b"]") or rest.startswith(b"{")


class _Token:
    """A NaN / Infinity / overflowing number literal, kept as written."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _float_or_token(text: str) -> Any:
    value = float(text)
    return value if math.isfinite(value) else _Token(text)


def nonfinite_errors(line: bytes, scores: frozenset[str]) -> tuple[str | None, list[str]] | None:
    """For a line that is JSON but for NaN / Infinity literals: its id and a message per value.

    None when the line has no such value (then it is invalid JSON for another reason).
    """
    try:
        rec = json.loads(line, parse_constant=_Token, parse_float=_float_or_token)
    except (ValueError, RecursionError):
        return None
    found: list[str] = []
    stack: list[tuple[str, str, Any]] = [("", "", rec)]
    while stack and len(found) < MAX_VALUE_PROBLEMS:
        path, base, node = stack.pop()
        if isinstance(node, _Token):
            if base in scores:
                found.append(f"{path}: score {node.text}: a number in [0, 1] expected")
            else:
                found.append(f"{path or 'the line'}: {node.text} is not a JSON number")
        elif isinstance(node, dict):
            for key, value in reversed(node.items()):
                sub = f"{path}.{key}" if path else str(key)
                stack.append((sub, sub, value))
        elif isinstance(node, list):
            # A vector element is named by index but judged by its vector's path.
            stack.extend((f"{path}[{i}]", base, v) for i, v in reversed(list(enumerate(node))))
    if not found:
        return None
    work_id = normalize_work_id(rec.get("id")) if isinstance(rec, dict) else None
    return work_id, found


_worker_schema: Schema | None = None
_worker_encoder: RowEncoder | None = None
_worker_spec: EngineSpec | None = None
_worker_engine: Engine | None = None
_worker_conn: Connection | None = None  # autocommit, for the stored-hash lookups
_worker_stage: StageWriter | None = None


def init_worker(
    schema: Schema,
    encoder: RowEncoder | None = None,
    spec: EngineSpec | None = None,
    stage_dir: str | None = None,
) -> None:
    """Give a worker process the schema, row encoder and database once (pool initializer).

    stage_dir: the rows it builds are staged there (db/staging.py), not sent back.
    """
    global _worker_schema, _worker_encoder, _worker_spec, _worker_engine, _worker_conn
    global _worker_stage
    _worker_schema, _worker_encoder, _worker_spec = schema, encoder, spec
    _worker_engine = _worker_conn = None
    _worker_stage = None
    if stage_dir is not None and encoder is not None:
        _worker_stage = StageWriter(stage_dir, encoder.keys)


def parse_chunk_in_worker(
    chunk: Chunk, known: Known | None = None, look_up: bool = False, group: int = -1
) -> tuple[list[Parsed], int]:
    """parse_chunk with the worker's schema and row encoder, and the chunk's number of lines.

    look_up: the worker reads the stored hashes of the chunk's ids itself (known_hashes, on
    a connection of its own), so that the lookups of an unchanged re-import run in the workers, in
    parallel, rather than in the importing process.
    """
    global _worker_engine, _worker_conn
    assert _worker_schema is not None
    if not isinstance(chunk, list):
        chunk = chunk.lines()
    if look_up:
        assert _worker_spec is not None
        if _worker_conn is None:
            _worker_engine = _worker_spec.build()
            atexit.register(_worker_engine.dispose)  # close its connections as the worker ends
            _worker_conn = _worker_engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            atexit.register(_worker_conn.close)  # registered last: runs before the dispose
        known = known_hashes(_worker_conn, chunk, _plan_for(_worker_schema)[1])
    parsed = parse_chunk(chunk, _worker_schema, known, _worker_encoder)
    if _worker_stage is not None and group >= 0:
        built = [p for p in parsed if p.row is not None]
        refs = _worker_stage.put(group, [p.row for p in built])
        for p, ref in zip(built, refs, strict=True):
            p.row = ref
    return parsed, len(chunk)


def _unparsable(number: int, line: bytes, exc: Exception, schema: Schema) -> Parsed:
    """A line orjson refused: binary, a JSON array's start, NaN / Infinity, or invalid JSON."""
    array = starts_json_array(line)  # the writer asks only of the first non-blank line
    utf16 = number == 1 and line.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
    reason = "UTF-16 text (byte order mark), not UTF-8" if utf16 else not_text(line)
    if reason:
        return Parsed(number, None, [reason], [], binary=True, array=array)
    named = nonfinite_errors(line, _paths_for(schema))
    if named is not None:
        return Parsed(number, named[0], named[1], [], array=array)
    return Parsed(number, None, [f"invalid JSON: {exc}"], [], array=array)


def parse_chunk(
    chunk: list[tuple[int, bytes]],
    schema: Schema,
    known: Known | None = None,
    encoder: RowEncoder | None = None,
) -> list[Parsed]:
    """Parse and check raw lines; blank lines are dropped, a BOM before line 1 is too.

    A line in `known` whose sha256 is its stored hash is not decoded: it comes back as a
    known line with its stored warnings (see labeling/frames/known.py). With an encoder,
    each accepted line also gets its works row, ready to insert.
    """
    with collector.paused():  # thousands of lists of floats and no cycle: no need to scan
        parsed = _parse_chunk(chunk, schema, known, encoder)
        if encoder is not None:  # the lines the typed path did not take
            add_rows(parsed, encoder)
        return parsed


def _parse_chunk(
    chunk: list[tuple[int, bytes]], schema: Schema, known: Known | None,
    encoder: RowEncoder | None,
) -> list[Parsed]:  # fmt: skip
    out: list[Parsed | None] = []
    todo: list[tuple[int, bytes]] = []  # (line number, stripped line), to decode
    slots: list[int] = []  # where each of them goes in out
    digests: dict[int, str] = {}  # computed for a known id whose line changed
    for number, line in chunk:
        if number == 1:  # a UTF-8 byte order mark, as some editors write, is not data
            line = line.removeprefix(codecs.BOM_UTF8)
        line = line.strip()
        if not line:
            continue
        if known and number in known:
            work_id, stored_hash, stored_warnings = known[number]
            digest = hashlib.sha256(line).hexdigest()
            if digest == stored_hash:
                out.append(Parsed(number, work_id, [], stored_warnings, digest=digest, known=True))
                continue
            digests[number] = digest
        slots.append(len(out))
        out.append(None)
        todo.append((number, line))
    fast_lines = typed_chunk(todo, schema, encoder)
    text_in_row = encoder is not None  # see add_rows
    for slot, (number, line), fast in zip(slots, todo, fast_lines, strict=True):
        if fast is not None:
            work_id, columns, warnings, text, digest, row = fast
            if text_in_row:
                text = None
            out[slot] = Parsed(number, work_id, [], warnings, columns, text, digest, row=row)
        else:
            out[slot] = _parse_line(number, line, schema, digests.get(number))
    return [p for p in out if p is not None]


def _parse_line(number: int, line: bytes, schema: Schema, digest: str | None) -> Parsed:
    """One stripped line through orjson and check_record: every rejection in detail."""
    plan, plan_hash = _plan_for(schema)
    try:
        rec = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return _unparsable(number, line, exc, schema)
    checked = check_record(rec, schema)
    if checked.errors or checked.columns is None:
        array = isinstance(rec, list) and starts_json_array(line)
        return Parsed(number, checked.work_id, checked.errors, [], array=array)
    assert checked.work_id is not None
    columns = checked.columns
    columns["machine"], columns["machine_hash"] = machine_digest(plan, rec), plan_hash
    columns["import_warnings"] = orjson.dumps(checked.warnings).decode()
    text, digest = line.decode("utf-8"), digest or hashlib.sha256(line).hexdigest()
    return Parsed(number, checked.work_id, [], checked.warnings, columns, text, digest)


_plans: dict[str, tuple[MachinePlan, str, frozenset[str]]] = {}


def _cached(schema: Schema) -> tuple[MachinePlan, str, frozenset[str]]:
    """The schema's machine plan, its hash and its score paths (once per schema and process)."""
    if schema.hash not in _plans:
        _plans[schema.hash] = (machine_plan(schema), machine_hash(schema), score_paths(schema))
    return _plans[schema.hash]


def _plan_for(schema: Schema) -> tuple[MachinePlan, str]:
    plan, plan_hash, _ = _cached(schema)
    return plan, plan_hash


def _paths_for(schema: Schema) -> frozenset[str]:
    return _cached(schema)[2]


class Groups:
    """Cuts the chunks sent to the workers into staging groups of about `lines` lines each.

    The importing process reads a group's staged rows once every chunk of it has come back
    (db/staging.py), and a transaction reads the files of at most a few groups, so a group
    stands for the import's batch size. Chunks are cut by bytes, and their lines are counted
    by the workers: a chunk's lines are guessed from those counted so far (at first, lines
    of LINE_BYTES). lines=0: no groups, every chunk is in group -1.
    """

    LINE_BYTES = 3000

    def __init__(self, lines: int, chunk_bytes: int) -> None:
        self.lines, self.guess = lines, max(1.0, chunk_bytes / self.LINE_BYTES)
        self.group, self.in_group = 0, 0  # the current group and its chunks so far
        self.counted = self.chunks = 0  # lines counted by the workers, in how many chunks

    def next(self) -> int:
        """The group of the next chunk."""
        if not self.lines:
            return -1
        per_chunk = self.counted / self.chunks if self.chunks else self.guess
        if self.in_group and (self.in_group + 1) * per_chunk > self.lines:
            self.group, self.in_group = self.group + 1, 0
        self.in_group += 1
        return self.group

    def count(self, lines: int) -> None:
        """A chunk came back with this many lines."""
        self.counted += lines
        self.chunks += 1


def parse_in_pool(
    pool: ProcessPoolExecutor, chunks: Iterator[tuple[Chunk, int]], workers: int,
    look_up: bool, groups: Groups | None = None,
) -> Iterator[tuple[list[Parsed], int, int]]:  # fmt: skip
    """Parse chunks in the pool, in order, with a bounded number in flight (bounded memory).

    Yields each chunk's lines, the bytes read so far and the chunk's staging group (-1: its
    rows are not staged; see Groups). The lines of a Span come back numbered from its start:
    they are renumbered here, in file order, as is a worker's failure to read one (see
    frame_file.Span).
    """
    groups = groups or Groups(0, 1)
    pending: deque[tuple[Any, Chunk, int, int]] = deque()
    first = 1  # the number of the next chunk's first line

    def result() -> tuple[list[Parsed], int, int]:
        nonlocal first
        future, chunk, pos, group = pending.popleft()
        try:
            parsed, count = future.result()
        except SpanReadError as exc:  # a worker's own read error stops here, with its line
            where = f"{exc.path}: cannot read frame at line {first}"
            raise FrameReadError(f"{where} ({exc.detail})") from exc
        renumber(parsed, chunk, first)
        first += count
        groups.count(count)
        return parsed, pos, group

    while True:
        try:
            chunk, pos = next(chunks)
        except StopIteration:
            break
        except FrameReadError:  # reading failed: the lines read before it are still imported
            while pending:
                yield result()
            raise
        group = groups.next()
        future = pool.submit(parse_chunk_in_worker, chunk, None, look_up, group)
        pending.append((future, chunk, pos, group))
        if len(pending) >= 4 * workers:
            yield result()
    while pending:
        yield result()
