"""A typed frame record built from the schema, decoded and checked in C by msgspec.

The model is at least as strict as check_record: a line it accepts is one check_record
accepts with no error, so only the lines it refuses need the detailed (and slower) checks
that word each rejection. Vector lengths come from the label lists, scores are numbers in
[0, 1] (a score vector is kept as its raw JSON and checked a chunk at a time: Vector),
strings and integers are bounded by their works columns (labeling/frames/limits.py), and
the id must be a work id that fits its column. Unknown fields are allowed and ignored;
the record stored is the line itself, so nothing is re-serialised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta
from msgspec.structs import astuple

from labeling.frames import checks
from labeling.frames.limits import COLUMN_SOURCES, column_rules
from labeling.schema import Schema

Unit = Annotated[float, Meta(ge=0.0, le=1.0)]
# Fields of the record format that nothing checks: known to the model, kept as their raw
# JSON, so that a seed-shaped record has no field the strict model does not know.
RAW_FIELDS = ("retraction", "screen")
NULL = msgspec.Raw(b"null")  # a raw field that is absent or null
UNKNOWN_FIELD = "Object contains unknown field"  # how the strict model refuses such a field
# JSON text can hold NUL only as this escape (a raw control byte is not JSON): such a line
# takes the detailed checks, which word the column it cannot be stored in.
NUL_ESCAPE = b"\\u0000"


@dataclass(frozen=True)
class Vector:
    """A score vector's place in the model: kept as its raw JSON, read a chunk at a time.

    labeling/frames/score_vectors.py reads and checks the vectors at one path of a chunk at
    once: the lengths and ranges the typed list once checked, without a Python float each.
    """

    width: int  # the question's labels


class ModelConflict(Exception):
    """The schema's paths cannot be one typed model (a path is both a value and an object)."""


def _text(column: str) -> Any:
    length = column_rules()[column].length
    return str if length is None else Annotated[str, Meta(max_length=length)]


def _integer(column: str) -> Any:
    rule = column_rules()[column]
    return Annotated[int, Meta(ge=rule.low, le=rule.high)]


def _id_type() -> Any:
    """A work id as check_record reads it, whose normalised form fits works.id."""
    length = column_rules()["id"].length
    digits = "+" if length is None else f"{{1,{length - 1}}}"
    return Annotated[str, Meta(pattern=rf"^(?:https?://openalex\.org/)?[Ww][0-9]{digits}$")]


def _leaf_types(schema: Schema, floor: bool = False) -> dict[str, Any]:
    """The type of every path check_record looks at, keyed by dotted path.

    floor: the model the bench's floor decodes with, as the issue defined it: score vectors
    as lists of range-checked floats, not Vector, and calls as any str, not a label.
    """
    column_of = {source: column for column, source in COLUMN_SOURCES.items()}
    types: dict[str, Any] = {}

    def put(path: str, kind: Any) -> None:
        if path in types and types[path] != kind:
            raise ModelConflict(f"{path}: two types")
        types[path] = kind

    for key in checks._STR_FIELDS:
        put(key, _text(key))
    for key in checks._INT_FIELDS:
        put(key, _integer(key))
    for key in checks._BOOL_FIELDS:
        put(key, bool)
    put("routes", dict[str, bool | None])
    put("direct_labels", msgspec.Raw)  # a list of anything: see RecordModel.raw
    for key in checks._PRED_UNIT:
        put(f"prediction.{key}", Unit)
    for key in checks._PRED_STR:
        path = f"prediction.{key}"
        put(path, _text(column_of[path]))
    for key in checks._MS_UNIT:
        put(f"machine_scores.{key}", Unit)
    for key in checks._MS_BOOL:
        put(f"machine_scores.{key}", bool)
    for key in checks._MS_STR:
        put(f"machine_scores.{key}", str)
    for q in schema.questions:
        n = len(q.labels)
        typed = Annotated[list[Unit], Meta(min_length=n, max_length=n)]
        vector = typed if floor else Vector(n)
        for path in q.scores.values():
            put(path, Unit if q.kind == "binary" else vector)
        call: Any = {"binary": bool, "single": str, "multi": list[str]}[q.kind]
        if not floor and q.kind != "binary":
            # A call must be one of the labels: msgspec then gives the label's own str
            # object, whose hash is known, and a line with any other call takes
            # check_record, which warns of it. batch_warnings 3.3 -> 2.1 us a line, the
            # decoding 9.1-9.8 -> 8.3-8.6 us (issue 16, twenty-eighth pass).
            label = Literal[tuple(q.labels)]  # type: ignore[valid-type]
            call = label if q.kind == "single" else list[label]  # type: ignore[valid-type]
        for path in q.calls.values():
            put(path, call)
    return types


@dataclass(frozen=True)
class RecordModel:
    """The record Struct type, its decoders, and where each dotted path is in a decoded one.

    `strict` refuses a field the model does not know (UNKNOWN_FIELD), at any level: every
    number of a record it accepts was read and range-checked, but for those in the raw
    fields (`raw`), direct_labels and RAW_FIELDS, whose JSON text is kept, and in the score
    vectors (`vectors`), whose text score_vectors reads and checks a chunk at a time.
    `decoder` skips unknown fields unread (the detailed checks do not look at them either).
    """

    decoder: msgspec.json.Decoder[Any]
    strict: msgspec.json.Decoder[Any]
    empty: dict[str, Any]  # dotted path of a nested Struct -> an instance with every field None
    types: dict[str, Any]  # dotted path of a value -> its type in the model
    levels: dict[str, tuple[str, ...]]  # dotted path of a Struct ("" the record) -> its paths
    raw: Any  # a decoded record -> the values of its raw fields (direct_labels first)
    vectors: dict[str, int] = field(default_factory=dict)  # dotted path of a Vector -> width

    def columns(self, records: Sequence[Any]) -> Columns:
        """Column access to a chunk of decoded records."""
        return Columns(self, records)


class Columns:
    """The values at dotted paths of a chunk of decoded records, each level read once."""

    def __init__(self, model: RecordModel, records: Sequence[Any]) -> None:
        self.model = model
        self.cache: dict[str, list[Any]] = {"": list(records)}
        self.derived: dict[str, Any] = {}  # what the checks build from columns, built once

    def __len__(self) -> int:
        return len(self.cache[""])

    def __getitem__(self, path: str) -> list[Any]:
        """The value at `path` of each record (None where absent or null)."""
        column = self.cache.get(path)
        if column is None:
            self._read_level(path.rpartition(".")[0])
            column = self.cache[path]
        return column

    def _read_level(self, parent: str) -> None:
        """Every path under `parent` at once: each record's fields as one tuple, in C, then
        the tuples turned into columns. Against a map a path 3.8 -> 2.6 us a line; astuple
        instead of an attrgetter of every field, 1.38 -> 0.51 us for the record's level."""
        paths = self.model.levels[parent]  # in the order of the Struct's fields
        tuples = map(astuple, self[parent])
        columns = [list(c) for c in zip(*tuples, strict=True)] or [[] for _ in paths]
        for path, column in zip(paths, columns, strict=True):
            empty = self.model.empty.get(path)
            if empty is not None:  # an absent object reads as one whose fields are all None
                column = [empty if v is None else v for v in column]
            self.cache[path] = column


def _struct(name: str, tree: dict[str, Any], model: dict[str, dict[str, Any]], path: str,
            strict: bool) -> Any:  # fmt: skip
    """A Struct for one level of the tree; keys become f0, f1... renamed to the JSON keys."""
    specs: list[Any] = []
    rename: dict[str, str] = {}
    for i, (key, node) in enumerate(tree.items()):
        attr = f"f{i}"
        rename[attr] = key
        sub = f"{path}.{key}" if path else key
        if isinstance(node, dict):
            kind = _struct(f"{name}_{i}", node, model, sub, strict)
            model["empty"][sub] = kind()
        else:
            kind = model["types"][sub] = node
        if isinstance(kind, Vector):  # kept as its raw JSON, null read as NULL
            specs.append((attr, msgspec.Raw, NULL))
            model["vectors"][sub] = kind.width
        elif sub == "id":
            specs.append((attr, kind))  # required: a record without one is rejected
        elif kind is msgspec.Raw:  # no union with None: null reads as NULL
            specs.append((attr, kind, NULL))
            model["raw"][sub] = attr
        else:
            specs.append((attr, kind | None, None))
    specs.sort(key=lambda spec: len(spec) != 2)  # required fields first
    # The level's paths in the Struct's own field order: astuple gives them so (Columns).
    model["levels"][path] = tuple(f"{path}.{rename[spec[0]]}" if path else rename[spec[0]]
                                  for spec in specs)  # fmt: skip
    return msgspec.defstruct(name, specs, rename=rename, forbid_unknown_fields=strict)


def _model(schema: Schema, floor: bool) -> RecordModel | None:
    try:
        leaves = _leaf_types(schema, floor)
    except ModelConflict:
        return None
    tree: dict[str, Any] = {"id": _id_type()}
    for path, kind in leaves.items():
        node = tree
        *parents, last = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                return None  # a value where an object is needed: no typed model
        if isinstance(node.get(last), dict):
            return None
        node[last] = kind
    for key in RAW_FIELDS:  # unless the schema reads something under it
        tree.setdefault(key, msgspec.Raw)
    lenient = _struct("Record", tree, _parts(), "", strict=False)
    parts = _parts()
    record = _struct("Record", tree, parts, "", strict=True)
    attrs = [parts["raw"][path] for path in sorted(parts["raw"], key="direct_labels".__ne__)]
    get = attrgetter(*attrs)
    raw = get if len(attrs) > 1 else lambda record: (get(record),)
    return RecordModel(msgspec.json.Decoder(lenient), msgspec.json.Decoder(record),
                       parts["empty"], parts["types"], parts["levels"], raw,
                       parts["vectors"])  # fmt: skip


def _parts() -> dict[str, dict[str, Any]]:
    return {"empty": {}, "types": {}, "levels": {}, "raw": {}, "vectors": {}}


_models: dict[tuple[str, bool], RecordModel | None] = {}


def record_model(schema: Schema, *, floor: bool = False) -> RecordModel | None:
    """The typed model of a schema's records (None: its paths cannot form one; check all).

    Args:
        schema: the schema whose paths and labels the model follows.
        floor: the model the bench's floor decodes with: each score vector a list of
            range-checked floats, and a call any str. The import's model (False) keeps a
            vector as raw JSON for score_vectors and takes only labels as calls: the same
            checks, or a line sent to check_record, for less of a worker's time.
    """
    key = (schema.hash, floor)
    if key not in _models:  # once per schema and process (a worker builds its own)
        _models[key] = _model(schema, floor)
    return _models[key]
