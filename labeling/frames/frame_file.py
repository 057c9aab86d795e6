"""Reading a frame file: opening it (plain or gzip) and cutting it into chunks of lines.

A plain file is read in Blocks, or cut into Spans that the workers read themselves (see
Span); a gzipped one is read line by line, in chunks.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, NamedTuple

from labeling.errors import InputError

CHUNK_LINES = 500
# A worker's share at a time. 2 MB spans (about 690 lines here) against 0.5 MB: fewer chunks to
# send, number, stage and commit. A 1M import, side by side: SQLite 33.4 -> 30.4 s and
# 31.5 -> 29.9 s, PostgreSQL 48.5 -> 43.2 s and 44.7 -> 42.8 s; 1 MB and 4 MB were slower than 2
# (bench/RESULTS.md, issue 16, twentieth pass). Parsed, a span comes back as 3.0 MB pickled
# with its rows (PostgreSQL), 72 KB when they are staged (SQLite): the result pipe holds the
# larger whole (labeling/processes.py, RESULT_PIPE_BYTES).
BLOCK_BYTES = 1 << 21


class FrameReadError(InputError):
    """The frame file cannot be opened or read (not a per-line problem)."""


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
