"""The fast path of a chunk: lines decoded into the typed model, then checked all at once.

A line takes it only if nothing about it needs a detailed message: valid UTF-8, accepted
by the typed model, no number that orjson (the detailed path) would refuse, no NUL (which
a text column cannot store). Every other line gets None and goes through check_record,
which words why.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from operator import methodcaller
from typing import Any

import msgspec
import orjson

from db.bulk import RowEncoder
from db.models import utcnow
from labeling.frames.batch_checks import batch_columns, batch_machine, batch_warnings
from labeling.frames.machine_columns import machine_hash
from labeling.frames.record_model import NUL_ESCAPE, NULL, UNKNOWN_FIELD, record_model
from labeling.frames.score_vectors import read_chunk_vectors
from labeling.schema import Schema

# Digits become "0" and "E" becomes "e" (a "+" is dropped), so that two searches find every
# number literal too large for a double: orjson refuses those, msgspec skips them in fields
# the model ignores. A string like "1e100" only sends its line the slow way.
_NUMBERS = bytes.maketrans(b"123456789E", b"000000000e")
# An exponent of three digits or more, ending where a JSON number ends (a comma, a bracket,
# a brace or whitespace). Without the ending, a hex digest inside a string matched: the real frame's
# model version "metacan-v3-hybrid-931329e0061c" sent every line of it the slow way (a 200k
# frame with it: 14.5 s against 11.2 s). The literal "e000" leads, so that re finds it
# with a fast scan (the search takes the same time as the literal's alone).
_EXPONENT = re.compile(rb"e000+[,}\] \t\r\n]").search
_LONG_INTEGER = b"0" * 200  # 1e308 needs 209 digits before the point with a 2-digit exponent
EMPTY_LIST = msgspec.Raw(b"[]")  # a list (as direct_labels must be) without a number
_HEX = methodcaller("hexdigest")


def _may_overflow(line: bytes) -> bool:
    """Whether a line may hold a number literal beyond the range of a double."""
    digits = line.translate(_NUMBERS, b"+")
    return _EXPONENT(digits) is not None or _LONG_INTEGER in digits


def _raw_ok(values: tuple[Any, ...]) -> bool:
    """Whether a record's raw fields are as check_record takes them: direct_labels (first) a
    list or null, and no number in any of them too large for a double."""
    for i, value in enumerate(values):
        if value == NULL or value == EMPTY_LIST:  # the usual values (real frames' too)
            continue
        text = bytes(value) + b" "  # a number ends where the value ends: _EXPONENT needs an end
        if (i == 0 and text[:1] != b"[") or _may_overflow(text):
            return False
    return True


def typed_chunk(
    lines: list[tuple[int, bytes]],
    schema: Schema,
    encoder: RowEncoder | None = None,
    now: datetime | None = None,
) -> list[Any]:
    """For each stripped line: (work id, columns, warnings, text, digest, row), or None.

    None: the line takes check_record. With an encoder, an accepted line comes with its
    works row (stamped `now`, default the current time), and no columns dict or text.
    """
    model = record_model(schema)
    if model is None:
        return [None] * len(lines)
    out: list[Any] = [None] * len(lines)
    records, where, texts = [], [], []
    strict, lenient, raw = model.strict.decode, model.decoder.decode, model.raw
    for i, (_, line) in enumerate(lines):
        # With an encoder the row holds the line's bytes and no text is kept: only whether
        # the line is UTF-8 matters, which an ASCII line is (decoding it took 1.1 us).
        text = None
        try:
            if encoder is None:
                text = line.decode("utf-8")
            elif not line.isascii():
                line.decode("utf-8")
        except UnicodeDecodeError:
            continue
        # A backslash first: one byte is found with memchr, the escape took 2.3 us a line.
        if b"\\" in line and NUL_ESCAPE in line:
            continue  # NUL: a text column may not store it, and check_record says which
        try:
            record = strict(line)
        except msgspec.ValidationError as exc:
            # A field the model does not know: its numbers were skipped unread. Scanning
            # every line for them instead took 4.4 us of a line's 10.6 (with the decoding).
            if not str(exc).startswith(UNKNOWN_FIELD) or _may_overflow(line):
                continue
            try:
                record = lenient(line)
            except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
                continue
        except (msgspec.DecodeError, RecursionError):
            continue
        if not _raw_ok(raw(record)):
            continue
        records.append(record)
        where.append(i)
        texts.append(text)
    if not records:
        return out
    values = model.columns(records)
    bad = read_chunk_vectors(values)
    if bad:  # a score vector the model refuses: check_record words why
        drop = set(bad)
        keep = [j for j in range(len(records)) if j not in drop]
        records = [records[j] for j in keep]
        where = [where[j] for j in keep]
        texts = [texts[j] for j in keep]
        if not records:
            return out
        values = model.columns(records)
        read_chunk_vectors(values)
    n = len(records)
    columns = batch_columns(values)
    warnings = batch_warnings(schema, values)
    # Text as orjson's bytes where the encoder takes them so (no decoding, then encoding).
    utf8 = encoder is not None and encoder.utf8_text
    columns["machine"] = batch_machine(schema, values, utf8)
    columns["machine_hash"] = [machine_hash(schema)] * n
    dumps = map(orjson.dumps, warnings)
    columns["import_warnings"] = list(dumps) if utf8 else [w.decode() for w in dumps]
    accepted = [lines[i][1] for i in where]
    digests = list(map(_HEX, map(hashlib.sha256, accepted)))
    ids = columns["id"]
    if encoder is not None:
        # The record is the line itself, as its bytes (the encoder takes them).
        columns["record"], columns["record_hash"] = accepted, digests
        rows = encoder.encode_columns(columns, n, now or utcnow())
        for j, i in enumerate(where):
            out[i] = (ids[j], None, warnings[j], None, digests[j], rows[j])
        return out
    names = list(columns)
    for j, (i, row) in enumerate(zip(where, zip(*columns.values(), strict=True), strict=True)):
        out[i] = (ids[j], dict(zip(names, row, strict=True)), warnings[j], texts[j], digests[j],
                  None)  # fmt: skip
    return out
