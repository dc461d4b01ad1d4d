"""The ``principal_groups`` table on PostgreSQL: ``GroupStore``, the twin of ``store.sqlite.groups``.

One row per (group, member principal). Every row written or deleted bumps the membership version (a trigger, in
the same transaction), after the write has locked its counter row.
"""

from __future__ import annotations

from collections.abc import Sequence

from kafkaguard.store.group_rows import memberships, write_changes
from kafkaguard.store.ports import MembershipChange, MembershipSnapshot, MembershipWrite
from kafkaguard.store.postgres.connection import Database, counter, lock_counter, read_counter


class GroupTables:
    """``GroupStore`` on the ``principal_groups`` table."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def membership_version(self) -> int:
        return read_counter(self._db, "membership_version")

    def load_memberships(self) -> MembershipSnapshot:
        with self._db.read() as conn:
            version = counter(conn, "membership_version")
            rows = conn.execute("SELECT group_name, principal FROM principal_groups").fetchall()
        return MembershipSnapshot(memberships(rows), version)

    def alter_memberships(self, changes: Sequence[MembershipChange]) -> MembershipWrite:
        with self._db.write() as conn:
            base = lock_counter(conn, "membership_version")
            write_changes(conn, changes, "format")
            # The schema's trigger has counted every row written or deleted.
            version = counter(conn, "membership_version")
        return MembershipWrite(base, version)
