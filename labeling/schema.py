"""The label schema: questions, labels, codebook definitions and score paths, from TOML."""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from labeling.errors import InputError

KINDS = ("multi", "single", "binary")
BINARY_LABELS = ("yes", "no")
_MISSING = object()


class SchemaError(InputError):
    """A schema file that cannot be used; the message names file, question and problem."""


@dataclass(frozen=True)
class Question:
    """One question annotators answer, and where the teachers' view of it lives."""

    name: str
    kind: str
    labels: tuple[str, ...]
    prompt: str = ""
    definition: str = ""
    label_definitions: dict[str, str] = field(default_factory=dict)
    scores: dict[str, str] = field(default_factory=dict)
    calls: dict[str, str] = field(default_factory=dict)
    threshold: float = 0.5
    key: str | None = None

    def definition_of(self, label: str) -> str:
        """The codebook text of one label ("" when the schema has none)."""
        return self.label_definitions.get(label, "")


@dataclass(frozen=True)
class Schema:
    """A loaded, validated schema with its content hash."""

    questions: tuple[Question, ...]
    version: str
    teachers: tuple[str, ...]
    hash: str
    path: str

    def question(self, name: str) -> Question:
        """The question called `name` (KeyError if the schema has none)."""
        for q in self.questions:
            if q.name == name:
                return q
        raise KeyError(name)

    @property
    def names(self) -> list[str]:
        """Question names in schema order."""
        return [q.name for q in self.questions]


@lru_cache(maxsize=1024)
def _split(dotted: str) -> tuple[str, ...]:
    return tuple(dotted.split("."))


def get_path(record: dict[str, Any], dotted: str, default: Any = None) -> Any:
    """The value at a dotted path of a nested dict, or `default` when any step is missing."""
    node: Any = record
    for part in _split(dotted):
        if type(node) is not dict:
            return default
        node = node.get(part, _MISSING)
        if node is _MISSING:
            return default
    return node


def has_path(record: dict[str, Any], dotted: str) -> bool:
    """Whether the dotted path exists in the record (even with a null value)."""
    return get_path(record, dotted, _MISSING) is not _MISSING


def load_schema(path: str | Path) -> Schema:
    """Read and validate a schema TOML file; raise SchemaError naming what is wrong."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SchemaError(f"{path}: cannot read schema file ({exc.strerror or exc})") from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise SchemaError(f"{path}: schema file is not UTF-8 ({exc.reason})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SchemaError(f"{path}: not valid TOML: {exc}") from exc
    return parse_schema(data, source=str(path))


def parse_schema(data: dict[str, Any], *, source: str = "<schema>") -> Schema:
    """Validate parsed TOML data and build a Schema."""
    questions_raw = data.get("question")
    if not isinstance(questions_raw, list) or not questions_raw:
        raise SchemaError(f"{source}: no [[question]] entries")
    teachers = data.get("teachers", ["codex", "gemma"])
    if not isinstance(teachers, list) or not all(isinstance(t, str) for t in teachers):
        raise SchemaError(f"{source}: 'teachers' must be a list of names")
    questions: list[Question] = []
    seen: set[str] = set()
    for i, q in enumerate(questions_raw, start=1):
        question = _parse_question(q, i, source)
        if question.name in seen:
            raise SchemaError(f"{source}: question '{question.name}': duplicate question name")
        seen.add(question.name)
        questions.append(question)
    canonical = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return Schema(
        questions=tuple(questions),
        version=str(data.get("version", "")),
        teachers=tuple(teachers),
        hash=hashlib.sha256(canonical.encode("utf-8")).hexdigest(),
        path=source,
    )


def _parse_question(q: Any, index: int, source: str) -> Question:
    if not isinstance(q, dict):
        raise SchemaError(f"{source}: question #{index}: must be a table")
    name = q.get("name")
    where = f"{source}: question '{name}'" if name else f"{source}: question #{index}"

    def fail(problem: str) -> SchemaError:
        return SchemaError(f"{where}: {problem}")

    if not isinstance(name, str) or not name.isidentifier():
        raise fail("'name' must be a simple identifier (letters, digits, underscores)")
    kind = q.get("kind")
    if kind not in KINDS:
        raise fail(f"'kind' must be one of {', '.join(KINDS)}, not {kind!r}")
    labels = q.get("labels", list(BINARY_LABELS) if kind == "binary" else None)
    if not isinstance(labels, list) or not labels:
        raise fail("'labels' must be a non-empty list of label names")
    if not all(isinstance(lab, str) and lab.strip() for lab in labels):
        raise fail("every label must be a non-empty string")
    if len(set(labels)) != len(labels):
        dupes = sorted({lab for lab in labels if labels.count(lab) > 1})
        raise fail(f"duplicate labels: {', '.join(dupes)}")
    if any(";" in lab for lab in labels):
        raise fail("label names cannot contain ';' (it separates labels in CSV files)")
    if kind == "binary" and tuple(labels) != BINARY_LABELS:
        raise fail("a binary question's labels are ['yes', 'no']")
    if kind == "single" and len(labels) < 2:
        raise fail("a single-choice question needs at least two labels")
    tables: dict[str, dict[str, str]] = {}
    for key in ("scores", "calls", "definitions"):
        value = q.get(key, {})
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise fail(f"[question.{key}] must map names to strings")
        tables[key] = value
    unknown = sorted(set(tables["definitions"]) - set(labels))
    if unknown:
        raise fail(f"definitions for unknown labels: {', '.join(unknown)}")
    threshold = q.get("threshold", 0.5)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise fail("'threshold' must be a number")
    if not 0.0 <= float(threshold) <= 1.0:
        raise fail("'threshold' must be between 0 and 1")
    for text_key in ("prompt", "definition", "key"):
        if text_key in q and not isinstance(q[text_key], str):
            raise fail(f"'{text_key}' must be a string")
    return Question(
        name=name,
        kind=kind,
        labels=tuple(labels),
        prompt=q.get("prompt", ""),
        definition=q.get("definition", ""),
        label_definitions=dict(tables["definitions"]),
        scores=dict(tables["scores"]),
        calls=dict(tables["calls"]),
        threshold=float(threshold),
        key=q.get("key"),
    )
