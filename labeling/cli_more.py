"""CLI commands for campaigns, abstracts, agreement, export and backups."""

from __future__ import annotations

import click


def register(main: click.Group) -> None:
    """Attach the commands of this module to the main group."""
