"""Client quotas in the SQLite store: durable across reopening, and visible to another connection's version poll."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from kafkaguard.store import QuotaChange, QuotaRecord, SqliteStore
from kafkaguard.store.schema import MIGRATIONS, migrate

ALICE = (("user", "alice"),)


def test_quotas_survive_reopening_and_another_connection_sees_the_version_move(tmp_path: Path) -> None:
    path = tmp_path / "kafkaguard.db"
    with SqliteStore(path) as writer, SqliteStore(path) as follower:
        assert follower.quota_version() == 0
        writer.alter_quotas([QuotaChange(ALICE, "producer_byte_rate", 1024.0)])
        assert follower.quota_version() == writer.quota_version() == 1
    with SqliteStore(path) as reopened:
        assert reopened.load_quotas().quotas == (QuotaRecord(ALICE, {"producer_byte_rate": 1024.0}),)


def test_a_version_4_database_migrates_to_quotas_keeping_its_data(tmp_path: Path) -> None:
    path = tmp_path / "kafkaguard.db"
    connection = sqlite3.connect(path, isolation_level=None)
    assert migrate(connection, MIGRATIONS[:4]) == 4
    connection.execute("UPDATE counters SET value = 7 WHERE name = 'topic_version'")
    connection.close()
    with SqliteStore(path) as store:
        assert store.topic_version() == 7
        assert store.quota_version() == 0
        store.alter_quotas([QuotaChange(ALICE, "consumer_byte_rate", 5.0)])
        assert store.load_quotas().version == 1
