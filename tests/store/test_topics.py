"""TopicStore contract on every implementation (SQLite on a real file, PostgreSQL, the twin): names, ids, collisions,
one-transaction creates and deletes, the topic version, the cluster id, and TopicRecord as a value."""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkaguard.store import MemoryTopicStore, StoreError, TopicRecord, TopicSnapshot, TopicStore
from tests.store.conftest import STORES, open_durable


def topic(name: str, n: int = 1, *, partitions: int = 1, configs: dict[str, str] | None = None) -> TopicRecord:
    return TopicRecord(
        name=name, topic_id=uuid.UUID(int=1000 + n), num_partitions=partitions, replication_factor=1,
        configs=configs or {},
    )  # fmt: skip


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TopicStore]:
    store: TopicStore = (
        MemoryTopicStore() if request.param == "memory" else open_durable(request.param, request, tmp_path)
    )
    yield store
    store.close()


def test_both_stores_implement_the_port(store: TopicStore) -> None:
    assert isinstance(store, TopicStore)


def test_an_empty_catalog(store: TopicStore) -> None:
    assert store.list_topics() == []
    assert store.get_topics(["a"]) == {}
    assert store.get_topics_by_id([uuid.UUID(int=5)]) == {}
    assert store.conflicting_topics(["a"]) == {}
    assert store.delete_topics(["a"]) == [None]
    assert store.delete_topics_by_id([uuid.UUID(int=5)]) == [None]


def test_created_topics_are_listed_by_name_and_found_by_name_and_id(store: TopicStore) -> None:
    b = topic("b", 1, partitions=3, configs={"retention.ms": "1000", "cleanup.policy": "compact,delete"})
    a = topic("a", 2, configs={"x": "ünïcode ✓", "empty": ""})
    outcomes = store.create_topics([b, a])
    assert [(o.record, o.created, o.conflict) for o in outcomes] == [(b, True, None), (a, True, None)]
    assert store.list_topics() == [a, b]
    assert store.get_topics(["b", "missing", "b"]) == {"b": b}
    assert store.get_topics_by_id([a.topic_id, uuid.UUID(int=99)]) == {a.topic_id: a}
    assert dict(store.list_topics()[1].configs) == {"cleanup.policy": "compact,delete", "retention.ms": "1000"}
    assert dict(store.list_topics()[0].configs) == {"empty": "", "x": "ünïcode ✓"}


def test_an_existing_name_is_not_created_again_and_keeps_its_id(store: TopicStore) -> None:
    first = topic("orders", 1)
    store.create_topics([first])
    again = topic("orders", 2, partitions=9)
    [outcome] = store.create_topics([again])
    assert not outcome.created
    assert outcome.already_exists
    assert outcome.conflict == first
    assert store.list_topics() == [first]


def test_names_equal_after_dot_to_underscore_collide(store: TopicStore) -> None:
    stored = topic("a.b_c", 1)
    store.create_topics([stored])
    [outcome] = store.create_topics([topic("a_b.c", 2)])
    assert not outcome.created
    assert not outcome.already_exists
    assert outcome.conflict == stored
    assert store.conflicting_topics(["a_b.c", "a.b_c", "a-b-c", "zzz"]) == {"a_b.c": stored, "a.b_c": stored}
    assert store.get_topics(["a_b.c"]) == {}


def test_within_one_call_a_later_record_meets_an_earlier_one(store: TopicStore) -> None:
    x1, x2, dotted, underscored = topic("x", 1), topic("x", 2), topic("p.q", 3), topic("p_q", 4)
    outcomes = store.create_topics([x1, x2, dotted, underscored])
    assert [o.conflict for o in outcomes] == [None, x1, None, dotted]
    assert store.list_topics() == [dotted, x1]


def test_a_taken_topic_id_fails_the_whole_call(store: TopicStore) -> None:
    store.create_topics([topic("a", 1)])
    with pytest.raises(StoreError):
        store.create_topics([topic("b", 2), topic("c", 1)])
    assert [t.name for t in store.list_topics()] == ["a"]


def test_delete_by_name_returns_what_it_removed_in_one_call(store: TopicStore) -> None:
    a, b = topic("a", 1), topic("b", 2)
    store.create_topics([a, b])
    assert store.delete_topics(["b", "missing", "b"]) == [b, None, None]
    assert store.list_topics() == [a]
    # A colliding name is another topic: it does not delete this one.
    store.create_topics([topic("c.d", 3)])
    assert store.delete_topics(["c_d"]) == [None]
    assert [t.name for t in store.list_topics()] == ["a", "c.d"]


def test_delete_by_id(store: TopicStore) -> None:
    a, b = topic("a", 1), topic("b", 2)
    store.create_topics([a, b])
    assert store.delete_topics_by_id([a.topic_id, uuid.UUID(int=7), a.topic_id]) == [a, None, None]
    assert store.list_topics() == [b]
    assert store.get_topics_by_id([a.topic_id]) == {}


def test_a_deleted_name_can_be_created_again_with_a_new_id(store: TopicStore) -> None:
    store.create_topics([topic("t", 1)])
    store.delete_topics(["t"])
    [outcome] = store.create_topics([topic("t", 2, partitions=4)])
    assert outcome.created
    assert store.list_topics() == [topic("t", 2, partitions=4)]


def test_many_names_at_once(store: TopicStore) -> None:
    records = [topic(f"t{i:04}", i) for i in range(2000)]  # more than one chunk of bound parameters
    assert all(o.created for o in store.create_topics(records))
    assert store.get_topics([r.name for r in records]) == {r.name: r for r in records}
    assert len(store.get_topics_by_id([r.topic_id for r in records])) == 2000
    assert len(store.conflicting_topics([r.name for r in records])) == 2000


def test_the_topic_version_counts_every_topic_created_or_deleted(store: TopicStore) -> None:
    assert store.topic_version() == 0
    assert store.load_topics() == TopicSnapshot((), 0)
    a, b = topic("a", 1), topic("b", 2, partitions=3)
    store.create_topics([b, a, topic("a", 3)])  # the repeated name is refused and changes nothing
    assert store.topic_version() == 2
    assert store.load_topics() == TopicSnapshot((a, b), 2)  # sorted by name
    # Refusals, misses and failed calls change nothing, so they take no version.
    assert not store.create_topics([topic("a", 4), topic("a_", 5)])[0].created
    assert store.topic_version() == 3  # "a_" was created
    with pytest.raises(StoreError):
        store.create_topics([topic("c", 6), topic("d", 1)])
    assert store.delete_topics(["missing"]) == [None]
    assert store.delete_topics_by_id([uuid.UUID(int=99)]) == [None]
    assert store.topic_version() == 3
    store.delete_topics(["a", "a_"])
    store.delete_topics_by_id([b.topic_id, b.topic_id])
    assert store.load_topics() == TopicSnapshot((), 6)
    assert store.topic_version() == 6


def test_the_cluster_id_is_kafka_shaped_and_stable(store: TopicStore) -> None:
    cluster_id = store.cluster_id()
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id)
    assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16
    assert not cluster_id.startswith("-")
    assert store.cluster_id() == cluster_id


def test_topic_records_are_immutable_values() -> None:
    configs = {"b": "2", "a": "1"}
    record = topic("t", 1, configs=configs)
    configs["c"] = "3"
    assert dict(record.configs) == {"a": "1", "b": "2"}
    assert list(record.configs) == ["a", "b"]
    with pytest.raises(TypeError):
        record.configs["d"] = "4"  # type: ignore[index]
    same = topic("t", 1, configs={"a": "1", "b": "2"})
    assert record == same
    assert hash(record) == hash(same)
    assert len({record, same, topic("t", 1, configs={"a": "1"})}) == 2
