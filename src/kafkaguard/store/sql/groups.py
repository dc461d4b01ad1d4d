"""The ``principal_groups`` table: ``GroupStore`` on either SQL database.

One row per (group, member principal); the group is the name after ``Group:``. Every row written or deleted bumps
the membership version (the schema's triggers, in the same transaction), after the write has locked its counter;
``membership_version()`` is as cheap as ``acl_version()``.
"""

from __future__ import annotations

from collections.abc import Sequence

from kafkaguard.store.ports import History, MembershipChange, MembershipSnapshot, MembershipWrite
from kafkaguard.store.sql.history import written
from kafkaguard.store.sql.transaction import Database


class GroupTables:
    """``GroupStore`` on the ``principal_groups`` table of ``db``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def membership_version(self) -> int:
        return self._db.polled_counter("membership_version")

    def load_memberships(self) -> MembershipSnapshot:
        with self._db.read() as tx:
            version = tx.counter("membership_version")
            rows = tx.all("SELECT group_name, principal FROM principal_groups")
        groups: dict[str, list[str]] = {}
        for group, principal in rows:
            groups.setdefault(str(group), []).append(str(principal))
        return MembershipSnapshot({group: tuple(members) for group, members in groups.items()}, version)

    def alter_memberships(
        self, changes: Sequence[MembershipChange], *, history: History[MembershipWrite] | None = None
    ) -> MembershipWrite:
        with self._db.write() as tx:
            base = tx.lock_counter("membership_version")
            # In order. Adding a member twice or removing one that is not there writes no row, so the version
            # triggers count only real changes.
            for change in changes:
                if change.member:
                    tx.run(
                        "INSERT INTO principal_groups (group_name, principal) VALUES (?, ?) ON CONFLICT DO NOTHING",
                        (change.group, change.principal),
                    )
                else:
                    tx.run(
                        "DELETE FROM principal_groups WHERE group_name = ? AND principal = ?",
                        (change.group, change.principal),
                    )
            # The schema's triggers have counted every row written or deleted.
            version = tx.counter("membership_version")
            self._db.remember_counter("membership_version", version)
            return written(tx, history, MembershipWrite(base, version))
