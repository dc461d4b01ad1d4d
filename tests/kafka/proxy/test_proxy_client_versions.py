"""Handshake hygiene: the versions real clients actually send through the proxy are the Kafka 4-era ones it now
offers (issue 28), not a fallback. confluent-kafka (librdkafka 2.16, whose highest are Produce v10 and Fetch v16)
produces and fetches at KIP-951's versions, by topic id, read from librdkafka's own protocol log. Java's clients
(Produce v11, Fetch v17) are checked the same way in ``ProducerProbe``, ``TopicIdsProbe`` and
``benchmarks.java_load``'s traced warm-up."""

from __future__ import annotations

import logging
import re
import time

from confluent_kafka import Consumer, Producer

from kafkaguard.model import AclOperation, ResourceType
from tests.kafka.broker import KafkaBroker
from tests.kafka.proxy.test_equivalence_kip848 import Collect
from tests.kafka.proxy.test_proxy_clients import PASSWORD, create_topics, grant, proxy_bootstrap, sasl, unique, user
from tests.serving import ServerHandle

#: librdkafka's protocol debug line for a request it sent: "Sent ProduceRequest (v11, 120 bytes @ 0, CorrId 5)".
SENT = re.compile(r"Sent (\w+)Request \(v(\d+),")


def versions_sent(logs: list[str]) -> dict[str, set[int]]:
    sent: dict[str, set[int]] = {}
    for line in logs:
        for api, version in SENT.findall(line):
            sent.setdefault(api, set()).add(int(version))
    return sent


def logged(name: str) -> tuple[logging.Logger, list[str]]:
    logs: list[str] = []
    logger = logging.getLogger(f"librdkafka-versions-{name}")
    logger.addHandler(Collect(logs))
    logger.setLevel(logging.DEBUG)
    return logger, logs


def test_confluent_kafka_produces_and_fetches_at_kip_951_versions_through_the_proxy(
    proxy: ServerHandle, kafka: KafkaBroker
):
    topic, group, name = unique("versions"), unique("versions-group"), user(proxy)
    create_topics(kafka, topic)
    grant(proxy, f"User:{name}", ResourceType.TOPIC, topic, AclOperation.WRITE, AclOperation.READ)
    grant(proxy, f"User:{name}", ResourceType.GROUP, group, AclOperation.READ)

    logger, produced_logs = logged("producer")
    producer = Producer(sasl(proxy_bootstrap(proxy), name, PASSWORD, debug="protocol", logger=logger))
    for i in range(5):
        producer.produce(topic, f"m{i}".encode())
    assert producer.flush(30) == 0

    logger, consumed_logs = logged("consumer")
    consumer = Consumer(sasl(proxy_bootstrap(proxy), name, PASSWORD, debug="protocol", logger=logger,
                             **{"group.id": group, "auto.offset.reset": "earliest"}))  # fmt: skip
    consumer.subscribe([topic])
    received: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(received) < 5:
        assert time.monotonic() < deadline, f"received {len(received)} of 5"
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            received.append(message.value() or b"")
    consumer.close()

    assert sorted(received) == [f"m{i}".encode() for i in range(5)]
    assert min(versions_sent(produced_logs).get("Produce", {0})) >= 10, versions_sent(produced_logs)
    assert min(versions_sent(consumed_logs).get("Fetch", {0})) >= 16, versions_sent(consumed_logs)
