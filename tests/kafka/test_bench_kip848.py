"""``benchmarks/ConsumeLoad.java`` (``benchmarks.java_load``), the load of ``benchmarks/bench_kip848``: compiled with
the installed JDK against the broker's jars, it reads exactly what was produced, on either group protocol, reports
its timed part consistently, meters only its consume loop, and uses the requests the benchmark says it does (the
KIP-848 heartbeat, Fetch v13+ straight to Kafka 3.9). Nothing here is timed."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from benchmarks.java_load import JavaConsumer
from benchmarks.kafka_load import ClientSettings, LoadError
from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker

#: More than one batch (``max.poll.records`` is 1000), so some records fall after the untimed first batch.
MESSAGES = 2500
SIZE = 100


@pytest.fixture(scope="module")
def java(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> JavaConsumer:
    return JavaConsumer(kafka.home, tmp_path_factory.mktemp("consume-load"))


@pytest.fixture(scope="module")
def topic(kafka: KafkaBroker) -> str:
    """A one-partition topic holding MESSAGES values of SIZE bytes."""
    name = f"consume-load-{uuid.uuid4().hex[:8]}"
    config = kafka.client_config()
    admin = AdminClient(config)  # kept until the futures resolve: a destroyed client fails them
    for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
        future.result(60)
    producer = Producer(config)
    for i in range(MESSAGES):
        producer.produce(name, i.to_bytes(4, "big") * (SIZE // 4))
    assert producer.flush(30) == 0
    return name


@pytest.mark.parametrize(
    ("protocol", "group_api"), [("classic", "JOIN_GROUP"), ("consumer", "CONSUMER_GROUP_HEARTBEAT")]
)
def test_reads_every_record_on_either_protocol(
    kafka: KafkaBroker, java: JavaConsumer, topic: str, protocol: str, group_api: str
):
    windows: list[str] = []

    @contextmanager
    def window() -> Iterator[None]:
        windows.append("entered")
        yield
        windows.append("left")

    settings = ClientSettings(kafka.bootstrap, ADMIN, ADMIN_PASSWORD)
    run = java.consume(settings, topic, f"consume-load-{uuid.uuid4().hex[:8]}", protocol, MESSAGES, window(),
                       timeout=120, trace=True)  # fmt: skip

    assert run.received == MESSAGES
    timed = run.throughput
    assert 0 < timed.count < MESSAGES  # the first batch is not timed, the rest is
    assert timed.payload_bytes == timed.count * SIZE
    assert timed.seconds > 0
    assert timed.startup_s > 0
    assert windows == ["entered", "left"]
    assert group_api in run.requests  # the protocol asked for, not a fallback
    other = ({"JOIN_GROUP", "CONSUMER_GROUP_HEARTBEAT"} - {group_api}).pop()
    assert other not in run.requests
    assert max(run.requests["FETCH"]) >= 13  # topic ids, straight to Kafka 3.9


def test_a_refused_login_is_a_load_error_saying_why(kafka: KafkaBroker, java: JavaConsumer, topic: str):
    settings = ClientSettings(kafka.bootstrap, ADMIN, "not-the-password")
    with pytest.raises(LoadError, match="SaslAuthenticationException"):
        java.consume(settings, topic, f"consume-load-{uuid.uuid4().hex[:8]}", "consumer", 10, timeout=120)


def test_an_unknown_protocol_is_refused_before_a_jvm_starts(java: JavaConsumer):
    settings = ClientSettings("127.0.0.1:9", ADMIN, ADMIN_PASSWORD)
    with pytest.raises(ValueError, match="classic, consumer"):
        java.command(settings, "t", "g", "streams", 1)
