"""`labeling users ...`: local accounts and roles."""

from __future__ import annotations

import sys

import click

from labeling.cli.context import Context
from labeling.errors import InputError

ROLE_NAMES = ["annotator", "lead", "exporter", "admin"]


def register(main: click.Group) -> None:
    """Attach the `users` group to the main group."""
    main.add_command(users)


@click.group()
def users() -> None:
    """Local accounts and roles."""


@users.command("add")
@click.argument("name")
@click.option("--role", type=click.Choice(ROLE_NAMES), required=True, help="What the user may do.")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
@click.pass_obj
def users_add(obj: Context, name: str, role: str, password_stdin: bool) -> None:
    """Add a user with a role (and a password read from stdin)."""
    from labeling.auth.users import add_user

    password = None
    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
        if not password:
            raise InputError("empty password on standard input")
    user = add_user(obj.engine, name, role, password)
    click.echo(f"added {user.name} ({user.role})")


@users.command("list")
@click.pass_obj
def users_list(obj: Context) -> None:
    """List users with role and state; names that render like another user's are marked."""
    from labeling.auth.users import list_users, name_collisions

    people = list_users(obj.engine)
    # Accounts made before names were compared may collide; marked, never locked out.
    collisions = name_collisions(u.name for u in people)
    for u in people:
        line = f"{u.name}\t{u.role}\t{'active' if u.active else 'inactive'}"
        if u.name in collisions:
            line += f"\tlooks like: {', '.join(collisions[u.name])}"
        click.echo(line)


@users.command("set-role")
@click.argument("name")
@click.argument("role", type=click.Choice(ROLE_NAMES))
@click.pass_obj
def users_set_role(obj: Context, name: str, role: str) -> None:
    """Change a user's role."""
    from labeling.auth.users import set_role

    set_role(obj.engine, name, role)
    click.echo(f"{name} is now {role}")


@users.command("deactivate")
@click.argument("name")
@click.pass_obj
def users_deactivate(obj: Context, name: str) -> None:
    """Deactivate a user (their labels are kept)."""
    from labeling.auth.users import set_active

    set_active(obj.engine, name, False)
    click.echo(f"{name} deactivated")
