"""Authorization equivalence for the KIP-848 consumer group protocol (``group.protocol=consumer``): Java's own
``KafkaConsumer`` and ``Admin`` from the broker's kafka-clients 3.9 jar (``tests/kafka/ConsumerGroupProbe.java``,
run from source), once straight to the real Kafka 3.9 broker holding the ACLs, once through ``kafkaguard proxy``
holding the same ACLs. The broker serves the consumer protocol (``tests/kafka/broker.py``:
``group.coordinator.rebalance.protocols=classic,consumer``; Kafka 3.9 has no ``group.version`` feature).

The same client-visible outcomes are required for: a member with group READ consuming and committing (OffsetCommit
v9 and OffsetFetch v9 carry its member epoch), a member without group READ, a member subscribing to a topic it may
not describe, a pattern subscription (a 3.9 client resolves it over what Metadata shows it), two members
rebalancing four partitions (2+2, then 4 when one leaves), and describing the groups (Java's Admin, and
confluent-kafka's ``describe_consumer_groups``, which reads a KIP-848 group's type).

One outcome differs on purpose, and is asserted as such: describing a live group whose member is assigned a topic
the describer may not DESCRIBE. Kafka 3.9 answers the assignment with the topic's name; the proxy answers
TOPIC_AUTHORIZATION_FAILED for the group, as Kafka 4.0 does (KAFKA-18813; ``proxy.handlers.group_admin``).

confluent-kafka (librdkafka 2.16, the pinned version) does not consume here: its ``group.protocol=consumer`` needs
ConsumerGroupHeartbeat v1 (Kafka 4.0), and Kafka 3.9 serves v0 only, so it never joins (straight or proxied:
librdkafka logs "ConsumerGroupHeartbeatRequest not supported by broker"); ``test_librdkafka_needs_v1`` records that.
"""

from __future__ import annotations

import functools
import logging
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclOperation
from confluent_kafka.cimpl import NewTopic

from kafkaguard.authorizer.requests import ApiKey
from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker, java
from tests.kafka.proxy.conftest import ModeProxy, api_versions_of, in_process_modes_only
from tests.kafka.proxy.test_equivalence import GROUP, PASSWORD, PREFIXED, TOPIC, Side, allow, provision, proxy_side

PROBE = Path(__file__).parent.parent / "ConsumerGroupProbe.java"
PROBE_TIMEOUT = 150
PER_PARTITION = 3
USERS = ("member", "describer", "groupie", "nobody")
#: Not on ``--workers 2``: the main test spies on the in-process proxy's upstream requests (``upstream_requests``),
#: ``test_librdkafka_needs_v1`` reads its ``server``, and its JVM probes (about twenty a mode) would cost CI minutes the
#: worker mode's two suites in ``test_equivalence*`` already prove equivalence with.
pytestmark = in_process_modes_only


def acls(side: Side) -> list[Any]:
    n = side.name
    return [
        allow(TOPIC, n("orders"), n("member"), AclOperation.READ),
        allow(TOPIC, n("wide"), n("member"), AclOperation.READ),
        allow(GROUP, n("group"), n("member"), AclOperation.READ, PREFIXED),
        allow(GROUP, n("group"), n("describer"), AclOperation.DESCRIBE, PREFIXED),
        allow(TOPIC, n("orders"), n("describer"), AclOperation.DESCRIBE),
        allow(GROUP, n("group"), n("groupie"), AclOperation.DESCRIBE, PREFIXED),  # the group only, no topic
    ]


def prepare(side: Side, kafka: KafkaBroker) -> None:
    """Topics on the broker (as its admin), filled; users and ACLs through the side's own admin API."""
    admin_config = Side("broker", kafka.bootstrap, side.token).config(ADMIN, password=ADMIN_PASSWORD)
    broker_admin = AdminClient(admin_config)
    topics = [
        NewTopic(side.name("orders"), 2, 1),
        NewTopic(side.name("secret"), 2, 1),
        NewTopic(side.name("wide"), 4, 1),
    ]
    for future in broker_admin.create_topics(topics).values():
        future.result(60)
    producer = Producer(admin_config)
    for topic, partitions in (("orders", 2), ("secret", 2), ("wide", 4)):
        for partition in range(partitions):
            for i in range(PER_PARTITION):
                producer.produce(side.name(topic), f"{topic}-{partition}-{i}".encode(), partition=partition)
    assert producer.flush(30) == 0
    provision(side, USERS, acls(side))


def probe(kafka: KafkaBroker, side: Side, mode: str, user: str, group: str, topics: tuple[str, ...], expected: int,
          *member: str) -> list[str]:  # fmt: skip
    """The probe's output lines for ``side``, its token replaced by ``T`` (the clients' logs go to stderr). A topic
    starting with ``~`` is a pattern subscription: ``~(a|b)`` subscribes to the side's names of a and b."""
    extra = [side.name(member[0]), PASSWORD] if member else []
    names = ",".join("~" + side.name(t[1:]) if t.startswith("~") else side.name(t) for t in topics)
    done = subprocess.run(
        [java(), "-Xmx256m", f"-Dlog4j2.configurationFile={kafka.workdir / 'tools-log4j2.properties'}",
         "-cp", kafka.classpath, str(PROBE), mode, side.bootstrap, side.name(user), PASSWORD,
         side.name(group), names, str(expected), *extra],
        capture_output=True, text=True, timeout=PROBE_TIMEOUT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return [line.replace(side.token, "T") for line in done.stdout.splitlines()]


def described(side: Side, user: str, group: str) -> list[str]:
    """confluent-kafka's ``describe_consumer_groups`` (with authorized operations) of a group, as probe lines."""
    admin = AdminClient(side.config(side.name(user)))
    future = admin.describe_consumer_groups([side.name(group)], include_authorized_operations=True)[side.name(group)]
    try:
        found = future.result(30)
    except KafkaException as e:
        return [f"ERROR {e.args[0].name()}"]
    operations = ",".join(sorted(op.name for op in found.authorized_operations or ()))
    kind = getattr(found, "type", None)
    return [f"STATE {found.state.name} MEMBERS {len(found.members)} TYPE {kind.name if kind else None}",
            f"OPS {operations}"]  # fmt: skip


def outcomes(kafka: KafkaBroker, side: Side) -> dict[str, list[str]]:
    run = functools.partial(probe, kafka, side)
    return {
        "member with group READ consumes and commits": run(
            "consume", "member", "group-a", ("orders",), 2 * PER_PARTITION
        ),
        "member without group READ": run("consume", "member", "other", ("orders",), 1),
        "member subscribing a topic it may not describe": run("consume", "member", "group-b", ("orders", "secret"), 1),
        "a pattern subscription covers only describable topics": run(
            "consume", "member", "group-p", ("~(orders|secret)",), 2 * PER_PARTITION
        ),
        "two members rebalance four partitions": run("rebalance", "member", "group-r", ("wide",), 4 * PER_PARTITION),
        "describer sees the emptied group": run("describe", "describer", "group-a", ("orders",), 0),
        "describer sees a live member's assignment": run("describe", "describer", "group-d", ("orders",), 2, "member"),
        "nobody may not describe": run("describe", "nobody", "group-a", ("orders",), 0),
        "confluent-kafka describes the emptied group": described(side, "describer", "group-a"),
        "confluent-kafka: nobody may not describe": described(side, "nobody", "group-a"),
    }


@pytest.fixture(autouse=True)
def _the_proxy_logs_no_error(mode_proxy: ModeProxy) -> None:
    """Each test of the module fails if the proxy logged an error during it (``mode_proxy``)."""


@pytest.fixture(scope="module")
def sides(session_mode_proxy: ModeProxy, kafka: KafkaBroker) -> tuple[Side, Side]:
    token = uuid.uuid4().hex[:6]
    direct = Side("kafka", kafka.bootstrap, f"k{token}")
    proxied = proxy_side(session_mode_proxy, kafka, token)
    for side in (direct, proxied):
        prepare(side, kafka)
    return direct, proxied


@pytest.mark.timeout(900)
def test_java_consumers_see_the_same_outcomes_through_the_proxy_as_on_kafka(
    sides: tuple[Side, Side], kafka: KafkaBroker, upstream_requests: list[bytes]
):
    direct, proxied = sides
    expected = outcomes(kafka, direct)
    assert expected["member with group READ consumes and commits"] == [
        f"RECORDS {2 * PER_PARTITION}",
        f"COMMITTED eq-T-orders 0 {PER_PARTITION}",
        f"COMMITTED eq-T-orders 1 {PER_PARTITION}",
    ], "the direct run must move and commit messages on the consumer protocol"
    pattern = expected["a pattern subscription covers only describable topics"]
    assert pattern[0] == f"RECORDS {2 * PER_PARTITION}" and all("orders" in line for line in pattern[1:]), pattern
    assert expected["two members rebalance four partitions"][:3] == ["PHASE 1 4 0", "PHASE 2 2 2", "PHASE 3 4 0"]
    assert expected["describer sees a live member's assignment"][:2] == [
        "JOINED 2",
        "STATE Stable MEMBERS 1 TYPE Consumer",
    ]
    assert expected["confluent-kafka describes the emptied group"][0] == "STATE EMPTY MEMBERS 0 TYPE CONSUMER"
    got = outcomes(kafka, proxied)
    for scenario, answer in expected.items():
        assert got[scenario] == answer, scenario
    kip848 = {(68, 0), (69, 0), (8, 9), (9, 9)}  # ConsumerGroupHeartbeat/Describe v0, OffsetCommit/OffsetFetch v9
    forwarded = set(api_versions_of(upstream_requests))
    assert kip848 <= forwarded, f"the proxied run did not use {kip848 - forwarded}"


@pytest.mark.timeout(300)
def test_describing_a_member_assigned_a_topic_the_describer_may_not_describe(
    sides: tuple[Side, Side], kafka: KafkaBroker
):
    """Kafka 3.9 names the topic; the proxy refuses the group, as Kafka 4.0 does (KAFKA-18813)."""
    direct, proxied = sides
    kafka_says = probe(kafka, direct, "describe", "groupie", "group-e", ("orders",), 2, "member")
    proxy_says = probe(kafka, proxied, "describe", "groupie", "group-e", ("orders",), 2, "member")
    assert "ASSIGNED eq-T-orders" in kafka_says
    assert proxy_says == ["JOINED 2", "ERROR TopicAuthorizationException"]


def test_the_broker_runs_the_production_metadata_version(sides: tuple[Side, Side], kafka: KafkaBroker):
    """Kafka 3.9 has no ``group.version`` feature to finalize (``tests/kafka/broker.py``): the consumer protocol is
    on by ``group.coordinator.rebalance.protocols`` alone, at the production metadata version 3.9-IV0 (level 21),
    with no unstable feature level (``transaction.version`` stays unset)."""
    direct, _ = sides
    assert probe(kafka, direct, "features", "member", "unused", ("unused",), 0) == ["FINALIZED metadata.version 21"]


def test_librdkafka_needs_v1(sides: tuple[Side, Side], mode_proxy: ModeProxy):
    """The pinned confluent-kafka cannot use the consumer protocol against Kafka 3.9, straight or proxied: it asks
    for ConsumerGroupHeartbeat v1, which neither offers (the proxy offers exactly the broker's v0)."""
    offered = mode_proxy.handle.server.versions  # type: ignore[attr-defined]
    assert offered[ApiKey.CONSUMER_GROUP_HEARTBEAT] == (0, 0)
    assert offered[ApiKey.CONSUMER_GROUP_DESCRIBE] == (0, 0)
    assert offered[ApiKey.OFFSET_COMMIT][1] == 9 and offered[ApiKey.OFFSET_FETCH][1] == 9
    for side in sides:
        logs: list[str] = []
        logger = logging.getLogger(f"librdkafka-{side.label}")
        logger.addHandler(Collect(logs))
        logger.setLevel(logging.DEBUG)
        settings = {"group.id": side.name("group-c"), "group.protocol": "consumer", "debug": "cgrp",
                    "logger": logger}  # fmt: skip
        consumer = Consumer(side.config(side.name("member"), extra=settings))
        consumer.subscribe([side.name("orders")])
        deadline = time.monotonic() + 30
        while not any("ConsumerGroupHeartbeatRequest not supported" in line for line in logs):
            assert time.monotonic() < deadline, f"{side.label}: librdkafka never said why it does not join"
            assert consumer.poll(0.2) is None, "librdkafka joined on the consumer protocol: update this test"
        assert consumer.assignment() == []
        consumer.close()


class Collect(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__()
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage())
