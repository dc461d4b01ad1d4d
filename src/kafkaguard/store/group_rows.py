"""Principal groups as table rows, shared by the SQL stores (SQLite, PostgreSQL): ``(group_name, principal)``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def memberships(rows: Iterable[tuple[Any, ...]]) -> dict[str, tuple[str, ...]]:
    """Group name → its member principals, from ``(group_name, principal)`` rows."""
    groups: dict[str, list[str]] = {}
    for group, principal in rows:
        groups.setdefault(str(group), []).append(str(principal))
    return {group: tuple(members) for group, members in groups.items()}
