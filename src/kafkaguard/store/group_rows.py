"""Principal groups as table rows, shared by the SQL stores (SQLite, PostgreSQL): ``(group_name, principal)``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from kafkaguard.store.ports import MembershipChange


class Executes(Protocol):
    """A connection of either SQL store (sqlite3 and psycopg both have ``execute(sql, params)``)."""

    def execute(self, sql: str, params: tuple[str, str], /) -> object: ...


def memberships(rows: Iterable[tuple[Any, ...]]) -> dict[str, tuple[str, ...]]:
    """Group name → its member principals, from ``(group_name, principal)`` rows."""
    groups: dict[str, list[str]] = {}
    for group, principal in rows:
        groups.setdefault(str(group), []).append(str(principal))
    return {group: tuple(members) for group, members in groups.items()}


#: The two statements in each SQL store's parameter style (sqlite3: ``qmark``; psycopg: ``format``).
_STATEMENTS = {
    "qmark": (
        "INSERT INTO principal_groups (group_name, principal) VALUES (?, ?) ON CONFLICT DO NOTHING",
        "DELETE FROM principal_groups WHERE group_name = ? AND principal = ?",
    ),
    "format": (
        "INSERT INTO principal_groups (group_name, principal) VALUES (%s, %s) ON CONFLICT DO NOTHING",
        "DELETE FROM principal_groups WHERE group_name = %s AND principal = %s",
    ),
}


def write_changes(conn: Executes, changes: Sequence[MembershipChange], paramstyle: str) -> None:
    """Apply the changes in order on ``conn`` (``paramstyle``: ``qmark`` for SQLite, ``format`` for psycopg).
    Adding a member twice or removing one that is not there writes no row, so the version triggers count only real
    changes."""
    insert, delete = _STATEMENTS[paramstyle]
    for change in changes:
        conn.execute(insert if change.member else delete, (change.group, change.principal))
