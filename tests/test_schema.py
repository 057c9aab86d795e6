"""The schema file: the shipped default loads; malformed files are rejected clearly."""

from __future__ import annotations

from pathlib import Path

import pytest

from labeling.schema import SchemaError, get_path, load_schema
from labeling.settings import DEFAULT_SCHEMA

GOOD = """
[[question]]
name = "q"
kind = "single"
labels = ["a", "b"]
"""


def test_default_schema_has_the_frame_questions(schema) -> None:
    assert schema.names == [
        "categories", "about_ca_system", "about_ca_topic", "domain", "study_design", "genre",
    ]  # fmt: skip
    cats = schema.question("categories")
    assert cats.kind == "multi" and len(cats.labels) == 9
    assert cats.labels[1] == "Meta-epidemiology (narrow)"
    assert "Meta-epidemiology (narrow)" in cats.label_definitions
    assert schema.question("study_design").labels[7] == "simulation_or_modeling"
    assert schema.question("study_design").labels[11] == "design_other"
    assert len(schema.question("domain").labels) == 6
    assert len(schema.question("genre").labels) == 9
    assert schema.question("about_ca_system").labels == ("yes", "no")
    assert cats.scores["codex"] == "prediction.category_scores_codex"
    assert len(schema.hash) == 64


def test_hash_changes_with_content_not_with_formatting(tmp_path: Path) -> None:
    a = tmp_path / "a.toml"
    b = tmp_path / "b.toml"
    c = tmp_path / "c.toml"
    a.write_text(GOOD)
    b.write_text("# a comment\n" + GOOD.replace('["a", "b"]', '[ "a",  "b" ]'))
    c.write_text(GOOD.replace('"b"]', '"c"]'))
    assert load_schema(a).hash == load_schema(b).hash
    assert load_schema(a).hash != load_schema(c).hash


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no [[question]] entries"),
        ("[[question\nname=", "not valid TOML"),
        ('[[question]]\nname = "q"\nkind = "ranked"\nlabels = ["a","b"]', "question 'q': 'kind'"),
        ('[[question]]\nkind = "single"\nlabels = ["a","b"]', "question #1: 'name'"),
        ('[[question]]\nname = "q"\nkind = "single"', "question 'q': 'labels'"),
        ('[[question]]\nname = "q"\nkind = "single"\nlabels = ["a","a"]', "duplicate labels: a"),
        ('[[question]]\nname = "q"\nkind = "multi"\nlabels = ["a;b"]', "cannot contain ';'"),
        ('[[question]]\nname = "q"\nkind = "binary"\nlabels = ["y","n"]', "['yes', 'no']"),
        ('[[question]]\nname = "q"\nkind = "single"\nlabels = ["a","b"]\nthreshold = 2',
         "between 0 and 1"),
        ('[[question]]\nname = "q"\nkind = "single"\nlabels = ["a","b"]\n'
         '[question.definitions]\nz = "?"', "definitions for unknown labels: z"),
        ('[[question]]\nname = "q"\nkind = "single"\nlabels = ["a","b"]\n'
         '[question.scores]\ncodex = 3', "[question.scores]"),
        (GOOD + GOOD, "question 'q': duplicate question name"),
    ],
)  # fmt: skip
def test_malformed_schema_names_file_question_and_problem(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(SchemaError) as err:
        load_schema(path)
    assert str(path) in str(err.value)
    assert message in str(err.value)


def test_missing_and_non_utf8_schema_files(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="cannot read schema file"):
        load_schema(tmp_path / "nope.toml")
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(GOOD.encode() + "# caf\xe9\n".encode("latin-1"))
    with pytest.raises(SchemaError, match="not UTF-8"):
        load_schema(bad)


def test_default_schema_file_is_the_packaged_one() -> None:
    assert DEFAULT_SCHEMA.exists()
    assert load_schema(DEFAULT_SCHEMA).version


@pytest.mark.parametrize(
    ("path", "expected"),
    [("a", 1), ("b.c", 2), ("b.x", None), ("a.b", None), ("z.y.x", None)],
)
def test_get_path(path: str, expected: object) -> None:
    assert get_path({"a": 1, "b": {"c": 2}}, path) == expected
