"""The layering the code map promises: who may import whom, and modules small enough to read."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The developers' guide's figure: a module past it is a sign to split it by meaning (a guide
# for a reader, not a wall to split files by size for).
MAX_LINES = 800


def _imports(path: Path) -> set[str]:
    """Every module a file imports (absolute names, at any depth in the file)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
    return out


def _files(*roots: str) -> list[Path]:
    files = [ROOT / r for r in roots if r.endswith(".py")]
    for r in roots:
        if not r.endswith(".py"):
            files += sorted((ROOT / r).rglob("*.py"))
    return [f for f in files if "migrations/versions" not in f.as_posix()]


def _top(names: set[str], top: str) -> set[str]:
    return {n for n in names if n == top or n.startswith(top + ".")}


@pytest.mark.parametrize("path", _files("labeling"), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_domain_never_imports_streamlit(path: Path) -> None:
    assert not _top(_imports(path), "streamlit")


@pytest.mark.parametrize(
    "path", _files("pages", "app.py"), ids=lambda p: p.relative_to(ROOT).as_posix()
)
def test_pages_never_import_storage(path: Path) -> None:
    assert not _top(_imports(path), "db")


@pytest.mark.parametrize("path", _files("db"), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_storage_imports_only_the_domain_words(path: Path) -> None:
    assert _top(_imports(path), "labeling") <= {"labeling.vocabulary"}
    assert not _top(_imports(path), "pages") and not _top(_imports(path), "ui")


def test_the_vocabulary_is_a_leaf() -> None:
    assert _imports(ROOT / "labeling" / "vocabulary.py") == set()


@pytest.mark.parametrize(
    "path",
    _files("labeling", "db", "pages", "ui", "app.py"),
    ids=lambda p: p.relative_to(ROOT).as_posix(),
)
def test_no_module_is_over_800_lines(path: Path) -> None:
    n = len(path.read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES, f"{path.relative_to(ROOT)}: {n} lines"


def test_labeling_shows_the_architecture() -> None:
    modules = {p.name for p in (ROOT / "labeling").iterdir() if p.suffix == ".py"}
    packages = {p.name for p in (ROOT / "labeling").iterdir() if (p / "__init__.py").exists()}
    assert packages == {
        "frames",
        "review",
        "abstracts",
        "stats",
        "reports",
        "export",
        "auth",
        "cli",
    }
    assert modules <= {
        "__init__.py",
        "settings.py",
        "schema.py",
        "errors.py",
        "vocabulary.py",
        "inputs.py",
        "database.py",
        "numbers.py",
        "retrying.py",
        "collector.py",
        "processes.py",
    }
