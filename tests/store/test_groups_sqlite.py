"""Principal groups in the SQLite store (schema version 6): durable across reopening, counted by triggers (so an
operator's own statements move the version too), and added to an older database without touching its data."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from kafkaguard.store import MembershipChange, QuotaChange, SqliteStore
from kafkaguard.store.schema import MIGRATIONS, migrate


def test_memberships_survive_reopening_and_another_connection_sees_the_version_move(tmp_path: Path) -> None:
    path = tmp_path / "kafkaguard.db"
    with SqliteStore(path) as writer, SqliteStore(path) as follower:
        assert follower.membership_version() == 0
        writer.alter_memberships([MembershipChange("ops", "User:alice", member=True)])
        assert follower.membership_version() == writer.membership_version() == 1
    # A row written behind the store's back (an operator's sqlite3 shell) moves the version as well.
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("INSERT INTO principal_groups (group_name, principal) VALUES ('ops', 'User:bob')")
    raw.close()
    with SqliteStore(path) as reopened:
        assert dict(reopened.load_memberships().groups) == {"ops": ("User:alice", "User:bob")}
        assert reopened.membership_version() == 2


def test_a_version_5_database_migrates_to_groups_keeping_its_data(tmp_path: Path) -> None:
    path = tmp_path / "kafkaguard.db"
    connection = sqlite3.connect(path, isolation_level=None)
    assert migrate(connection, MIGRATIONS[:5]) == 5
    connection.close()
    with SqliteStore(path) as store:
        store.alter_quotas([QuotaChange((("user", "alice"),), "producer_byte_rate", 1.0)])
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("UPDATE schema_version SET version = 5")
    connection.execute("DROP TABLE principal_groups")
    connection.execute("DROP TABLE management_events")  # version 7's, rolled back with the others
    connection.execute("DELETE FROM counters WHERE name = 'membership_version'")
    connection.close()
    with SqliteStore(path) as store:
        assert store.membership_version() == 0
        assert len(store.load_quotas().quotas) == 1
        store.alter_memberships([MembershipChange("ops", "User:alice", member=True)])
        assert store.load_memberships().version == 1
