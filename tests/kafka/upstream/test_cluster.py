"""The ``kafka_cluster`` fixture is a real KRaft cluster: two brokers in Metadata, partitions led on each broker, and
a broker that stops and starts again."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from tests.kafka.broker import LOOPBACK, KafkaCluster

TIMEOUT = 30.0


def leaders(admin: AdminClient, topic: str) -> dict[int, int]:
    """``{partition: leader}`` once every partition of ``topic`` has a leader."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
        if partitions and all(p.leader >= 0 for p in partitions.values()):
            return {p.id: p.leader for p in partitions.values()}
        time.sleep(0.1)  # the brokers learn the new topic from the controller; bounded
    raise AssertionError(f"{topic} has no leader for every partition after {TIMEOUT:g} s")


def test_two_brokers_lead_one_partition_each_and_serve_produce_and_fetch(kafka_cluster: KafkaCluster) -> None:
    one, two = kafka_cluster.broker(1), kafka_cluster.broker(2)
    assert (one.node_id, two.node_id, one.host) == (1, 2, LOOPBACK)
    assert kafka_cluster.metadata_brokers() == {1: (LOOPBACK, one.port), 2: (LOOPBACK, two.port)}

    admin = AdminClient(kafka_cluster.client_config())
    topic = f"cluster-{uuid.uuid4().hex[:8]}"
    created = admin.create_topics([NewTopic(topic, num_partitions=2, replica_assignment=[[1], [2]])])
    created[topic].result(timeout=TIMEOUT)
    try:
        assert leaders(admin, topic) == {0: 1, 1: 2}
        metadata = admin.list_topics(topic, timeout=10)
        leader = metadata.brokers[metadata.topics[topic].partitions[1].leader]
        assert (leader.id, str(leader.host), leader.port) == (2, LOOPBACK, two.port)

        delivered: list[tuple[int, bytes]] = []

        def on_delivery(error: KafkaError | None, message: Message) -> None:
            assert error is None, error
            delivered.append((message.partition() or 0, message.value() or b""))

        producer = Producer({**kafka_cluster.client_config(), "acks": "all"})
        sent = {(p, f"{p}-{i}".encode()) for p in (0, 1) for i in range(3)}
        for partition, value in sorted(sent):
            producer.produce(topic, value, partition=partition, on_delivery=on_delivery)
        assert producer.flush(TIMEOUT) == 0
        assert set(delivered) == sent

        consumer = Consumer({**kafka_cluster.client_config(), "group.id": topic, "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in (0, 1)])
            received: set[tuple[int, bytes]] = set()
            deadline = time.monotonic() + TIMEOUT
            while received != sent and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None:
                    assert message.error() is None, message.error()
                    received.add((message.partition() or 0, message.value() or b""))
            assert received == sent
        finally:
            consumer.close()
    finally:
        admin.delete_topics([topic])[topic].result(timeout=TIMEOUT)


def test_a_stopped_broker_leaves_metadata_and_comes_back(kafka_cluster: KafkaCluster) -> None:
    two = kafka_cluster.broker(2)
    kafka_cluster.stop_broker(2)
    try:
        assert two.process is not None
        assert two.process.poll() is not None
        assert kafka_cluster.metadata_brokers() == {1: (LOOPBACK, kafka_cluster.broker(1).port)}
    finally:
        kafka_cluster.start_broker(2)
    assert two.running
    assert kafka_cluster.metadata_brokers()[2] == (LOOPBACK, two.port)
