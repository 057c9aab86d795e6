"""Statistics commands: `labeling agreement`, `estimates`, `machines`, `plan`, `anchoring`."""

from __future__ import annotations

import json
from typing import Any

import click

from labeling.cli.context import Context
from labeling.cli.ranges import MAX_BOOTSTRAP, SEED, FiniteFloatRange, count_range


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
@click.option("--n-boot", type=count_range(0, MAX_BOOTSTRAP), default=200, show_default=True)
@click.option("--seed", type=SEED, default=0, show_default=True)
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


def _ci(ci: list[float] | None) -> str:
    """A 95% interval in brackets, or nothing."""
    return "" if not ci else f" [{ci[0]:.2f}, {ci[1]:.2f}]"


def _agreement_table(report: dict[str, Any]) -> str:
    """The agreement report as a text table, then the pairs and the pairs left out."""
    lines = [f"{'question / label':44} {'works':>6} {'labels':>6}  alpha (95% CI)          "
             f"fleiss  AC1     %agree"]  # fmt: skip
    for name, q in report["questions"].items():
        rows = [(name, q)] + [(f"  {lab}", v) for lab, v in q.get("labels", {}).items()]
        for title, r in rows:
            lines.append(
                f"{title[:44]:44} {r['n_works']:6d} {r['n_labels']:6d}  "
                f"{_fmt(r['krippendorff_alpha'])}{_ci(r['alpha_ci']):18} "
                f"{_fmt(r['fleiss_kappa'])} {_fmt(r['gwet_ac1'])} {_fmt(r['percent_agreement'])}"
            )
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
    if not report["estimable"]:
        click.echo(f"{report['campaign']}: {report['reason']}")
        return
    click.echo(
        f"{report['campaign']}: frame of {report['population']} works, "
        f"{report['n_validated']} of {report['n_sampled']} sampled works validated"
    )
    click.echo(f"({report['assumption']})")
    for qname, q in report["questions"].items():
        for label, e in q["labels"].items():
            est = "   -  " if e["estimate"] is None else f"{e['estimate']:6.3f}"
            ci = "" if e["lo"] is None else f" [{e['lo']:.3f}, {e['hi']:.3f}]"
            click.echo(f"  {qname:15} {label[:40]:40} {est}{ci:18} n={e['n']}")


@click.command()
@click.option("--campaign", help="Validated works of one campaign (default: all).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_obj
def machines(obj: Context, campaign: str | None, as_json: bool) -> None:
    """Each teacher, the candidate and the consensus against the validated human answers."""
    from labeling.reports.evaluation import machine_report

    report = machine_report(obj.engine, obj.schema(), campaign)
    click.echo(json.dumps(report, indent=None if not as_json else 2, allow_nan=False,
                          default=str))  # fmt: skip


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
    click.echo(plan_sentence(report))
    for p in report["plans"]:
        now = "   -  " if p["half_width_now"] is None else f"{p['half_width_now']:6.3f}"
        per = ", ".join(f"{r['stratum']} {r['more']}" for r in p["strata"] if r["more"])
        click.echo(f"  {p['question']:15} {p['label'][:36]:36} now +-{now}  "
                   f"more {p['more']:6d}  {per}")  # fmt: skip


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
    click.echo(f"{report['campaign']}: scores shown before submit to a share "
               f"{report['assist_rate']:g} of assignments; first answers: {arms['shown']} "
               f"shown, {arms['hidden']} hidden")  # fmt: skip
    if report["note"]:
        click.echo(report["note"])
    for qname, q in report["questions"].items():
        against = [(f"{t}'s call", c) for t, c in q["teachers"].items()]
        for what, c in [*against, ("the validated answer", q["validated"])]:
            click.echo(f"  {qname:15} vs {what:24} {_arms_line(c)}")
    click.echo(f"({report['method']})")


def _arms_line(c: dict[str, Any]) -> str:
    """One comparison: the rates per arm with n, the difference and its interval."""

    def rate(r: float | None, n: int) -> str:
        return f"   -  (n={n})" if r is None else f"{r:6.3f} (n={n})"

    shown, hidden = rate(c["rate_shown"], c["n_shown"]), rate(c["rate_hidden"], c["n_hidden"])
    head = f"shown {shown}  hidden {hidden}"
    if c["difference"] is None or not c["enough"]:
        return f"{head}  {c['note'] or ''}".rstrip()
    return (f"{head}  difference {c['difference']:+.3f} [{c['lo']:+.3f}, {c['hi']:+.3f}]"
            f" p={c['p_value']:.3g}")  # fmt: skip
