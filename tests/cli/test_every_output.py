"""Every CLI command the README documents, run on the demo and on a labelled demo: it exits 0
without a traceback, its text mode has no line over 200 characters (an abstract's own text
aside) and no run of identical lines, and its --json mode prints JSON.

The README's CLI table is parsed, so a newly documented command fails here until it gets an
invocation below; so does a command click knows that has none.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from labeling.cli.main import main
from labeling.settings import get_settings
from tests.cli.labelled_demo import add_labels, add_model_campaign

README = Path(__file__).resolve().parents[2] / "README.md"
MAX_LINE = 200
# A run of this many lines that are the same once the labels they are about are masked says
# one thing row after row (39 identical plan rows, one per label).
MAX_ALIKE = 3
TYPO = "demo-topp"
# Commands whose --campaign names a campaign to create (import-labels files labels under it).
CAMPAIGN_CREATED = {("import-labels",)}

# Each command the README documents, as a lead would type it. Placeholders: {tmp} a scratch
# folder, {frame} the demo frame, {labels} a labels CSV, {backup} a backup file, {work} a
# validated work (labelled demo), {disputed} a disputed one, {adjudicated} one a lead settled,
# {other} another validated work.
INVOCATIONS: list[tuple[str, ...]] = [
    ("init",),
    ("import-frame", "{frame}"),
    ("import-labels", "{labels}"),
    ("import-labels", "{labels}", "--campaign", "pilot"),
    ("users", "add", "carol", "--role", "lead", "--password-stdin"),
    ("users", "list"),
    ("users", "set-role", "annotator2", "lead"),
    ("users", "deactivate", "annotator2"),
    ("sso", "add-email", "ann@example.org", "annotator"),
    ("sso", "add-subject", "https://issuer.example.org", "sub-1", "dana", "--role", "annotator"),
    ("sso", "add-domain", "example.org", "--role", "annotator"),
    ("sso", "list"),
    ("sso", "remove", "1"),
    ("demo",),
    ("demo", "--reset", "--force"),  # --force: the sso mapping is not the demo's
    ("synth", "--n", "20", "--out", "{tmp}/synth.jsonl"),
    ("campaigns", "create", "pilot-sample", "--strategy", "stratified", "-n", "20", "-k", "2"),
    ("campaigns", "create", "pilot-arms", "--assist-rate", "0.5", "-k", "2", "--seed", "3"),
    ("campaigns", "list"),
    ("abstracts", "prefetch", "--campaign", "demo-top", "--limit", "5"),
    ("abstracts", "prefetch", "--ids", "{work},{other}"),
    ("abstracts", "show", "{work}", "{other}"),
    ("agreement",),
    ("agreement", "--campaign", "demo-top", "--n-boot", "50", "--seed", "1"),
    ("estimates", "--campaign", "demo-sample"),
    ("estimates", "--campaign", "demo-top"),
    ("aggregate", "--campaign", "demo-top"),
    ("aggregate", "--campaign", "demo-sample", "--method", "majority"),
    ("aggregate", "--campaign", "demo-model", "--validate"),
    ("plan", "--campaign", "demo-sample", "--half-width", "0.1"),
    ("plan", "--campaign", "demo-sample", "--half-width", "0.1", "--label", "genre:methods"),
    (
        "plan",
        "--campaign",
        "demo-sample",
        "--half-width",
        "0.2",
        "--measure",
        "recall",
        "--teacher",
        "codex",
    ),
    ("anchoring", "--campaign", "demo-top"),
    ("machines",),
    ("machines", "--campaign", "demo-sample"),
    ("history", "{work}", "{disputed}", "{adjudicated}"),
    ("export", "--format", "csv", "--out", "{tmp}/gold.csv"),
    (
        "export",
        "--format",
        "jsonl",
        "--out",
        "{tmp}/gold.jsonl",
        "--status",
        "all",
        "--campaign",
        "demo-top",
        "--long",
    ),
    ("export", "--format", "parquet", "--out", "{tmp}/gold.parquet", "--status", "labelled"),
    ("backup", "{tmp}/copy.db"),
    ("restore", "{backup}", "--force"),
]
STDIN: dict[tuple[str, ...], str] = {("users", "add"): "a long enough password\n"}


def command_path(tokens: list[str]) -> tuple[str, ...] | None:
    """The click command that `tokens` start with (as names), or None if they name none."""
    cmd: click.Command = main
    path: list[str] = []
    for token in tokens:
        if not isinstance(cmd, click.Group) or token not in cmd.commands:
            break
        cmd = cmd.commands[token]
        path.append(token)
    return tuple(path) if path and not isinstance(cmd, click.Group) else None


def readme_rows() -> list[str]:
    """The rows of the README's CLI table (each starts with a `labeling ...` command)."""
    rows = README.read_text(encoding="utf-8").splitlines()
    return [row for row in rows if row.startswith("| `labeling ")]


def readme_commands() -> set[tuple[str, ...]]:
    """Every command a row of the README's CLI table names (`labeling X ...`, `also X ...`)."""
    found: set[tuple[str, ...]] = set()
    for row in readme_rows():
        for span in re.findall(r"`([^`]+)`", row):
            tokens = span.split()
            path = command_path(tokens[1:] if tokens[:1] == ["labeling"] else tokens)
            if path:
                found.add(path)
    return found


def click_commands(cmd: click.Command = main, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Every leaf command of the `labeling` group."""
    if not isinstance(cmd, click.Group):
        return {prefix}
    return {p for name, sub in cmd.commands.items() for p in click_commands(sub, (*prefix, name))}


def command_of(args: tuple[str, ...]) -> click.Command:
    """The click command an invocation runs."""
    path = command_path(list(args))
    assert path, args
    cmd: click.Command = main
    for name in path:
        assert isinstance(cmd, click.Group)
        cmd = cmd.commands[name]
    return cmd


def takes(args: tuple[str, ...], option: str) -> bool:
    """Whether the invoked command has `option` (e.g. --json)."""
    return any(option in p.opts for p in command_of(args).params)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Two SQLite files built once: the demo, and the demo with labels from two annotators
    (agreements and disputes in demo-top, the demo-sample probability sample labelled)."""
    from sqlalchemy import select

    from db.engine import read_session
    from db.models import Work
    from labeling.auth.sso_mappings import map_email
    from labeling.database import dispose_all, init_db
    from labeling.frames.demo import DEMO_FRAME
    from labeling.schema import load_schema

    root = tmp_path_factory.mktemp("every-output")
    mp = pytest.MonkeyPatch()
    mp.setenv("LABELING_OPENALEX_OFFLINE", "true")  # abstracts from the demo's cache
    get_settings.cache_clear()
    plain = root / "demo.db"
    built = CliRunner().invoke(main, ["--db", f"sqlite:///{plain}", "demo"])
    assert built.exit_code == 0, built.output
    engine = init_db(f"sqlite:///{plain}")
    map_email(engine, "lead@example.org", "lead", created_by="test")
    add_model_campaign(engine)
    dispose_all()
    labelled = root / "labelled.db"
    shutil.copyfile(plain, labelled)
    engine = init_db(f"sqlite:///{labelled}")
    adjudicated = add_labels(engine, load_schema(get_settings().schema_path))
    with read_session(engine) as session:
        status = {w: s for w, s in session.execute(select(Work.id, Work.status))}
    dispose_all()
    validated = sorted(w for w, s in status.items() if s == "human_validated")
    disputed = sorted(w for w, s in status.items() if s == "human_disputed")
    assert validated and disputed, sorted(set(status.values()))
    labels = root / "labels.csv"
    labels.write_text(
        "work_id,annotator,question,value\n"
        f"{validated[0]},lee,genre,methods\n{validated[0]},lee,about_ca_system,no\n"
        f"{disputed[0]},lee,genre,review\n",
        encoding="utf-8",
    )
    yield {
        "demo": plain,
        "labelled": labelled,
        "frame": str(DEMO_FRAME),
        "labels": str(labels),
        "work": validated[0],
        "disputed": disputed[0],
        "adjudicated": adjudicated,
        "other": validated[1],
    }
    mp.undo()
    get_settings.cache_clear()


def masked(line: str, names: list[str]) -> str:
    """A line with each of `names` (label names, longest first) replaced by `<>`."""
    for name in names:
        line = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", "<>", line)
    return " ".join(line.split())


def defects(output: str, exempt: set[str], names: list[str]) -> list[str]:
    """What is wrong with a text output: long lines, and runs of identical lines."""
    found = []
    lines = output.splitlines()
    for i, line in enumerate(lines, 1):
        if len(line) > MAX_LINE and line.strip() not in exempt:
            found.append(f"line {i} has {len(line)} characters: {line[:100]}...")
    run: list[str] = []
    for i, line in enumerate(lines + [""], 1):
        key = masked(line, names) if line.strip() else ""
        if key and run and key == run[-1]:
            run.append(key)
            continue
        if len(run) >= MAX_ALIKE:
            found.append(f"{len(run)} lines alike before line {i}: {run[0][:100]}")
        run = [key] if key else []
    for i, (a, b) in enumerate(zip(lines, lines[1:], strict=False), 1):
        if a.strip() and a == b:
            found.append(f"lines {i} and {i + 1} are the same: {a[:100]}")
    return found


def invoke(db: Path, args: tuple[str, ...], input: str | None = None) -> Result:
    """Run the CLI on `db`; click's result, exceptions caught (a traceback fails the test)."""
    return CliRunner().invoke(main, ["--db", f"sqlite:///{db}", *args], input=input)


def schema_names() -> list[str]:
    """Every label name of the schema, longest first (for `masked`); question names stay,
    since a list of questions with their answers is not a repetition."""
    from labeling.schema import load_schema

    schema = load_schema(get_settings().schema_path)
    names = {lab for q in schema.questions for lab in q.labels}
    return sorted(names, key=len, reverse=True)


def abstract_texts(db: Path, work_ids: list[str]) -> set[str]:
    """The abstracts `abstracts show` prints for these works (their own lines may be long)."""
    from labeling.abstracts.cache import show_abstract
    from labeling.database import dispose_all, init_db

    engine = init_db(f"sqlite:///{db}")
    texts = {show_abstract(engine, w, settings=get_settings()).text or "" for w in work_ids}
    dispose_all()
    return {t.strip() for t in texts if t}


def filled(args: tuple[str, ...], values: dict[str, str]) -> tuple[str, ...]:
    """The invocation with its placeholders filled in."""
    return tuple(a.format(**values) for a in args)


MODES = [
    pytest.param(db, args, as_json, id=f"{db}-{'-'.join(args[:4])}{'-json' if as_json else ''}")
    for db in ("demo", "labelled")
    for args in INVOCATIONS
    for as_json in (False, True)
    if not as_json or takes(args, "--json")
]


@pytest.mark.parametrize(("db", "args", "as_json"), MODES)
def test_every_command_reads_right(
    prepared: dict[str, Any], tmp_path: Path, db: str, args: tuple[str, ...], as_json: bool
) -> None:
    path = tmp_path / "labeling.db"
    shutil.copyfile(prepared[db], path)
    backup = tmp_path / "backup.db"
    shutil.copyfile(prepared[db], backup)
    values = {**{k: str(v) for k, v in prepared.items()}, "tmp": str(tmp_path)}
    values["backup"] = str(backup)
    argv = filled(args, values) + (("--json",) if as_json else ())
    result = invoke(path, argv, input=STDIN.get(tuple(args[:2])))
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        argv,
        result.output[-3000:],
    )
    assert "Traceback" not in result.output, result.output[-3000:]
    assert result.exit_code == 0, (argv, result.output[-3000:])
    if as_json:
        json.loads(result.stdout)
        return
    exempt = abstract_texts(path, list(argv[2:])) if args[:2] == ("abstracts", "show") else set()
    assert not defects(result.output, exempt, schema_names()), (
        argv,
        defects(result.output, exempt, schema_names()),
    )


def test_every_documented_command_has_an_invocation() -> None:
    documented = readme_commands()
    # The parser finds the table's commands (it would find none if the table changed shape).
    assert {("agreement",), ("sso", "remove"), ("users", "list"), ("campaigns", "list")} <= (
        documented
    )
    # A row's own command is one click knows (a documented command that does not exist fails).
    unknown = [
        row.split("`")[1]
        for row in readme_rows()
        if not command_path(row.split("`")[1].split()[1:])
    ]
    assert not unknown, f"README commands the CLI does not have: {unknown}"
    invoked = {command_path(list(args)) for args in INVOCATIONS}
    missing = sorted((documented | click_commands()) - invoked)
    assert not missing, f"commands with no invocation in INVOCATIONS: {missing}"


def campaign_commands() -> list[tuple[str, ...]]:
    """One invocation of every command that takes --campaign (a campaign that must exist)."""
    seen: dict[tuple[str, ...], tuple[str, ...]] = {}
    for args in INVOCATIONS:
        path = command_path(list(args))
        if path and "--campaign" in args and path not in CAMPAIGN_CREATED:
            seen.setdefault(path, args)
    return list(seen.values())


def test_every_campaign_option_has_an_invocation() -> None:
    taking = {p for p in click_commands() if takes(p, "--campaign")} - CAMPAIGN_CREATED
    assert taking == {command_path(list(a)) for a in campaign_commands()}


@pytest.mark.parametrize("args", campaign_commands(), ids=lambda a: a[0])
def test_a_mistyped_campaign_gets_did_you_mean(
    prepared: dict[str, Any], tmp_path: Path, args: tuple[str, ...]
) -> None:
    path = tmp_path / "labeling.db"
    shutil.copyfile(prepared["labelled"], path)
    at = args.index("--campaign") + 1
    typo = (*args[:at], TYPO, *args[at + 1 :])
    values = {**{k: str(v) for k, v in prepared.items()}, "tmp": str(tmp_path)}
    result = invoke(path, filled(typo, values))
    assert result.exit_code == 2, result.output
    assert result.output.splitlines() == [
        f"error: no campaign named {TYPO!r}; did you mean 'demo-top'?"
    ]


def test_every_option_says_what_it_does() -> None:
    def command(path: tuple[str, ...]) -> click.Command:
        return command_of(path) if path else main

    bare = [
        (" ".join(path), param.opts[0])
        for path in [(), *sorted(click_commands())]
        for param in command(path).params
        if isinstance(param, click.Option) and not (param.help or "").strip()
    ]
    assert not bare, f"options without help: {bare}"


@pytest.mark.parametrize(
    ("args", "header"),
    [
        (("campaigns", "list"), "id\tname\tstrategy\tk\tdone/works\tstate"),
    ],
)
def test_lists_say_what_their_columns_are(
    prepared: dict[str, Any], tmp_path: Path, args: tuple[str, ...], header: str
) -> None:
    path = tmp_path / "labeling.db"
    shutil.copyfile(prepared["labelled"], path)
    lines = invoke(path, args).output.splitlines()
    assert lines[0] == header
    assert all(len(line.split("\t")) == len(header.split("\t")) for line in lines), lines


@pytest.mark.parametrize(
    "path", [(), *sorted(click_commands())], ids=lambda p: "-".join(p) or "main"
)
def test_every_help_reads_right(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    assert not defects(result.output, set(), schema_names()), defects(result.output, set(), [])
