"""Reading a frame: opening it (plain or gzip), chunking its lines, parsing and checking each.

Everything here is a pure function of the bytes and the schema, so it runs in worker
processes as well as in the importer's own.
"""

from __future__ import annotations

import atexit
import codecs
import gzip
import hashlib
import json
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, NamedTuple

import msgspec
import orjson
from sqlalchemy import Connection, Engine

from db.bulk import RowEncoder
from db.engine import EngineSpec
from labeling import collector
from labeling.errors import InputError
from labeling.frames.checks import check_record, normalize_work_id, score_paths
from labeling.frames.known import Known, known_hashes
from labeling.frames.machine_columns import MachinePlan, machine_digest, machine_hash, machine_plan
from labeling.frames.store import add_rows
from labeling.frames.typed import typed_chunk
from labeling.schema import Schema

CHUNK_LINES = 500
BLOCK_BYTES = 1 << 20
MAX_VALUE_PROBLEMS = 3
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")


class FrameReadError(InputError):
    """The frame file cannot be opened or read (not a per-line problem)."""


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
    # SQLite (the record packed), a binary COPY row on PostgreSQL. It replaces `columns` and
    # `text`, as it holds the record: see store.add_rows.
    row: Any = None


def _open(path: Path) -> tuple[IO[bytes], IO[bytes] | gzip.GzipFile]:
    """Open raw and (maybe) decompressed streams; gzip is recognised by its magic bytes."""
    try:
        raw = path.open("rb")
    except OSError as exc:
        raise FrameReadError(f"{path}: cannot open frame ({exc.strerror or exc})") from exc
    if raw.read(2) == b"\x1f\x8b":
        raw.seek(0)
        return raw, gzip.GzipFile(fileobj=raw, mode="rb")
    raw.seek(0)
    return raw, raw


class Block(NamedTuple):
    """Whole lines of a plain frame as read, split into lines by whoever parses them.

    The importing process only finds the last newline of each block it reads and counts
    the lines; a worker splits them (the split and the pickling of one bytes object
    instead of hundreds of lines were 8-14 s of a 1M import's importing process).
    """

    first: int  # the number of its first line
    data: bytes  # the lines joined by b"\n" (no newline at the end)

    def lines(self) -> list[tuple[int, bytes]]:
        """(line number, raw line) of each line, without its newline."""
        return list(enumerate(self.data.split(b"\n"), start=self.first))


# The number a worker gives the first line of a span whose lines were not counted (see
# Span): any number but 1, which only the file's first line may have (a byte order mark).
UNCOUNTED_FIRST = 2
# Bytes read at a time to find where a span ends (a line is about 3 KB).
PROBE_BYTES = 16 * 1024


class SpanReadError(FrameReadError):
    """A worker could not read its span (`detail`: why); the importing process words it
    again with the number of the span's first line (see Span)."""

    def __init__(self, path: str, where: str, detail: str) -> None:
        super().__init__(f"{path}: cannot read frame {where} ({detail})")
        self.path, self.where, self.detail = path, where, detail

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled with its own arguments: it comes back from a worker (pickled) to be
        raised again."""
        return SpanReadError, (self.path, self.where, self.detail)


class Span(NamedTuple):
    """Whole lines of a plain frame as a range of the file, read by the worker parsing them.

    The importing process reads only around each span's end, to find the newline there:
    piping the 3 GB of a 1M frame to the workers cost more than their own reading of it from
    the page cache, and reading it all in the importing process to count its lines took 2.5
    core-seconds of that process, the busiest (bench/RESULTS.md, issue 16, seventeenth
    pass). So only the first span's first line is known (1): a worker numbers the lines of
    any other from UNCOUNTED_FIRST and says how many there are, and the importing process
    renumbers them in file order (renumber).
    """

    first: int | None  # the number of its first line, None: not counted
    path: str
    offset: int  # of its first byte in the file
    length: int  # its bytes, without the newline after its last line

    def lines(self) -> list[tuple[int, bytes]]:
        """(line number, raw line) of each line, read from the file."""
        where = f"at line {self.first}" if self.first else f"at byte {self.offset}"
        try:
            with open(self.path, "rb") as f:
                data = os.pread(f.fileno(), self.length, self.offset)
        except OSError as exc:
            raise SpanReadError(self.path, where, str(exc.strerror or exc)) from exc
        if len(data) != self.length:  # the file shrank since the importing process read it
            raise SpanReadError(self.path, where, "the file changed while it was imported")
        return list(enumerate(data.split(b"\n"), start=self.first or UNCOUNTED_FIRST))


def renumber(parsed: list[Any], chunk: Any, first: int) -> None:
    """Give a chunk's parsed lines their numbers in the file, its first line being `first`
    (only an uncounted Span's lines need it; see Span)."""
    if isinstance(chunk, Span) and chunk.first is None and first != UNCOUNTED_FIRST:
        shift = first - UNCOUNTED_FIRST
        for p in parsed:
            p.line += shift


Chunk = list[tuple[int, bytes]] | Block | Span


def iter_chunks(
    path: Path, size: int = CHUNK_LINES
) -> Iterator[tuple[list[tuple[int, bytes]], int]]:
    """Yield chunks of (line number, raw line) and the bytes of the file read so far.

    When reading fails part-way (a truncated gzip), the lines read before the failure are
    yielded first, then FrameReadError names the last line read.
    """
    for chunk, pos in iter_blocks(path, size):
        yield (chunk if isinstance(chunk, list) else chunk.lines()), pos


def iter_blocks(
    path: Path, size: int = CHUNK_LINES, *, spans: bool = False
) -> Iterator[tuple[Chunk, int]]:
    """iter_chunks, but a plain file comes as Blocks of about BLOCK_BYTES, not split.

    spans: as Spans of the file instead of Blocks (for workers that read it themselves).
    """
    raw, stream = _open(path)
    if stream is raw:  # plain text: big blocks (a third of the cost of line by line)
        try:
            yield from (_spans(path, raw) if spans else _blocks(path, raw))
        finally:
            raw.close()
        return
    chunk: list[tuple[int, bytes]] = []
    number = 0
    try:
        for number, line in enumerate(stream, start=1):
            chunk.append((number, line))
            if len(chunk) >= size:
                yield chunk, raw.tell()
                chunk = []
        if chunk:
            yield chunk, raw.tell()
    except (OSError, EOFError, gzip.BadGzipFile, UnicodeError) as exc:
        if chunk:
            yield chunk, raw.tell()
        where = f"after line {number}" if number else "at its start"
        raise FrameReadError(f"{path}: cannot read frame {where} ({exc})") from exc
    finally:
        stream.close()
        raw.close()


def _blocks(path: Path, raw: IO[bytes]) -> Iterator[tuple[Block, int]]:
    """The whole lines of a plain file, a block at a time (a line may span blocks)."""
    number, tail = 0, b""
    try:
        while block := raw.read(BLOCK_BYTES):
            data = tail + block if tail else block
            cut = data.rfind(b"\n")
            if cut < 0:  # no line ends in it yet
                tail = data
                continue
            whole, tail = data[:cut], data[cut + 1 :]
            first, number = number + 1, number + whole.count(b"\n") + 1
            yield Block(first, whole), raw.tell()
        if tail:  # the last line, without a newline at the end of the file
            number += 1
            yield Block(number, tail), raw.tell()
    except OSError as exc:
        where = f"after line {number}" if number else "at its start"
        raise FrameReadError(f"{path}: cannot read frame {where} ({exc})") from exc


def _spans(path: Path, raw: IO[bytes]) -> Iterator[tuple[Span, int]]:
    """The whole lines of a plain file as Spans of about BLOCK_BYTES (a line may be longer).

    A span ends at the first newline from BLOCK_BYTES on; only that much of the file is
    read here (PROBE_BYTES at a time), and its lines are not counted (see Span).
    """
    start, name, fd = 0, str(path), raw.fileno()
    try:
        while True:
            at, cut = start + BLOCK_BYTES - 1, -1
            while cut < 0 and (probe := os.pread(fd, PROBE_BYTES, at)):
                found = probe.find(b"\n")
                cut = at + found if found >= 0 else -1
                at += len(probe)
            if cut < 0:  # the end of the file: the last lines, maybe without a newline
                end = min(at, os.fstat(fd).st_size)
                if end > start:
                    ends_line = os.pread(fd, 1, end - 1) == b"\n"
                    yield Span(None if start else 1, name, start, end - start - ends_line), end
                return
            yield Span(None if start else 1, name, start, cut - start), cut + 1
            start = cut + 1
    except OSError as exc:
        raise FrameReadError(f"{path}: cannot read frame at byte {start} ({exc})") from exc


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


def init_worker(
    schema: Schema, encoder: RowEncoder | None = None, spec: EngineSpec | None = None
) -> None:
    """Give a worker process the schema, row encoder and database once (pool initializer)."""
    global _worker_schema, _worker_encoder, _worker_spec, _worker_engine, _worker_conn
    _worker_schema, _worker_encoder, _worker_spec = schema, encoder, spec
    _worker_engine = _worker_conn = None


def parse_chunk_in_worker(
    chunk: Chunk, known: Known | None = None, look_up: bool = False
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
    return parse_chunk(chunk, _worker_schema, known, _worker_encoder), len(chunk)


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
