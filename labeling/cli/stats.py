"""Statistics commands: `labeling agreement`, `estimates`, `machines`, `plan`, `anchoring`."""

from __future__ import annotations

import json
from typing import Any

import click

from labeling.cli.context import Context
from labeling.cli.ranges import MAX_BOOTSTRAP, SEED, FiniteFloatRange, count_range
from labeling.reports.text import estimate_lines, machine_lines, num, plan_lines, wrap


def register(main: click.Group) -> None:
    """Attach the statistics commands to the main group."""
    main.add_command(agreement)
    main.add_command(estimates)
    main.add_command(machines)
    main.add_command(plan)
    main.add_command(anchoring)


@click.command()
@click.option("--campaign", help="One campaign (default: every label).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--n-boot",
    type=count_range(0, MAX_BOOTSTRAP),
    default=200,
    show_default=True,
    help="Bootstrap replicates (resampling works) for the intervals; 0: no intervals.",
)
@click.option(
    "--seed",
    type=SEED,
    default=0,
    show_default=True,
    help="Seed of the bootstrap's random draws (the same seed gives the same intervals).",
)
@click.option(
    "--min-pair-n",
    type=count_range(2),
    default=2,
    show_default=True,
    help="Fewest common works for a pair's Cohen's kappa; pairs sharing fewer are "
    "listed as left out, with the reason.",
)
@click.pass_obj
def agreement(
    obj: Context, campaign: str | None, as_json: bool, n_boot: int, seed: int, min_pair_n: int
) -> None:
    """Inter-annotator agreement per question and label, with bootstrap intervals."""
    from labeling.reports.agreement import agreement_for

    report = agreement_for(
        obj.engine, obj.schema(), campaign, n_boot=n_boot, seed=seed, min_pair_n=min_pair_n
    )
    if as_json:
        click.echo(json.dumps(report, indent=2, allow_nan=False))
        return
    click.echo(_agreement_table(report))


def _fmt(v: float | None) -> str:
    """A coefficient in six characters, `-` when undefined."""
    return "   -  " if v is None else f"{v:6.3f}"


def _ci(
    ci: list[float] | None, reason: str | None = None, notes: dict[str, int] | None = None
) -> str:
    """A 95% interval in brackets, or a note numbered in `notes` saying why there is none."""
    if ci:
        return f" [{ci[0]:.2f}, {ci[1]:.2f}]"
    if not reason or notes is None:
        return ""
    return f" [no CI {notes.setdefault(reason, len(notes) + 1)}]"


def _agreement_table(report: dict[str, Any]) -> str:
    """The agreement report as a text table, then the pairs and the pairs left out."""
    where = f"campaign {report['campaign']}" if report.get("campaign") else "any campaign"
    if not any(q["n_labels"] for q in report["questions"].values()):
        return f"no labels in {where} yet: no agreement to measure"
    lines = [f"{'question / label':44} {'works':>6} {'labels':>6}  alpha (95% CI)          "
             f"fleiss  AC1     %agree"]  # fmt: skip
    missing: dict[str, int] = {}  # why an interval is left out -> its note's number
    for name, q in report["questions"].items():
        rows = [(name, q)] + [(f"  {lab}", v) for lab, v in q.get("labels", {}).items()]
        for title, r in rows:
            ci = _ci(r["alpha_ci"], r.get("alpha_ci_reason"), missing)
            lines.append(
                f"{title[:44]:44} {r['n_works']:6d} {r['n_labels']:6d}  "
                f"{_fmt(r['krippendorff_alpha'])}{ci:18} "
                f"{_fmt(r['fleiss_kappa'])} {_fmt(r['gwet_ac1'])} {_fmt(r['percent_agreement'])}"
            )
    for reason, i in missing.items():
        lines.append(f"[no CI {i}]: {reason}")
    if report["pairs"]:
        lines.append(
            "\nCohen's kappa per pair of annotators (question, n common works; "
            "- = undefined, both gave one and the same answer throughout):"
        )
        for p in report["pairs"]:
            lines.append(f"  {p['a']} x {p['b']}  {p['question']:20} n={p['n']:<5d} "
                         f"kappa={_fmt(p['cohen_kappa']).strip()}")  # fmt: skip
    if report["pairs_left_out"]:
        lines.append(f"\nPairs left out (fewer than {report['min_pair_n']} common works):")
        for p in report["pairs_left_out"]:
            lines.append(f"  {p['a']} x {p['b']}  {p['question']:20} n={p['n']}")
    lines.append(f"\n(bootstrap over works: {report['n_boot']} replicates, seed {report['seed']})")
    return "\n".join(lines)


@click.command()
@click.option("--campaign", required=True, help="A random or stratified sample campaign.")
@click.option("--json", "as_json", is_flag=True, help="Print the estimates as JSON.")
@click.pass_obj
def estimates(obj: Context, campaign: str, as_json: bool) -> None:
    """Design-based prevalence of every label in the frame (probability samples only)."""
    from labeling.reports.evaluation import frame_estimates

    report = frame_estimates(obj.engine, obj.schema(), campaign)
    if as_json:
        click.echo(json.dumps(report, indent=2, allow_nan=False, default=str))
        return
    click.echo("\n".join(estimate_lines(report)))


@click.command()
@click.option("--campaign", help="Validated works of one campaign (default: all).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_obj
def machines(obj: Context, campaign: str | None, as_json: bool) -> None:
    """Each teacher, the candidate and the consensus against the validated human answers."""
    from labeling.reports.evaluation import machine_report

    report = machine_report(obj.engine, obj.schema(), campaign)
    if as_json:
        click.echo(json.dumps(report, indent=2, allow_nan=False, default=str))
        return
    click.echo("\n".join(machine_lines(report)))


@click.command()
@click.option("--campaign", required=True, help="A random or stratified sample campaign.")
@click.option(
    "--half-width",
    type=FiniteFloatRange(0, 0.5, min_open=True),
    required=True,
    help="The wanted half-width of the 95% interval (e.g. 0.03 for +-3 points).",
)
@click.option("--label", help='One label ("L" or "question:L"; default: every label).')
@click.option(
    "--measure",
    type=click.Choice(["prevalence", "precision", "recall"]),
    default="prevalence",
    show_default=True,
    help="The label's prevalence in the frame, or a teacher's precision or recall for it.",
)
@click.option("--teacher", help="Whose precision or recall (a teacher, candidate, consensus).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.pass_obj
def plan(
    obj: Context,
    campaign: str,
    half_width: float,
    label: str | None,
    measure: str,
    teacher: str | None,
    as_json: bool,
) -> None:
    """How many more labelled works (per stratum, Neyman allocation) reach the target width."""
    from labeling.reports.planning import plan_for, plan_sentence

    report = plan_for(obj.engine, obj.schema(), campaign, half_width, label=label,
                      measure=measure, teacher=teacher)  # fmt: skip
    if as_json:
        click.echo(json.dumps(report, indent=2, allow_nan=False))
        return
    click.echo("\n".join(plan_lines(report, plan_sentence(report))))


@click.command()
@click.option("--campaign", required=True, help="A campaign with an assist rate (name or id).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_obj
def anchoring(obj: Context, campaign: str, as_json: bool) -> None:
    """Do annotators shown the teachers' scores agree with them more? (randomised arms)"""
    from labeling.reports.anchoring import anchoring_report

    report = anchoring_report(obj.engine, obj.schema(), campaign)
    if as_json:
        click.echo(json.dumps(report, indent=2, allow_nan=False))
        return
    arms = report["arms"]
    lines = wrap(
        f"{report['campaign']}: scores shown before submit to a share "
        f"{report['assist_rate']:g} of assignments; first answers: {arms['shown']} "
        f"shown, {arms['hidden']} hidden"
    )
    if report["note"]:
        lines.extend(wrap(report["note"]))
    if not arms["shown"] + arms["hidden"]:
        click.echo("\n".join(lines))
        return
    lines.append(
        f"  {'question':15} {'agreement of first answers':27} {'shown (n)':14} "
        f"{'hidden (n)':14} difference [95% CI], p"
    )
    too_few = False
    for qname, q in report["questions"].items():
        against = [(f"{t}'s call", c) for t, c in q["teachers"].items()]
        for what, c in [*against, ("the validated answer", q["validated"])]:
            line, enough = _arms_line(c)
            too_few |= not enough
            lines.append(f"  {qname[:15]:15} vs {what[:24]:24} {line}")
    if too_few:
        lines.append(
            f"(-: fewer than {report.get('min_arm_n', 10)} first answers in an arm, "
            "too few to compare)"
        )
    lines.append(f"({report['method']})")
    click.echo("\n".join(lines))


def _arms_line(c: dict[str, Any]) -> tuple[str, bool]:
    """One comparison: the rates per arm with n, the difference, its interval and p; and
    whether the arms hold enough labels for a difference."""

    def rate(r: float | None, n: int) -> str:
        return f"{num(r)} ({n})"

    head = f"{rate(c['rate_shown'], c['n_shown']):14} {rate(c['rate_hidden'], c['n_hidden']):14}"
    if c["difference"] is None or not c["enough"]:
        return f"{head} -", False
    return (
        f"{head} {c['difference']:+.3f} [{c['lo']:+.3f}, {c['hi']:+.3f}], p={c['p_value']:.3g}"
    ), True
