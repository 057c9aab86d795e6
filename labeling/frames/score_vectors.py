"""A chunk's score vectors read from their JSON text into one matrix, checked at once.

The record model keeps each score vector as its raw JSON (record_model.Vector): turning 72
numbers a record into Python floats and lists, then those into numpy, was a fifth of a
worker's time. Here the vectors at one path of a chunk are joined into one JSON document and
read by simdjson straight into doubles, then their lengths and ranges are checked with
numpy. Any vector that fails is found again one by one with the typed decoder, so that only
its record leaves the fast path (and check_record words why).
"""

from __future__ import annotations

import threading
from functools import cache
from typing import Annotated, Any

import msgspec
import numpy as np
import simdjson
from msgspec import Meta

from labeling.frames.record_model import NULL, Columns, Unit

_local = threading.local()


def _parser() -> simdjson.Parser:
    """This thread's parser, its buffer reused from chunk to chunk.

    One per thread: a parser refuses a new document while objects of the last one live, and
    imports may run in several threads of one process (the app's sessions).
    """
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = simdjson.Parser()
    return parser


def read_vectors(raws: list[Any], width: int) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """The vectors at one path of a chunk, as rows of a matrix.

    Args:
        raws: each record's vector as its raw JSON (msgspec.Raw), NULL where absent or null.
        width: the number of scores a vector must have (its question's labels).

    Returns:
        (matrix, present, bad): the vectors as rows (zeros where absent or bad), which
        records have one, and the positions of those that are not `width` numbers in [0, 1].
    """
    n = len(raws)
    if raws.count(NULL) == 0:  # the usual chunk: counted in C, without a mask built per value
        present, there = np.ones(n, bool), raws
    else:
        present = np.fromiter(map(NULL.__ne__, raws), bool, n)
        there = [r for r, p in zip(raws, present.tolist(), strict=True) if p]
    m = np.zeros((n, width))
    if not there:
        return m, present, []
    rows = _read_all(there, width)
    if rows is not None:
        m[present] = rows
        return m, present, []
    bad: list[int] = []
    decode = _decoder(width).decode
    for i in np.flatnonzero(present).tolist():
        try:
            m[i] = decode(raws[i])
        except msgspec.DecodeError:  # ValidationError among them
            bad.append(i)
            present[i] = False
    return m, present, bad


def _read_all(raws: list[Any], width: int) -> np.ndarray | None:
    """The vectors as a (len(raws), width) matrix, or None if any is not `width` scores.

    The document is [v1,2,v2,2,...,vk,2], read flat (simdjson flattens nested arrays) into
    k rows of width + 1. Every number outside the last column must be in [0, 1]: then the k
    2s, which are not scores, can only be the k numbers of the last column, one a row, so each
    vector has exactly `width` numbers. A nested array would pass that, so the document must
    have no bracket but the vectors' own; a bare number would too when width is 1, which
    always takes the slow way.
    """
    k = len(raws)
    if width < 2:
        return None
    # 2 ends every vector: not a score, so a vector of the wrong length moves one out of
    # the last column, where the range check finds it.
    doc = b"[" + b",2,".join(raws) + b",2]"
    if doc.count(b"[") != k + 1:
        return None
    try:
        parsed = _parser().parse(doc)
        try:
            assert isinstance(parsed, simdjson.Array)  # the document is one
            flat = np.frombuffer(parsed.as_buffer(of_type="d"), float)
        finally:
            del parsed  # the parser refuses the next document while it is referenced
    except (ValueError, TypeError, RuntimeError):  # not JSON numbers (simdjson says which)
        return None
    if flat.size != k * (width + 1):
        return None
    m = flat.reshape(k, width + 1)
    scores = m[:, :width]
    if not ((scores >= 0.0).all() and (scores <= 1.0).all()):
        return None
    return scores


@cache
def _decoder(width: int) -> msgspec.json.Decoder[Any]:
    """The typed decoder of one vector, as the model once decoded every vector."""
    vector = Annotated[list[Unit], Meta(min_length=width, max_length=width)]
    return msgspec.json.Decoder(vector)


def matrix_key(path: str) -> str:
    """Where a path's matrix and presence mask are kept in Columns.derived."""
    return f"{path}#matrix"


def read_chunk_vectors(cols: Columns) -> list[int]:
    """Read every score vector of a chunk into cols.derived; the records with a bad one.

    Those records are not what the typed model accepts: the caller sends them to
    check_record and reads the others again.
    """
    bad: set[int] = set()
    for path, width in cols.model.vectors.items():
        m, present, wrong = read_vectors(cols[path], width)
        cols.derived[matrix_key(path)] = (m, present)
        bad.update(wrong)
    return sorted(bad)
