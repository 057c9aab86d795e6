"""CLI commands for single sign-on: `labeling sso ...` manages identity -> user mappings."""

from __future__ import annotations

import getpass
import json
import sys
from typing import Any

import click

from labeling.cli.context import Context
from labeling.cli.errors import EXIT_BAD_INPUT, exit_for
from labeling.cli.ranges import ROW_ID
from labeling.vocabulary import ROLES

ROLE_CHOICE = click.Choice(list(ROLES))


def _who() -> str:
    """Who made a mapping from the command line (the operating-system user)."""
    try:
        return f"cli:{getpass.getuser()}"
    except Exception:  # no name for this uid (e.g. in a container)
        return "cli"


def register(main: click.Group) -> None:
    """Attach the `sso` group to the main group."""
    main.add_command(sso)


@click.group()
def sso() -> None:
    """Single sign-on: which identities may sign in, as which local user (docs/sso.md)."""


def _echo_mapping(verb: str, m: Any) -> None:
    """One line for a mapping made or removed."""
    target = f"user {m.user} ({m.role})" if m.user else f"new users get role {m.role}"
    click.echo(f"{verb} [{m.id}] {m.kind} {m.value} -> {target}")


@sso.command("add-subject")
@click.argument("issuer")
@click.argument("subject")
@click.argument("user")
@click.option("--role", type=ROLE_CHOICE, help="Create USER with this role when missing.")
@click.pass_obj
def add_subject(obj: Context, issuer: str, subject: str, user: str, role: str | None) -> None:
    """Let the identity ISSUER + SUBJECT (the iss and sub claims) sign in as USER."""
    from labeling.auth.sso_mappings import map_subject

    m = map_subject(obj.engine, issuer, subject, user, role=role, created_by=_who())
    _echo_mapping("mapped", m)


@sso.command("add-email")
@click.argument("email")
@click.argument("user")
@click.option("--role", type=ROLE_CHOICE, help="Create USER with this role when missing.")
@click.pass_obj
def add_email(obj: Context, email: str, user: str, role: str | None) -> None:
    """Let whoever the provider verifies as EMAIL sign in as USER."""
    from labeling.auth.sso_mappings import map_email

    m = map_email(obj.engine, email, user, role=role, created_by=_who())
    _echo_mapping("mapped", m)


@sso.command("add-domain")
@click.argument("domain")
@click.option("--role", type=click.Choice([r for r in ROLES if r != "admin"]), required=True,
              help="Role of the users created on their first sign-in.")  # fmt: skip
@click.pass_obj
def add_domain(obj: Context, domain: str, role: str) -> None:
    """Let anyone with a verified address at DOMAIN sign in; new users get --role."""
    from labeling.auth.sso_mappings import map_domain

    m = map_domain(obj.engine, domain, role, created_by=_who())
    _echo_mapping("added", m)


@sso.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the mappings as JSON.")
@click.pass_obj
def list_cmd(obj: Context, as_json: bool) -> None:
    """List every mapping: id, kind, issuer, value, user, role, last use."""
    from labeling.auth.sso_mappings import list_mappings

    rows = list_mappings(obj.engine)
    if as_json:
        click.echo(json.dumps([m.as_dict() for m in rows], indent=2, ensure_ascii=False))
        return
    if not rows:
        click.echo("no mappings (see `labeling sso add-email --help`)")
    for m in rows:
        state = "" if m.active is None else ("active" if m.active else "inactive")
        used = m.last_used_at.isoformat(timespec="seconds") if m.last_used_at else "never"
        click.echo("\t".join([str(m.id), m.kind, m.issuer or "-", m.value, m.user or "(new)",
                              m.role, state or "-", f"last used {used}"]))  # fmt: skip


@sso.command("remove")
@click.argument("ids", type=ROW_ID, nargs=-1, required=True)
@click.pass_obj
def remove(obj: Context, ids: tuple[int, ...]) -> None:
    """Remove mappings by id (see `labeling sso list`); users and labels stay."""
    from labeling.auth.sso import SSOError
    from labeling.auth.sso_mappings import unmap

    code = 0
    for mapping_id in ids:  # one id that cannot be removed does not stop the others
        try:
            _echo_mapping("removed", unmap(obj.engine, mapping_id))
        except SSOError as exc:
            failed, message = exit_for(exc, "sso") or (EXIT_BAD_INPUT, str(exc))
            click.echo(f"error: {message}", err=True)
            code = max(code, failed)
    if code:
        sys.exit(code)
