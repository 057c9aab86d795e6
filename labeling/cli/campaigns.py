"""`labeling campaigns ...`: which works, in what order, how many labels each."""

from __future__ import annotations

import json

import click

from labeling.cli.context import Context
from labeling.cli.ranges import MAX_LEASE_MINUTES, SEED, FiniteFloatRange, count_range
from labeling.errors import InputError
from labeling.numbers import INT32_MAX

STRATEGIES = ["score_opus", "score_gpt", "score_max", "score_spread", "teacher_disagreement",
              "threshold_uncertainty", "random", "stratified"]  # fmt: skip


def register(main: click.Group) -> None:
    """Attach the `campaigns` group to the main group."""
    main.add_command(campaigns)


@click.group()
def campaigns() -> None:
    """Labelling campaigns: which works, in what order, how many labels each."""


@campaigns.command("create")
@click.argument("name")
@click.option(
    "--strategy",
    type=click.Choice(STRATEGIES),
    default="score_max",
    show_default=True,
    help="Queue order by a machine score, or a probability sample (random, stratified).",
)
@click.option(
    "--overlap",
    "-k",
    type=count_range(),
    default=1,
    show_default=True,
    help="Independent labels each work needs.",
)
@click.option("--blind", is_flag=True, help="Hide machine scores until the label is submitted.")
@click.option(
    "--assist-rate",
    type=FiniteFloatRange(0, 1, min_open=True, max_open=True),
    help="Show the scores before submit to this share of (work, annotator) assignments, "
    "drawn at random with --seed (the rest see them after submit): measures anchoring "
    "(`labeling anchoring`).",
)
@click.option("--questions", help="Comma-separated schema questions to ask (default: all).")
@click.option(
    "--lease-minutes",
    type=FiniteFloatRange(0.1, MAX_LEASE_MINUTES),
    default=15.0,
    show_default=True,
    help="How long a claimed work stays with its annotator before it is served again.",
)
@click.option("--sample-size", "-n", type=count_range(), help="n for random/stratified.")
@click.option(
    "--allocation",
    default="proportional",
    show_default=True,
    help="Stratified: proportional, equal, or a number per stratum.",
)
@click.option("--bins", help="Stratified: score_max bin edges, e.g. 0,0.1,0.5,1.")
@click.option(
    "--seed",
    type=SEED,
    default=0,
    show_default=True,
    help="Seed of the sample draw and of the assist arms (the same seed, the same draw).",
)
@click.option(
    "--rule",
    type=click.Choice(["unanimous", "majority", "dawid-skene"]),
    default="unanimous",
    show_default=True,
    help="dawid-skene: posterior >= --posterior with k labels, applied by "
    "`labeling aggregate --validate`.",
)
@click.option(
    "--posterior",
    type=FiniteFloatRange(0.5, 1, min_open=True),
    help="The dawid-skene rule's threshold P (default 0.95).",
)
@click.option(
    "--gold-rate",
    type=FiniteFloatRange(0, 1),
    default=0.0,
    show_default=True,
    help="Probability of offering a gold (validated) work as a check instead of the next one.",
)
@click.option(
    "--filter",
    "filter_json",
    help='Work filter as JSON, e.g. \'{"field": ["Medicine"], "year_min": 2015, '
    '"score_max": [0.5, 1]}\'.',
)
@click.pass_obj
def campaigns_create(obj: Context, name: str, strategy: str, overlap: int, blind: bool,
                     assist_rate: float | None, questions: str | None,
                     lease_minutes: float, sample_size: int | None,
                     allocation: str, bins: str | None, seed: int, rule: str,
                     posterior: float | None, gold_rate: float,
                     filter_json: str | None) -> None:  # fmt: skip
    """Create a campaign and queue its works."""
    from labeling.review.campaigns import create_campaign

    try:
        filt = json.loads(filter_json) if filter_json else None
    except ValueError as exc:  # JSONDecodeError, or an integer of more than 4300 digits
        raise InputError(f"--filter is not valid JSON: {exc}") from exc
    alloc: str | int = allocation
    if allocation.isascii() and allocation.isdigit():
        # n per stratum; a count, so within the 32-bit range every count here keeps
        if len(allocation) > 10 or not 1 <= int(allocation) <= INT32_MAX:
            raise InputError(
                f"--allocation: {allocation[:20]} per stratum is not in 1..{INT32_MAX}"
            )
        alloc = int(allocation)
    try:
        edges = [float(x) for x in bins.split(",")] if bins else None
    except ValueError as exc:
        raise InputError(f"--bins must be comma-separated numbers, not {bins!r}") from exc
    info = create_campaign(
        obj.engine, name=name, strategy=strategy, filter=filt, overlap=overlap, blind=blind,
        assist_rate=assist_rate,
        questions=[q.strip() for q in questions.split(",")] if questions else None,
        lease_seconds=int(lease_minutes * 60), sample_size=sample_size, allocation=alloc,
        bins=edges, seed=seed, rule=rule, posterior=posterior, gold_rate=gold_rate,
            schema=obj.schema(),
    )  # fmt: skip
    kind = "probability sample" if info.is_probability_sample else "score order (not a sample)"
    click.echo(f"created campaign {info.name} (id {info.id}): {info.n_items} works, {kind}")


@campaigns.command("list")
@click.pass_obj
def campaigns_list(obj: Context) -> None:
    """List campaigns, newest first: id, name, strategy, k, works done of all, state."""
    from labeling.review.campaigns import list_campaigns

    found = list_campaigns(obj.engine)
    if not found:
        click.echo("no campaigns (see `labeling campaigns create --help`)")
        return
    # Tab-separated for scripts, under one header: k = labels each work needs.
    click.echo("id\tname\tstrategy\tk\tdone/works\tstate")
    for c in found:
        state = "active" if c.active else "closed"
        click.echo(f"{c.id}\t{c.name}\t{c.strategy}\tk={c.overlap}\t{c.n_done}/{c.n_items}\t"
                   f"{state}")  # fmt: skip
