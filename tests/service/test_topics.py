"""TopicService: CreateTopics rule by rule in Kafka's order (KRaft ControllerApis / ReplicationControlManager),
validate-only, auto-creation, DeleteTopics by name and id, describe from the in-memory catalog, following other
processes, and two processes racing for one name."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import cast

import pytest

from kafkaguard.errors import InvalidConfigError
from kafkaguard.model import KafkaErrorCode
from kafkaguard.service import NewTopic, TopicCreateResult, TopicService
from kafkaguard.service.topics import MANUAL_ASSIGNMENT_UNSUPPORTED, TOPIC_CONFIG_NAMES, topic_name_error
from kafkaguard.store import ZERO_UUID, MemoryTopicStore, SqliteStore, StoreError, TopicRecord, TopicStore
from tests.actors import ACTOR
from tests.service.children import Lines
from tests.service.guarded import GuardedStore
from tests.service.outcomes import code_of, message_of

ROOT = Path(__file__).resolve().parents[2]
NONE = KafkaErrorCode.NONE
INVALID_TOPIC = KafkaErrorCode.INVALID_TOPIC_EXCEPTION
INVALID_REQUEST = KafkaErrorCode.INVALID_REQUEST
EXISTS = KafkaErrorCode.TOPIC_ALREADY_EXISTS
PARTITIONS = KafkaErrorCode.INVALID_PARTITIONS
REPLICATION = KafkaErrorCode.INVALID_REPLICATION_FACTOR
CONFIG = KafkaErrorCode.INVALID_CONFIG
ILLEGAL = "one or more characters other than ASCII alphanumerics, '.', '_' and '-'"


def ids() -> Callable[[], uuid.UUID]:
    counter = iter(range(1, 1_000_000))
    return lambda: uuid.UUID(int=0xABC000 + next(counter))


def new(name: str, partitions: int = -1, replication: int = -1, /, **configs: str | None) -> NewTopic:
    return NewTopic(name=name, num_partitions=partitions, replication_factor=replication, configs=configs)


def outcome(results: list[TopicCreateResult]) -> list[tuple[str, KafkaErrorCode, str | None]]:
    return [(r.name, code_of(r), message_of(r)) for r in results]


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TopicStore]:
    store: TopicStore = SqliteStore(tmp_path / "kafkaguard.db") if request.param == "sqlite" else MemoryTopicStore()
    yield store
    store.close()


@pytest.fixture
def service(store: TopicStore) -> TopicService:
    return TopicService(store, id_factory=ids())


# ------------------------------------------------------------------------------------------------- create


def test_a_topic_is_created_with_its_settings_and_configs(service: TopicService, store: TopicStore) -> None:
    [result] = service.create_topics(
        [new("orders", 6, 1, **{"retention.ms": "60000", "cleanup.policy": "compact"})], actor=ACTOR
    )
    assert result.succeeded
    assert (code_of(result), message_of(result)) == (NONE, None)
    assert result.topic_id == uuid.UUID(int=0xABC001)
    assert (result.num_partitions, result.replication_factor) == (6, 1)
    assert dict(result.configs) == {"cleanup.policy": "compact", "retention.ms": "60000"}
    assert store.list_topics() == [
        TopicRecord(name="orders", topic_id=result.topic_id, num_partitions=6, replication_factor=1,
                    configs={"cleanup.policy": "compact", "retention.ms": "60000"})
    ]  # fmt: skip


def test_minus_one_takes_the_services_defaults(store: TopicStore) -> None:
    service = TopicService(store, default_partitions=3, default_replication_factor=2, broker_count=2)
    [result] = service.create_topics([new("t")], actor=ACTOR)
    assert (code_of(result), result.num_partitions, result.replication_factor) == (NONE, 3, 2)
    assert result.topic_id != ZERO_UUID


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "the empty string is not allowed"),
        (".", "'.' is not allowed"),
        ("..", "'..' is not allowed"),
        ("x" * 250, f"the length of '{'x' * 250}' is longer than the max allowed length 249"),
        ("a b", "'a b' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
        ("tópico", "'tópico' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
        ("a/b", "'a/b' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
    ],
)
def test_invalid_names_get_kafkas_topic_validate_message(service: TopicService, name: str, reason: str) -> None:
    assert outcome(service.create_topics([new(name)], actor=ACTOR)) == [
        (name, INVALID_TOPIC, f"Topic name is invalid: {reason}")
    ]
    assert service.describe() == []


def test_valid_names() -> None:
    for name in ("a", "...", "x" * 249, "Az09._-", "__consumer_offsets", "-leading-dash"):
        assert topic_name_error(name) is None, name


def test_a_name_twice_in_one_request_gets_one_result_and_is_not_created(service: TopicService) -> None:
    results = service.create_topics([new("a"), new("dup", 2), new("b"), new("dup", 3)], actor=ACTOR)
    assert outcome(results) == [
        ("a", NONE, None),
        ("dup", INVALID_REQUEST, "Duplicate topic name."),
        ("b", NONE, None),
    ]
    assert [d.name for d in service.describe()] == ["a", "b"]


def test_the_cluster_metadata_topic_is_never_created(service: TopicService) -> None:
    assert outcome(service.create_topics([new("__cluster_metadata")], actor=ACTOR)) == [
        ("__cluster_metadata", INVALID_REQUEST, "Creation of internal topic __cluster_metadata is prohibited.")
    ]


def test_an_existing_topic(service: TopicService) -> None:
    first = service.create_topics([new("orders", 2)], actor=ACTOR)[0]
    results = service.create_topics([new("orders", 5), new("other")], actor=ACTOR)
    assert outcome(results) == [("orders", EXISTS, "Topic 'orders' already exists."), ("other", NONE, None)]
    assert (results[0].topic_id, results[0].num_partitions, results[0].replication_factor) == (ZERO_UUID, -1, -1)
    assert service.describe(["orders"])[0].record is not None
    assert service.describe(["orders"])[0].topic_id == first.topic_id


def test_colliding_names(service: TopicService) -> None:
    service.create_topics([new("metrics.cpu")], actor=ACTOR)
    results = service.create_topics([new("metrics_cpu"), new("a.b"), new("a_b")], actor=ACTOR)
    assert outcome(results) == [
        ("metrics_cpu", INVALID_TOPIC, "Topic 'metrics_cpu' collides with existing topic: metrics.cpu"),
        ("a.b", NONE, None),
        # kafkaguard refuses a collision within one request too (Kafka would store both).
        ("a_b", INVALID_TOPIC, "Topic 'a_b' collides with existing topic: a.b"),
    ]
    assert [d.name for d in service.describe()] == ["a.b", "metrics.cpu"]


def test_configs_null_values_then_unknown_names(service: TopicService) -> None:
    results = service.create_topics(
        [
            new("nulls", **{"retention.ms": None, "bogus": "1", "segment.ms": None}),
            new("unknown", **{"retention.ms": "1", "no.such.config": "x", "also.unknown": "y"}),
            new("broker-name", **{"log.retention.ms": "1"}),
            new("fine", **dict.fromkeys(TOPIC_CONFIG_NAMES, "1")),
        ],
        actor=ACTOR,
    )
    assert outcome(results) == [
        ("nulls", CONFIG, "Null value not supported for topic configs: retention.ms,segment.ms"),
        ("unknown", CONFIG, "Unknown topic config name: no.such.config"),
        ("broker-name", CONFIG, "Unknown topic config name: log.retention.ms"),
        ("fine", NONE, None),
    ]
    assert len(TOPIC_CONFIG_NAMES) == 36
    assert {"cleanup.policy", "retention.ms", "retention.bytes", "segment.bytes", "min.insync.replicas",
            "max.message.bytes", "compression.type"} <= TOPIC_CONFIG_NAMES  # fmt: skip


def test_config_errors_come_before_partition_errors(service: TopicService) -> None:
    assert code_of(service.create_topics([new("t", 0, 0, bogus="1")], actor=ACTOR)[0]) is CONFIG


def test_manual_assignments_are_refused(service: TopicService) -> None:
    assignment = ((0, (1,)),)
    results = service.create_topics(
        [
            NewTopic(name="rf", replication_factor=1, assignments=assignment),
            NewTopic(name="np", num_partitions=1, assignments=assignment),
            NewTopic(name="ours", assignments=assignment),
        ],
        actor=ACTOR,
    )
    assert outcome(results) == [
        (
            "rf",
            INVALID_REQUEST,
            "A manual partition assignment was specified, but replication factor was not set to -1.",
        ),
        ("np", INVALID_REQUEST, "A manual partition assignment was specified, but numPartitions was not set to -1."),
        ("ours", INVALID_REQUEST, MANUAL_ASSIGNMENT_UNSUPPORTED),
    ]
    assert "not supported by kafkaguard" in MANUAL_ASSIGNMENT_UNSUPPORTED
    assert service.describe() == []


def test_partition_counts(service: TopicService) -> None:
    results = service.create_topics(
        [new("zero", 0), new("minus-two", -2), new("one", 1), new("many", 10_000)], actor=ACTOR
    )
    message = "Number of partitions was set to an invalid non-positive value."
    assert outcome(results) == [
        ("zero", PARTITIONS, message),
        ("minus-two", PARTITIONS, message),
        ("one", NONE, None),
        ("many", NONE, None),
    ]


def test_replication_factors(store: TopicStore) -> None:
    service = TopicService(store, broker_count=1)
    results = service.create_topics(
        [new("zero", 1, 0), new("minus-two", 1, -5), new("three", 1, 3), new("one", 1, 1)], actor=ACTOR
    )
    message = "Replication factor must be larger than 0, or -1 to use the default value."
    assert outcome(results) == [
        ("zero", REPLICATION, message),
        ("minus-two", REPLICATION, message),
        ("three", REPLICATION, "Unable to replicate the partition 3 time(s): The target replication factor of 3 "
                               "cannot be reached because only 1 broker(s) are registered."),
        ("one", NONE, None),
    ]  # fmt: skip


def test_replication_factor_is_checked_before_partitions(service: TopicService) -> None:
    assert code_of(service.create_topics([new("t", 0, 0)], actor=ACTOR)[0]) is REPLICATION


def test_a_default_above_the_broker_count_fails_like_an_explicit_one(store: TopicStore) -> None:
    service = TopicService(store, default_replication_factor=3, broker_count=2)
    [result] = service.create_topics([new("t")], actor=ACTOR)
    assert code_of(result) is REPLICATION
    assert "replication factor of 3 cannot be reached because only 2 broker(s)" in str(message_of(result))


def test_every_error_has_kafkas_code_number() -> None:
    assert [int(c) for c in (KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC,
            KafkaErrorCode.TOPIC_AUTHORIZATION_FAILED, EXISTS, PARTITIONS, REPLICATION, CONFIG, INVALID_REQUEST,
            KafkaErrorCode.UNKNOWN_TOPIC_ID)] == [3, 17, 29, 36, 37, 38, 40, 42, 100]  # fmt: skip
    assert EXISTS.default_message == "Topic with this name already exists."
    assert EXISTS.wire_message("Topic 'x' already exists.") == "Topic 'x' already exists."


def test_bad_settings_are_refused(store: TopicStore) -> None:
    with pytest.raises(InvalidConfigError, match="default_partitions must be at least 1, not 0"):
        TopicService(store, default_partitions=0)
    with pytest.raises(InvalidConfigError, match="default_replication_factor must be at least 1, not -1"):
        TopicService(store, default_replication_factor=-1)
    with pytest.raises(InvalidConfigError, match="broker_count must be at least 1, not 0"):
        TopicService(store, broker_count=0)


def test_results_follow_the_request_order_with_mixed_outcomes(service: TopicService) -> None:
    service.create_topics([new("exists")], actor=ACTOR)
    names = ["z", "exists", "bad name", "a", "y"]
    results = service.create_topics([new(name) for name in names], actor=ACTOR)
    assert [r.name for r in results] == names
    assert [code_of(r) for r in results] == [NONE, EXISTS, INVALID_TOPIC, NONE, NONE]


# ------------------------------------------------------------------------------------------ validate only


def test_validate_only_checks_everything_and_changes_nothing(service: TopicService, store: TopicStore) -> None:
    service.create_topics([new("exists"), new("a.b")], actor=ACTOR)
    before = store.list_topics()
    results = service.create_topics(
        [
            new("new", 4, 1, **{"retention.ms": "1"}),
            new("exists"),
            new("a_b"),
            new("bad!"),
            new("p", 0),
            new("c", bogus="1"),
        ],
        validate_only=True,
        actor=ACTOR,
    )
    assert [code_of(r) for r in results] == [NONE, EXISTS, INVALID_TOPIC, INVALID_TOPIC, PARTITIONS, CONFIG]
    assert (results[0].num_partitions, results[0].replication_factor, dict(results[0].configs)) == (
        4,
        1,
        {"retention.ms": "1"},
    )
    assert results[0].topic_id != ZERO_UUID  # a fresh id, as Kafka's validate-only answer has
    assert store.list_topics() == before
    assert service.create_topics([new("new")], actor=ACTOR)[0].succeeded


# ------------------------------------------------------------------------------------------ auto-creation


def test_auto_create_uses_the_defaults(store: TopicStore) -> None:
    service = TopicService(store, default_partitions=4, id_factory=ids())
    result = service.auto_create("events", actor=ACTOR)
    assert (code_of(result), result.num_partitions, result.replication_factor) == (NONE, 4, 1)
    assert dict(result.configs) == {}
    assert [d.name for d in service.describe()] == ["events"]


def test_auto_create_of_an_existing_topic_answers_with_the_stored_one(service: TopicService) -> None:
    created = service.create_topics([new("events", 7)], actor=ACTOR)[0]
    again = service.auto_create("events", actor=ACTOR)
    assert again.succeeded
    assert (again.topic_id, again.num_partitions) == (created.topic_id, 7)


def test_auto_create_refuses_what_create_refuses(service: TopicService) -> None:
    assert code_of(service.auto_create("bad name", actor=ACTOR)) is INVALID_TOPIC
    assert code_of(service.auto_create("__cluster_metadata", actor=ACTOR)) is INVALID_REQUEST
    service.auto_create("a.b", actor=ACTOR)
    assert outcome([service.auto_create("a_b", actor=ACTOR)]) == [
        ("a_b", INVALID_TOPIC, "Topic 'a_b' collides with existing topic: a.b")
    ]


# ------------------------------------------------------------------------------------------------- delete


def test_delete_by_name(service: TopicService) -> None:
    created = {r.name: r.topic_id for r in service.create_topics([new("a"), new("b"), new("c")], actor=ACTOR)}
    results = service.delete_topics(["b", "missing", "c", "c", "a"], actor=ACTOR)
    assert [(r.name, r.topic_id, code_of(r), message_of(r)) for r in results] == [
        ("b", created["b"], NONE, None),
        (
            "missing",
            ZERO_UUID,
            KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            "This server does not host this topic-partition.",
        ),
        ("c", ZERO_UUID, INVALID_REQUEST, "Duplicate topic name."),
        ("a", created["a"], NONE, None),
    ]
    assert [d.name for d in service.describe()] == ["c"]  # a duplicated name is not deleted


def test_delete_by_id(service: TopicService) -> None:
    created = {r.name: r.topic_id for r in service.create_topics([new("a"), new("b"), new("c")], actor=ACTOR)}
    unknown = uuid.UUID(int=42)
    results = service.delete_topics_by_id([created["a"], unknown, created["b"], created["b"], ZERO_UUID], actor=ACTOR)
    assert [(r.name, r.topic_id, code_of(r), message_of(r)) for r in results] == [
        ("a", created["a"], NONE, None),
        (None, unknown, KafkaErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID."),
        (None, created["b"], INVALID_REQUEST, "Duplicate topic id."),
        (None, ZERO_UUID, INVALID_REQUEST, "Neither topic name nor id were specified."),
    ]
    assert [d.name for d in service.describe()] == ["b", "c"]


def test_a_deleted_topic_can_be_created_again(service: TopicService) -> None:
    first = service.create_topics([new("t")], actor=ACTOR)[0]
    assert service.delete_topics(["t"], actor=ACTOR)[0].succeeded
    second = service.create_topics([new("t", 3)], actor=ACTOR)[0]
    assert second.succeeded
    assert second.topic_id != first.topic_id
    assert code_of(service.describe_by_id([first.topic_id])[0]) is KafkaErrorCode.UNKNOWN_TOPIC_ID


# ----------------------------------------------------------------------------------------------- describe


def test_describe(service: TopicService) -> None:
    created = {
        r.name: r for r in service.create_topics([new("b", 2), new("a", 1, 1, **{"retention.ms": "9"})], actor=ACTOR)
    }
    everything = service.describe()
    assert [(d.name, code_of(d), d.topic_id) for d in everything] == [
        ("a", NONE, created["a"].topic_id),
        ("b", NONE, created["b"].topic_id),
    ]
    assert everything[0].record is not None
    assert dict(everything[0].record.configs) == {"retention.ms": "9"}
    named = service.describe(["b", "nope", "b", "no way"])
    assert [(d.name, code_of(d), message_of(d)) for d in named] == [
        ("b", NONE, None),
        ("nope", KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."),
        ("no way", INVALID_TOPIC, f"Topic name is invalid: 'no way' contains {ILLEGAL}"),
    ]
    assert service.describe([]) == []


def test_describe_by_id(service: TopicService) -> None:
    [a] = service.create_topics([new("a")], actor=ACTOR)
    unknown = uuid.UUID(int=7)
    results = service.describe_by_id([unknown, a.topic_id, unknown])
    assert [(d.name, d.topic_id, code_of(d)) for d in results] == [
        (None, unknown, KafkaErrorCode.UNKNOWN_TOPIC_ID),
        ("a", a.topic_id, NONE),
    ]


def test_describe_and_the_cluster_id_read_no_store(store: TopicStore) -> None:
    guarded = GuardedStore(store)
    service = TopicService(cast(TopicStore, guarded), id_factory=ids())
    cluster_id = service.cluster_id()
    [a] = service.create_topics([new("a")], actor=ACTOR)
    guarded.closed = True
    assert service.cluster_id() == cluster_id
    assert [(d.name, d.topic_id) for d in service.describe()] == [("a", a.topic_id)]
    assert [code_of(d) for d in service.describe(["a", "b"])] == [NONE, KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert [d.name for d in service.describe_by_id([a.topic_id, uuid.UUID(int=1)])] == ["a", None]
    assert guarded.refused == []


def test_the_catalog_is_a_snapshot_that_a_read_holds_unchanged(service: TopicService) -> None:
    service.create_topics([new("a")], actor=ACTOR)
    before = service.catalog
    service.create_topics([new("b")], actor=ACTOR)
    service.delete_topics(["a"], actor=ACTOR)
    assert list(before.by_name) == ["a"]
    assert list(service.catalog.by_name) == ["b"]
    assert service.catalog.version == service.version == before.version + 2


def test_another_connection_is_followed_by_poll_and_own_writes_at_once(tmp_path: Path) -> None:
    path = tmp_path / "kafkaguard.db"
    with SqliteStore(path) as first_store, SqliteStore(path) as second_store:
        first, second = TopicService(first_store), TopicService(second_store)
        assert first.cluster_id() == second.cluster_id()
        first.create_topics([new("a")], actor=ACTOR)
        assert [d.name for d in first.describe()] == ["a"]  # its own write, at once
        assert second.describe() == []  # the other's, not until it polls
        assert second.poll() is True
        assert [d.name for d in second.describe()] == ["a"]
        assert second.poll() is False
        second.delete_topics(["a"], actor=ACTOR)
        assert first.poll() is True
        assert first.describe() == []
        # A write after another connection's write, with no poll in between, catches up with it as well.
        second.create_topics([new("b")], actor=ACTOR)
        first.create_topics([new("c")], actor=ACTOR)
        assert [d.name for d in first.describe()] == ["b", "c"]
        assert first.version == second_store.topic_version() == 4


def test_a_stale_catalog_still_answers_auto_create_with_the_stored_topic(tmp_path: Path) -> None:
    path = tmp_path / "kafkaguard.db"
    with SqliteStore(path) as first_store, SqliteStore(path) as second_store:
        first, second = TopicService(first_store), TopicService(second_store)
        [created] = second.create_topics([new("events", 3)], actor=ACTOR)
        assert code_of(first.describe(["events"])[0]) is KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        again = first.auto_create("events", actor=ACTOR)
        assert (code_of(again), again.topic_id, again.num_partitions) == (NONE, created.topic_id, 3)


def test_a_committed_write_shows_even_when_the_version_cannot_be_read_after_it() -> None:
    class VersionFails(MemoryTopicStore):
        failing = False

        def topic_version(self) -> int:
            if self.failing:
                raise StoreError("the disk went away")
            return super().topic_version()

    store = VersionFails()
    service = TopicService(store, id_factory=ids())
    store.failing = True
    [created] = service.create_topics([new("a")], actor=ACTOR)
    assert created.succeeded  # the store committed it: the request must not fail
    assert [d.name for d in service.describe()] == ["a"]
    assert service.version == -1  # unknown, so the next poll reloads
    store.failing = False
    assert service.poll() is True
    assert (service.version, [d.name for d in service.describe()]) == (1, ["a"])


@pytest.mark.integration
def test_two_processes_see_each_others_topics_within_one_second(tmp_path: Path) -> None:
    path = tmp_path / "kafkaguard.db"
    with SqliteStore(path) as store:
        service = TopicService(store)
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.service.topic_follower_child", str(path)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            lines = Lines(child)
            lines.wait_for("ready", timeout=20)
            deadline = time.monotonic() + 1.0
            while [d.name for d in service.describe()] != ["from-child"]:
                assert time.monotonic() < deadline, "this process did not see the other's topic within 1 s"
                service.poll()
                time.sleep(0.01)
            service.create_topics([new("orders")], actor=ACTOR)
            assert lines.wait_for("topics from-child,orders", timeout=1.0) < 1.0
            service.delete_topics(["from-child"], actor=ACTOR)
            assert lines.wait_for("topics orders", timeout=1.0) < 1.0
        finally:
            child.kill()
            child.wait(timeout=10)
            assert child.stdout is not None
            child.stdout.close()


# ---------------------------------------------------------------------------------------- durability, ids


def test_the_catalog_and_the_cluster_id_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "kafkaguard.db"
    with SqliteStore(path) as store:
        service = TopicService(store)
        cluster_id = service.cluster_id()
        created = service.create_topics([new("orders", 3, **{"retention.ms": "1"})], actor=ACTOR)[0]
    with SqliteStore(path) as store:
        service = TopicService(store)
        assert service.cluster_id() == cluster_id
        [described] = service.describe(["orders"])
        assert described.record == TopicRecord(
            name="orders",
            topic_id=created.topic_id,
            num_partitions=3,
            replication_factor=1,
            configs={"retention.ms": "1"},
        )
        assert code_of(service.create_topics([new("orders")], actor=ACTOR)[0]) is EXISTS
    with SqliteStore(tmp_path / "other.db") as store:
        assert TopicService(store).cluster_id() != cluster_id


def test_two_processes_creating_the_same_topics_one_wins_each(tmp_path: Path) -> None:
    path, go_file, count = tmp_path / "kafkaguard.db", tmp_path / "go", 40
    SqliteStore(path).close()  # migrated once, so the racers race on topics and the cluster id only
    racers = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.service.topic_race_child", str(path), str(go_file), str(count)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        for racer in racers:
            assert racer.stdout is not None
            assert racer.stdout.readline() == "ready\n"
        go_file.touch()
        reports = [json.loads(racer.communicate(timeout=60)[0]) for racer in racers]
    finally:
        for racer in racers:
            if racer.poll() is None:
                racer.kill()
    assert reports[0]["cluster_id"] == reports[1]["cluster_id"]
    for i in range(count):
        codes = sorted(report["codes"][f"race-{i}"] for report in reports)
        assert codes == [NONE, EXISTS], f"race-{i}: {codes}"
    with SqliteStore(path) as store:
        assert [t.name for t in store.list_topics()] == sorted(f"race-{i}" for i in range(count))
        assert store.cluster_id() == reports[0]["cluster_id"]


def test_partition_count_is_limited_per_topic(service: TopicService) -> None:
    results = service.create_topics([new("huge", 10_001, 1), new("largest", 10_000, 1)], actor=ACTOR)
    assert code_of(results[0]) is PARTITIONS
    assert message_of(results[0]) == "Number of partitions 10001 exceeds the limit of 10000 partitions per topic."
    assert code_of(results[1]) is NONE and results[1].num_partitions == 10_000
