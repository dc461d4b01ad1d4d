"""A rolling restart of a kafkaguard fleet under load (issue 39's proof): ``scripts/run-fleet``'s topology
(``tests.kafka.fleet``: two Kafka 3.9 brokers, PostgreSQL, two ``kafkaguard proxy --workers 2``, HAProxy with PROXY
protocol v2 and ``/healthz`` checks), an idempotent producer and a consumer group through the balancer, while each
proxy is stopped with SIGTERM (its graceful drain) and started again in turn, then each broker.

Proven: every acknowledged write is in the topic exactly once (read back from the start without a group), no
delivery failed, each proxy exited 0 from its drain, and the group consumed after the last restart. The longest
pause between two acknowledgements and between two consumed records is measured and reported (not asserted: this
machine's speed varies; it is logged, and kept as the test's user properties).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from tests.kafka.fleet import FLEET_ADMIN, FLEET_ADMIN_PASSWORD, Fleet, running_fleet

TIMEOUT = 60.0
#: Between restarts: the clients settle on the new shape before the next one.
SETTLE_S = 3.0


@pytest.fixture(scope="module")
def fleet(kafka_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    with running_fleet(tmp_path_factory.mktemp("fleet"), kafka_dist) as started:
        yield started


def client(fleet: Fleet, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": fleet.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": FLEET_ADMIN, "sasl.password": FLEET_ADMIN_PASSWORD,
            **extra}  # fmt: skip


class Load:
    """An idempotent producer (acks=all) writing 0, 1, 2 … as fast as 2 ms apart, and a group consumer, each in
    its thread; what each saw and when."""

    def __init__(self, fleet: Fleet, topic: str) -> None:
        self.topic = topic
        self.producer = Producer(client(fleet, **{"enable.idempotence": True, "acks": "all", "linger.ms": 5,
                                                  "message.timeout.ms": 300_000}))  # fmt: skip
        self.consumer = Consumer(client(fleet, **{"group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                                                  "enable.auto.commit": True}))  # fmt: skip
        self.acked: list[tuple[float, int]] = []
        self.failed: list[KafkaError] = []
        self.consumed: list[tuple[float, int]] = []
        self.sent = 0
        self.stopping = threading.Event()
        self.produced = threading.Event()  # the producer has flushed: ``acked`` is final
        self.threads = [threading.Thread(target=self._produce), threading.Thread(target=self._consume)]

    def _delivered(self, error: KafkaError | None, message: Any) -> None:
        if error is not None:
            self.failed.append(error)
        else:
            self.acked.append((time.monotonic(), int(message.value() or b"-1")))

    def _produce(self) -> None:
        while not self.stopping.is_set():
            self.producer.produce(self.topic, str(self.sent).encode(), on_delivery=self._delivered)
            self.sent += 1
            self.producer.poll(0.002)  # pacing: about 500 records a second, delivery reports served
        self.producer.flush(TIMEOUT * 5)

    def _consume(self) -> None:
        self.consumer.subscribe([self.topic])
        while not self.produced.is_set() or len({v for _, v in self.consumed}) < len(self.acked):
            message = self.consumer.poll(0.5)
            if message is not None and message.error() is None:
                self.consumed.append((time.monotonic(), int(message.value() or b"-1")))
            if self.produced.is_set() and time.monotonic() > self.give_up_at:
                break
        self.consumer.close()

    give_up_at = float("inf")

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        """Stop producing, wait for every delivery report, then for the group to have read every acknowledged write
        (at most ``TIMEOUT``)."""
        self.stopping.set()
        self.threads[0].join(TIMEOUT * 6)
        self.give_up_at = time.monotonic() + TIMEOUT
        self.produced.set()
        self.threads[1].join(TIMEOUT * 2)


def longest_gap(times: list[float]) -> float:
    ordered = sorted(times)
    return max((b - a for a, b in itertools.pairwise(ordered)), default=0.0)


def topic_contents(fleet: Fleet, topic: str, partitions: int) -> list[int]:
    """Every record of ``topic`` from the start, read without a group."""
    reader = Consumer(client(fleet, **{"group.id": f"reader-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False}))
    ends = [reader.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT)[1] for p in range(partitions)]
    reader.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[int] = []
    deadline = time.monotonic() + TIMEOUT
    while len(values) < sum(ends) and time.monotonic() < deadline:
        message = reader.poll(0.5)
        if message is not None and message.error() is None:
            values.append(int(message.value() or b"-1"))
    reader.close()
    return values


def test_a_rolling_restart_of_proxies_then_brokers_loses_and_duplicates_nothing(
    fleet: Fleet, record_property: Any
) -> None:
    topic, partitions = f"rolling-{uuid.uuid4().hex[:8]}", 2
    admin = AdminClient(client(fleet))  # kept until the result is in (its handle ends with it)
    admin.create_topics([NewTopic(topic, partitions, 2)])[topic].result(TIMEOUT)  # on both brokers
    load = Load(fleet, topic)
    load.start()
    time.sleep(SETTLE_S)
    exits = []
    for node in fleet.proxies:
        exits.append(fleet.restart_proxy(node))  # SIGTERM: drained, then started again on the same ports
        time.sleep(SETTLE_S)
    for broker in fleet.cluster.brokers:
        fleet.restart_broker(broker.node_id)
        time.sleep(SETTLE_S)
    last_restart = time.monotonic()
    time.sleep(SETTLE_S)
    load.stop()

    acked = [value for _, value in load.acked]
    written = topic_contents(fleet, topic, partitions)
    pause_ack = longest_gap([t for t, _ in load.acked])
    pause_consume = longest_gap([t for t, _ in load.consumed])
    for name, value in (("acknowledged", len(acked)), ("longest_ack_pause_s", round(pause_ack, 2)),
                        ("longest_consume_pause_s", round(pause_consume, 2))):  # fmt: skip
        record_property(name, value)
    logging.getLogger(__name__).warning(
        "%d writes acknowledged; longest pause between acknowledgements %.2f s, between consumed records %.2f s",
        len(acked), pause_ack, pause_consume,
    )  # fmt: skip
    assert exits == [0] * len(fleet.proxies)  # each drained and exited cleanly
    assert load.failed == []
    assert len(acked) > 1000 and len(acked) == load.sent  # every write produced was acknowledged
    assert sorted(written) == sorted(acked)  # in the topic, each exactly once: none lost, none duplicated
    assert any(t > last_restart for t, _ in load.consumed)  # the group kept consuming after the last restart
    assert {value for _, value in load.consumed} == set(acked)
