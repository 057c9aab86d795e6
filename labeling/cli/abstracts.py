"""`labeling abstracts ...`: warm the OpenAlex abstract cache, show abstracts."""

from __future__ import annotations

import sys

import click

from labeling.cli.context import Context
from labeling.cli.ranges import count_range
from labeling.errors import InputError


def register(main: click.Group) -> None:
    """Attach the `abstracts` group to the main group."""
    main.add_command(abstracts)


@click.group()
def abstracts() -> None:
    """Abstracts from OpenAlex: warm the cache, show one."""


@abstracts.command("prefetch")
@click.option("--campaign", help="Warm the next works of this campaign's queue.")
@click.option(
    "--limit",
    type=count_range(),
    default=500,
    show_default=True,
    help="With --campaign: how many of the next works.",
)
@click.option("--ids", help="Comma-separated work ids instead of a campaign.")
@click.pass_obj
def abstracts_prefetch(obj: Context, campaign: str | None, limit: int, ids: str | None) -> None:
    """Fetch and cache abstracts ahead of a labelling session."""
    from labeling.abstracts.cache import prefetch

    if bool(campaign) == bool(ids):
        raise InputError("give exactly one of --campaign or --ids")
    if ids:
        work_ids = [x.strip() for x in ids.split(",") if x.strip()]
    else:
        from labeling.review.campaigns import get_campaign
        from labeling.review.queue import upcoming_work_ids

        assert campaign  # exactly one of the two, checked above
        info = get_campaign(obj.engine, campaign)
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
def abstracts_show(obj: Context, work_ids: tuple[str, ...]) -> None:
    """Print works' de-inverted abstracts (from the cache, else fetched)."""
    from labeling.abstracts.cache import show_abstract

    failed = False
    for wid in work_ids:
        state = show_abstract(obj.engine, wid, settings=obj.settings)
        click.echo(f"== {state.work_id} [{state.state}]")
        click.echo(state.text if state.text else state.message)
        failed |= state.state not in ("ok", "absent")
    sys.exit(1 if failed else 0)
