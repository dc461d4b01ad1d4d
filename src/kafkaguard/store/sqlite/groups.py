"""The ``principal_groups`` table: ``GroupStore`` on the shared connection.

One row per (group, member principal). Every row written or deleted bumps the membership version (triggers, in
the same transaction), so ``membership_version()`` is as cheap as ``acl_version()``.
"""

from __future__ import annotations

from collections.abc import Sequence

from kafkaguard.store.group_rows import memberships, write_changes
from kafkaguard.store.ports import MembershipChange, MembershipSnapshot, MembershipWrite
from kafkaguard.store.sqlite.connection import Database, counter


class GroupTables:
    """``GroupStore`` on the ``principal_groups`` table of ``db``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def membership_version(self) -> int:
        return self._db.polled_counter("membership_version")

    def load_memberships(self) -> MembershipSnapshot:
        with self._db.read() as conn:
            version = counter(conn, "membership_version")
            rows = conn.execute("SELECT group_name, principal FROM principal_groups").fetchall()
        return MembershipSnapshot(memberships(rows), version)

    def alter_memberships(self, changes: Sequence[MembershipChange]) -> MembershipWrite:
        with self._db.write() as conn:
            base = counter(conn, "membership_version")
            write_changes(conn, changes, "qmark")
            # The schema's triggers have counted every row written or deleted.
            version = counter(conn, "membership_version")
            self._db.remember_counter("membership_version", version)
        return MembershipWrite(base, version)
