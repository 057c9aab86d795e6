"""Which role may open which page: the one table every page and the navigation read."""

from __future__ import annotations

from labeling.errors import Denied

PAGE_ROLES: dict[str, frozenset[str]] = {
    "home": frozenset({"annotator", "lead", "exporter", "admin"}),
    "label": frozenset({"annotator", "lead"}),
    "campaigns": frozenset({"lead", "admin"}),
    "adjudicate": frozenset({"lead"}),
    "monitor": frozenset({"lead"}),
    "export": frozenset({"exporter", "lead", "admin"}),
    "admin": frozenset({"admin"}),
}


class AccessDenied(Denied, PermissionError):
    """The signed-in user's role may not open this page."""


def can_open(role: str | None, page: str) -> bool:
    """Whether `role` may open `page` (unknown pages and no role: never)."""
    return role is not None and role in PAGE_ROLES.get(page, frozenset())


def pages_for(role: str | None) -> list[str]:
    """The pages a role sees in the navigation, in menu order."""
    return [page for page in PAGE_ROLES if can_open(role, page)]


def check(role: str | None, page: str) -> None:
    """Raise AccessDenied unless `role` may open `page`."""
    if not can_open(role, page):
        raise AccessDenied(f"the {role or 'anonymous'} role cannot open the {page} page")
