"""The topic catalog in SQLite: survives reopening, one cluster id per database, the topic version across
connections, the v1 → v2 → v3 migrations, and the table's own guards."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

import pytest

from kafkaguard.store import SqliteStore, StoreError, TopicRecord, TopicSnapshot
from kafkaguard.store.schema import MIGRATIONS, migrate
from tests.store.helpers import acl


def record(name: str, n: int, **configs: str) -> TopicRecord:
    return TopicRecord(name=name, topic_id=uuid.UUID(int=n), num_partitions=n, replication_factor=1, configs=configs)


def test_topics_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    a, b = record("a", 2, **{"retention.ms": "5"}), record("b.c", 3)
    with SqliteStore(path) as store:
        store.create_topics([a, b])
        store.delete_topics(["a"])
        store.create_topics([record("d", 4)])
    with SqliteStore(path) as store:
        assert store.list_topics() == [b, record("d", 4)]
        assert store.conflicting_topics(["b_c"]) == {"b_c": b}
        assert store.check_integrity() == ["ok"]


def test_the_cluster_id_is_made_once_per_database(tmp_path: Path) -> None:
    made: list[str] = []

    def factory() -> str:
        made.append(f"cluster-id-number-{len(made):04}")
        return made[-1]

    path = tmp_path / "k.db"
    with SqliteStore(path, cluster_id_factory=factory) as store:
        first = store.cluster_id()
        assert store.cluster_id() == first
    with SqliteStore(path, cluster_id_factory=factory) as store, SqliteStore(path, cluster_id_factory=factory) as other:
        assert store.cluster_id() == other.cluster_id() == first
    assert made == [first]


def test_another_database_has_another_cluster_id(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "one.db") as one, SqliteStore(tmp_path / "two.db") as two:
        assert one.cluster_id() != two.cluster_id()
    with SqliteStore(tmp_path / "one.db") as one, SqliteStore(tmp_path / "two.db") as two:
        assert one.cluster_id() != two.cluster_id()


def test_a_version_1_database_gains_the_catalog_and_keeps_its_acls(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    raw = sqlite3.connect(path, isolation_level=None)
    assert migrate(raw, MIGRATIONS[:1]) == 1
    raw.execute("INSERT INTO acls VALUES ('id-1', 2, 'orders', 3, 'User:alice', '*', 3, 3)")  # TOPIC LITERAL READ ALLOW
    raw.close()
    with SqliteStore(path) as store:
        assert [(a.id, a.binding) for a in store.load_acls().acls] == [("id-1", acl("orders"))]
        assert store.list_topics() == []
        store.create_topics([record("t", 1)])
        assert store._conn.execute("SELECT version FROM schema_version").fetchone()[0] == len(MIGRATIONS)
    with SqliteStore(path) as store:
        assert [t.name for t in store.list_topics()] == ["t"]


def test_a_version_2_database_gains_the_topic_version_and_keeps_its_topics(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    raw = sqlite3.connect(path, isolation_level=None)
    assert migrate(raw, MIGRATIONS[:2]) == 2
    raw.execute(
        "INSERT INTO topics (name, topic_id, collision_key, num_partitions, replication_factor, configs) "
        "VALUES ('t', ?, 't', 1, 1, '{}')",
        (uuid.UUID(int=1).bytes,),
    )
    raw.close()
    with SqliteStore(path) as store:
        assert store.load_topics() == TopicSnapshot((record("t", 1),), 0)
        store.create_topics([record("u", 2)])
        assert store.topic_version() == 1


def test_the_topic_version_follows_commits_of_another_connection(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    with SqliteStore(path) as first, SqliteStore(path) as second:
        assert first.topic_version() == second.topic_version() == 0
        first.create_topics([record("a", 1), record("b", 2)])
        assert first.topic_version() == second.topic_version() == 2
        second.delete_topics(["a"])
        assert first.topic_version() == second.topic_version() == 3
        # ACL writes leave the topic version alone, and reading one version does not hide a change of the other.
        second.create_acls([acl("orders")])
        second.create_topics([record("c", 3)])
        assert first.acl_version() == 1
        assert first.topic_version() == 4
        assert first.load_topics() == TopicSnapshot((record("b", 2), record("c", 3)), 4)


def test_every_write_to_the_topics_table_takes_a_version(tmp_path: Path) -> None:
    # The counter is kept by triggers, so a writer that is not this code (an operator's sqlite3 shell, a later
    # statement) cannot change the catalog unnoticed.
    path = tmp_path / "k.db"
    with SqliteStore(path) as store:
        store.create_topics([record("t", 1)])
        raw = sqlite3.connect(path, isolation_level=None)
        raw.execute("UPDATE topics SET num_partitions = 5 WHERE name = 't'")
        raw.execute("DELETE FROM topics")
        raw.close()
        assert store.topic_version() == 3


def test_the_table_refuses_what_a_topic_cannot_be(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "k.db") as store:
        for bad in (
            TopicRecord(name="zero", topic_id=uuid.UUID(int=0), num_partitions=1, replication_factor=1),
            TopicRecord(name="p", topic_id=uuid.UUID(int=1), num_partitions=0, replication_factor=1),
            TopicRecord(name="r", topic_id=uuid.UUID(int=2), num_partitions=1, replication_factor=0),
        ):
            with pytest.raises(StoreError, match="CHECK constraint failed"):
                store.create_topics([record("fine", 9), bad])
        assert store.list_topics() == []


def test_configs_are_stored_as_a_json_object(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "k.db") as store:
        store.create_topics([record("t", 1, **{"segment.bytes": "1024", "cleanup.policy": "compact"})])
        row = store._conn.execute("SELECT configs, length(topic_id), created_at FROM topics").fetchone()
    assert row[0] == '{"cleanup.policy": "compact", "segment.bytes": "1024"}'
    assert row[1] == 16
    assert row[2].endswith("Z")
