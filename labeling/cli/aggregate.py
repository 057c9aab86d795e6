"""The `labeling aggregate` command: likely true answers and annotator accuracy (model-based)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

EXIT_BAD_INPUT = 2
ACCURACY_COLUMNS = 7  # questions side by side in the accuracy table


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> None:
    """Print an error to stderr and exit."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def register(main: click.Group) -> None:
    """Attach the aggregate command to the main group."""
    main.add_command(aggregate)


@click.command()
@click.option("--campaign", required=True, help="The campaign (name or id).")
@click.option(
    "--method",
    type=click.Choice(["dawid-skene", "majority"]),
    default="dawid-skene",
    show_default=True,
    help="Dawid-Skene confusion matrices, or plain majority vote.",
)
@click.option(
    "--validate",
    is_flag=True,
    help="Apply the campaign's dawid-skene rule: validate the works whose posterior "
    "reaches its P with k labels, dispute the others (one transaction).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_obj
def aggregate(obj: Any, campaign: str, method: str, validate: bool, as_json: bool) -> None:
    """Per work the aggregated answer and its posterior; per annotator accuracy with n."""
    from labeling.reports.aggregate import aggregate_for
    from labeling.review.campaigns import CampaignError, get_campaign
    from labeling.review.model_rule import apply_model_rule
    from labeling.review.validation import ValidationError

    schema = obj.schema()
    try:
        info = get_campaign(obj.engine, campaign)
    except CampaignError as exc:
        _fail(str(exc))
    if validate and method != "dawid-skene":
        _fail("--validate applies the dawid-skene rule: drop --method majority")
    report = aggregate_for(obj.engine, schema, info.id, method)
    if validate:
        # Too few shared works: no posterior to judge by. The rule still checks the campaign
        # (another rule exits 2) but is handed no work, so nothing is validated or disputed.
        judged = {**report, "works": []} if "note" in report else report
        try:
            report["validation"] = apply_model_rule(obj.engine, schema, info, judged)
        except ValidationError as exc:
            _fail(str(exc))
        if "note" in report:
            report["validation"]["note"] = f"nothing validated or disputed. {report['note']}"
    if as_json:
        click.echo(json.dumps(report, indent=2, allow_nan=False, ensure_ascii=False))
        return
    click.echo(_text(report))


def _num(v: float | None, digits: int = 3) -> str:
    """A number for the table, '-' when undefined."""
    return "-" if v is None else f"{v:.{digits}f}"


def _packed(head: str, parts: list[str]) -> list[str]:
    """`head` then the parts, two spaces apart, on lines of at most WIDTH characters (the
    parts that do not fit go on indented lines below)."""
    from labeling.reports.text import WIDTH

    lines, line = [], head
    for part in parts:
        if len(line) + 2 + len(part) > WIDTH and line.strip():
            lines.append(line)
            line = " " * 6
        line = f"{line}  {part}" if line.strip() else f"{line}{part}"
    lines.append(line)
    return lines


def _accuracy_block(annotators: list[dict[str, Any]], names: list[str]) -> list[str]:
    """The annotators' accuracy overall and on these questions, one row each."""
    lines = [
        f"  {'annotator':20} {'all':>7} {'n':>6}  " + "  ".join(f"{n[:18]:>18}" for n in names)
    ]
    for a in annotators:
        cells = [
            f"{_num(a['questions'][q]['accuracy'])} (n={a['questions'][q]['n']})".rjust(18)
            if q in a["questions"]
            else " " * 18
            for q in names
        ]
        lines.append(
            f"  {a['annotator'][:20]:20} {_num(a['accuracy']):>7} {a['n']:6d}  " + "  ".join(cells)
        )
    return lines


def _validation(v: dict[str, Any]) -> str:
    """The --validate outcome as one paragraph."""
    if "note" in v:
        return f"validation ({v['rule']}, k={v['k']}): {v['note']}"
    return (
        f"validation ({v['rule']}, k={v['k']}): {v['validated']} validated, "
        f"{v['disputed']} disputed, {v['in_review']} in review (fewer than k "
        f"labels), {v['left_alone']} validated otherwise and left alone; "
        f"{v['changed']} changed"
    )


def _text(report: dict[str, Any]) -> str:
    """The report as plain text: annotators, per question, then one line per work."""
    from labeling.reports.text import wrap
    from labeling.stats.majority import NO_MAJORITY

    lines = [
        f"{report['campaign']}: {report['method']} over {report['n_labels']} labels of "
        f"{report['n_works']} works (rule {report['rule']}, k={report['overlap']})"
    ]
    if "note" in report:  # too few shared works: a sentence, no posterior or accuracy
        lines.extend(wrap(report["note"]))
        lines.append("(`--method majority` gives each work's vote shares; `--json` the counts.)")
        if "validation" in report:
            lines.extend(["", *wrap(_validation(report["validation"]))])
        return "\n".join(lines)
    if not report["works"]:
        lines.append("no labels yet")
        return "\n".join(lines)
    lines.append("")
    lines.extend(
        wrap(
            "annotator accuracy (mean probability that an answer is the true one; "
            "majority: share equal to the majority answer, on works with one), n answers:"
        )
    )
    names = list(report["questions"])
    # Seven question columns keep a row under 200 characters; more go into further blocks.
    for start in range(0, len(names), ACCURACY_COLUMNS):
        lines.extend(_accuracy_block(report["annotators"], names[start : start + ACCURACY_COLUMNS]))
    lines.append(
        "\nper work: answer (vote share) per question; a tie or a spread: no majority"
        if report["method"] == "majority"
        else "\nper work: answer (posterior) per question; multi-label: the labels that "
        "apply, posterior of the least certain label"
    )
    for w in report["works"]:
        parts = []
        for q in names:
            if q in w["answers"]:
                ans = w["answers"][q]
                if ans is None:
                    shown = NO_MAJORITY
                else:
                    shown = (";".join(ans) if isinstance(ans, list) else str(ans)) or "(none)"
                parts.append(f"{q}={shown} ({_num(w['posteriors'][q])})")
        lines.extend(_packed(f"  {w['work_id']}  n={w['n_labels']}", parts))
    unsettled = [
        q if "labels" not in b else f"{q}: {lab}"
        for q, b in report["questions"].items()
        for lab, fit in (b.get("labels") or {"": b}).items()
        if fit.get("converged") is False
    ]
    if unsettled:
        lines.append("")
        lines.extend(
            wrap(
                f"EM stopped at its last round before settling on {', '.join(unsettled)} "
                "(the posteriors there may still move; few labels per work or many "
                "classes)"
            )
        )
    if "validation" in report:
        lines.extend(["", *wrap(_validation(report["validation"]))])
    return "\n".join(lines)
