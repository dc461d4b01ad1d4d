"""Client quotas enforced by ``kafkaguard proxy`` on real clients to a real Kafka broker, as Kafka enforces them:
``producer_byte_rate`` / ``consumer_byte_rate`` set with AlterClientQuotas through the proxy slow a client that
sends or reads far above the quota to about the quota, and its responses carry ``throttle_time_ms`` (librdkafka's
``throttle_cb``). See ``kafkaguard.proxy.quotas`` for the meter.

Kafka's meter lets a new client through at full speed until it has moved (N − 1) windows' worth (10 s × quota),
then throttles it back to the quota: over a run of T ≥ 10 s the average is about the quota. Runs are ~10 s each.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kio.schema.alter_client_quotas.v1 import request as alter_v1
from kio.static.primitive import f64

from kafkaguard.config import SecurityProtocol
from kafkaguard.model import AclOperation, ResourceType
from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker
from tests.kafka.proxy.test_proxy_clients import PASSWORD, create_topics, grant, proxy_bootstrap, sasl, unique, user
from tests.serving import ServerHandle
from tests.wire import Wire

log = logging.getLogger(__name__)

QUOTA = 256 * 1024  # bytes per second
RUN_SECONDS = 12.0
MESSAGE = b"x" * 8192


def set_quota(proxy: ServerHandle, name: str, key: str, value: float) -> None:
    """AlterClientQuotas for /users/<name>, sent to the proxy as its super user."""
    body = alter_v1.AlterClientQuotasRequest(
        entries=(
            alter_v1.EntryData(
                entity=(alter_v1.EntityData(entity_type="user", entity_name=name),),
                ops=(alter_v1.OpData(key=key, value=f64(float(value)), remove=False),),
            ),
        ),
        validate_only=False,
    )
    with Wire(proxy.address(SecurityProtocol.SASL_PLAINTEXT), timeout=30) as wire:
        wire.login(ADMIN, ADMIN_PASSWORD)
        [entry] = wire.request(body).entries
    assert int(entry.error_code) == 0, entry


def produce_for(proxy: ServerHandle, name: str, topic: str, seconds: float) -> tuple[float, list[int]]:
    """Produce as fast as the client can for ``seconds``: (acknowledged bytes per second, throttle times seen)."""
    throttles: list[int] = []
    acked = [0]

    def delivered(err: Any, message: Any) -> None:
        if err is None:
            acked[0] += len(message.value())

    config = sasl(proxy_bootstrap(proxy), name, PASSWORD, **{
        "linger.ms": 5, "batch.size": 65536, "queue.buffering.max.kbytes": 2048,
        "throttle_cb": lambda event: throttles.append(int(event.throttle_time * 1000)),
    })  # fmt: skip
    producer = Producer(config)
    start = time.monotonic()
    try:
        while (elapsed := time.monotonic() - start) < seconds:
            try:
                producer.produce(topic, MESSAGE, on_delivery=delivered)
            except BufferError:
                producer.poll(0.05)
            producer.poll(0)
        rate = acked[0] / elapsed
    finally:
        producer.purge()
        producer.flush(30)
    return rate, throttles


def consume_for(proxy: ServerHandle, name: str, topic: str, seconds: float) -> tuple[float, list[int]]:
    """Read the topic from the start for ``seconds``: (bytes per second, throttle times seen)."""
    throttles: list[int] = []
    config = sasl(proxy_bootstrap(proxy), name, PASSWORD, **{
        "group.id": f"{name}-group", "enable.auto.commit": False, "max.partition.fetch.bytes": 262144,
        "throttle_cb": lambda event: throttles.append(int(event.throttle_time * 1000)),
    })  # fmt: skip
    consumer = Consumer(config)
    consumer.assign([TopicPartition(topic, 0, 0)])
    received = 0
    start = time.monotonic()
    try:
        while (elapsed := time.monotonic() - start) < seconds:
            for message in consumer.consume(100, 0.2):
                assert message.error() is None, message.error()
                received += len(message.value() or b"")
        return received / elapsed, throttles
    finally:
        consumer.close()


def fill(kafka: KafkaBroker, topic: str, size: int) -> None:
    """``size`` bytes of messages, straight to the broker."""
    producer = Producer(sasl(kafka.bootstrap, ADMIN, ADMIN_PASSWORD, **{"linger.ms": 20}))
    for _ in range(size // len(MESSAGE)):
        while True:
            try:
                producer.produce(topic, MESSAGE)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0


@pytest.fixture
def topic(kafka: KafkaBroker) -> str:
    name = unique("quota")
    create_topics(kafka, name)
    return name


def test_producer_byte_rate_slows_a_producer_to_about_the_quota(proxy: ServerHandle, topic: str) -> None:
    free, throttled = user(proxy), user(proxy)
    for name in (free, throttled):
        grant(proxy, f"User:{name}", ResourceType.TOPIC, topic, AclOperation.WRITE)
    unlimited, no_throttles = produce_for(proxy, free, topic, 2.0)
    assert unlimited > 4 * QUOTA, f"without a quota: {unlimited / 1024:.0f} KiB/s"
    assert no_throttles == []
    set_quota(proxy, throttled, "producer_byte_rate", QUOTA)
    rate, throttles = produce_for(proxy, throttled, topic, RUN_SECONDS)
    measured = (
        f"produce: {unlimited / 1024:.0f} KiB/s without a quota, {rate / 1024:.0f} KiB/s at {QUOTA // 1024} KiB/s"
    )
    log.info("%s; throttles (ms): %s", measured, throttles)
    assert 0.5 * QUOTA <= rate <= 1.5 * QUOTA, measured
    assert throttles and max(throttles) > 0, measured


def test_consumer_byte_rate_slows_a_consumer_to_about_the_quota(
    proxy: ServerHandle, kafka: KafkaBroker, topic: str
) -> None:
    fill(kafka, topic, 8 * 1024 * 1024)  # more than the quota lets through in the run
    free, throttled = user(proxy), user(proxy)
    for name in (free, throttled):
        grant(proxy, f"User:{name}", ResourceType.TOPIC, topic, AclOperation.READ)
        grant(proxy, f"User:{name}", ResourceType.GROUP, f"{name}-group", AclOperation.READ)
    unlimited, no_throttles = consume_for(proxy, free, topic, 2.0)
    assert unlimited > 4 * QUOTA, f"without a quota: {unlimited / 1024:.0f} KiB/s"
    assert no_throttles == []
    set_quota(proxy, throttled, "consumer_byte_rate", QUOTA)
    rate, throttles = consume_for(proxy, throttled, topic, RUN_SECONDS)
    measured = f"fetch: {unlimited / 1024:.0f} KiB/s without a quota, {rate / 1024:.0f} KiB/s at {QUOTA // 1024} KiB/s"
    log.info("%s; throttles (ms): %s", measured, throttles)
    assert 0.5 * QUOTA <= rate <= 1.5 * QUOTA, measured
    assert throttles and max(throttles) > 0, measured
