"""CLI commands for campaigns, abstracts and agreement (the annotator and lead issues)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

EXIT_BAD_INPUT = 2


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def register(main: click.Group) -> None:
    """Attach the commands of this module to the main group."""
    main.add_command(campaigns)
    main.add_command(abstracts)
    main.add_command(agreement)
    main.add_command(estimates)
    main.add_command(machines)


@click.group()
def campaigns() -> None:
    """Labelling campaigns: which works, in what order, how many labels each."""


STRATEGIES = ["score_opus", "score_gpt", "score_max", "score_spread", "teacher_disagreement",
              "threshold_uncertainty", "random", "stratified"]  # fmt: skip


@campaigns.command("create")
@click.argument("name")
@click.option("--strategy", type=click.Choice(STRATEGIES), default="score_max", show_default=True)
@click.option("--overlap", "-k", type=click.IntRange(1), default=1, show_default=True,
              help="Independent labels each work needs.")
@click.option("--blind", is_flag=True, help="Hide machine scores until the label is submitted.")
@click.option("--questions", help="Comma-separated schema questions to ask (default: all).")
@click.option("--lease-minutes", type=click.FloatRange(min=0.1), default=15.0, show_default=True)
@click.option("--sample-size", "-n", type=click.IntRange(1), help="n for random/stratified.")
@click.option("--allocation", default="proportional", show_default=True,
              help="Stratified: proportional, equal, or a number per stratum.")
@click.option("--bins", help="Stratified: score_max bin edges, e.g. 0,0.1,0.5,1.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--rule", type=click.Choice(["unanimous", "majority", "dawid-skene"]),
              default="unanimous", show_default=True,
              help="dawid-skene: posterior >= --posterior with k labels, applied by "
                   "`labeling aggregate --validate`.")
@click.option("--posterior", type=click.FloatRange(0.5, 1, min_open=True),
              help="The dawid-skene rule's threshold P (default 0.95).")
@click.option("--gold-rate", type=click.FloatRange(0, 1), default=0.0, show_default=True)
@click.option("--filter", "filter_json",
              help='Work filter as JSON, e.g. \'{"field": ["Medicine"], "year_min": 2015, '
                   '"score_max": [0.5, 1]}\'.')
@click.pass_obj
def campaigns_create(obj: Any, name: str, strategy: str, overlap: int, blind: bool,
                     questions: str | None, lease_minutes: float, sample_size: int | None,
                     allocation: str, bins: str | None, seed: int, rule: str,
                     posterior: float | None, gold_rate: float,
                     filter_json: str | None) -> None:  # fmt: skip
    """Create a campaign and queue its works."""
    from labeling.review.campaigns import CampaignError, create_campaign

    try:
        filt = json.loads(filter_json) if filter_json else None
    except json.JSONDecodeError as exc:
        _fail(f"--filter is not valid JSON: {exc}")
    alloc: str | int = int(allocation) if allocation.isdigit() else allocation
    try:
        edges = [float(x) for x in bins.split(",")] if bins else None
    except ValueError:
        _fail(f"--bins must be comma-separated numbers, not {bins!r}")
    try:
        info = create_campaign(
            obj.engine, name=name, strategy=strategy, filter=filt, overlap=overlap, blind=blind,
            questions=[q.strip() for q in questions.split(",")] if questions else None,
            lease_seconds=int(lease_minutes * 60), sample_size=sample_size, allocation=alloc,
            bins=edges, seed=seed, rule=rule, posterior=posterior, gold_rate=gold_rate,
            schema=obj.schema(),
        )  # fmt: skip
    except CampaignError as exc:
        _fail(str(exc))
    kind = "probability sample" if info.is_probability_sample else "score order (not a sample)"
    click.echo(f"created campaign {info.name} (id {info.id}): {info.n_items} works, {kind}")


@campaigns.command("list")
@click.pass_obj
def campaigns_list(obj: Any) -> None:
    """List campaigns with their progress."""
    from labeling.review.campaigns import list_campaigns

    for c in list_campaigns(obj.engine):
        state = "active" if c.active else "closed"
        click.echo(f"{c.id}\t{c.name}\t{c.strategy}\tk={c.overlap}\t{c.n_done}/{c.n_items}\t"
                   f"{state}")  # fmt: skip


@click.group()
def abstracts() -> None:
    """Abstracts from OpenAlex: warm the cache, show one."""


@abstracts.command("prefetch")
@click.option("--campaign", help="Warm the next works of this campaign's queue.")
@click.option("--limit", type=click.IntRange(1), default=500, show_default=True)
@click.option("--ids", help="Comma-separated work ids instead of a campaign.")
@click.pass_obj
def abstracts_prefetch(obj: Any, campaign: str | None, limit: int, ids: str | None) -> None:
    """Fetch and cache abstracts ahead of a labelling session."""
    from labeling.abstracts.cache import prefetch

    if bool(campaign) == bool(ids):
        _fail("give exactly one of --campaign or --ids")
    if ids:
        work_ids = [x.strip() for x in ids.split(",") if x.strip()]
    else:
        from labeling.review.campaigns import CampaignError, get_campaign
        from labeling.review.queue import upcoming_work_ids

        try:
            info = get_campaign(obj.engine, campaign)
        except CampaignError as exc:
            _fail(str(exc))
        work_ids = upcoming_work_ids(obj.engine, info.id, limit)
    r = prefetch(obj.engine, work_ids, settings=obj.settings)
    click.echo(f"{r.requested} requested: {r.fetched} fetched, {r.absent} absent, "
               f"{r.failed} failed, {r.cached} already cached"
               + (f", {r.offline} offline" if r.offline else ""))  # fmt: skip
    for message, count in r.errors.items():
        click.echo(f"  {count} x {message}", err=True)
    sys.exit(1 if r.failed else 0)


@abstracts.command("show")
@click.argument("work_ids", nargs=-1, required=True)
@click.pass_obj
def abstracts_show(obj: Any, work_ids: tuple[str, ...]) -> None:
    """Print works' de-inverted abstracts (from the cache, else fetched)."""
    from labeling.abstracts.cache import show_abstract

    failed = False
    for wid in work_ids:
        state = show_abstract(obj.engine, wid, settings=obj.settings)
        click.echo(f"== {state.work_id} [{state.state}]")
        click.echo(state.text if state.text else state.message)
        failed |= state.state not in ("ok", "absent")
    sys.exit(1 if failed else 0)


@click.command()
@click.option("--campaign", help="One campaign (default: every label).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--n-boot", type=click.IntRange(0), default=200, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--min-pair-n", type=click.IntRange(2), default=2, show_default=True,
              help="Fewest common works for a pair's Cohen's kappa; pairs sharing fewer are "
                   "listed as left out, with the reason.")
@click.pass_obj
def agreement(
    obj: Any, campaign: str | None, as_json: bool, n_boot: int, seed: int, min_pair_n: int
) -> None:
    """Inter-annotator agreement per question and label, with bootstrap intervals."""
    from labeling.reports.agreement import agreement_for
    from labeling.review.campaigns import CampaignError

    try:
        report = agreement_for(obj.engine, obj.schema(), campaign, n_boot=n_boot, seed=seed,
                               min_pair_n=min_pair_n)
    except CampaignError as exc:
        _fail(str(exc))
    if as_json:
        click.echo(json.dumps(report, indent=2, allow_nan=False))
        return
    click.echo(_agreement_table(report))


def _fmt(v: float | None) -> str:
    return "   -  " if v is None else f"{v:6.3f}"


def _ci(ci: list[float] | None) -> str:
    return "" if not ci else f" [{ci[0]:.2f}, {ci[1]:.2f}]"


def _agreement_table(report: dict[str, Any]) -> str:
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
        lines.append("\nCohen's kappa per pair of annotators (question, n common works; "
                     "- = undefined, both gave one and the same answer throughout):")
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
def estimates(obj: Any, campaign: str, as_json: bool) -> None:
    """Design-based prevalence of every label in the frame (probability samples only)."""
    from labeling.reports.evaluation import frame_estimates
    from labeling.review.campaigns import CampaignError

    try:
        report = frame_estimates(obj.engine, obj.schema(), campaign)
    except CampaignError as exc:
        _fail(str(exc))
    if as_json:
        click.echo(json.dumps(report, indent=2, allow_nan=False, default=str))
        return
    if not report["estimable"]:
        click.echo(f"{report['campaign']}: {report['reason']}")
        return
    click.echo(f"{report['campaign']}: frame of {report['population']} works, "
               f"{report['n_validated']} of {report['n_sampled']} sampled works validated")
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
def machines(obj: Any, campaign: str | None, as_json: bool) -> None:
    """Each teacher, the candidate and the consensus against the validated human answers."""
    from labeling.reports.evaluation import machine_report
    from labeling.review.campaigns import CampaignError

    try:
        report = machine_report(obj.engine, obj.schema(), campaign)
    except CampaignError as exc:
        _fail(str(exc))
    click.echo(json.dumps(report, indent=None if not as_json else 2, allow_nan=False,
                          default=str))  # fmt: skip
