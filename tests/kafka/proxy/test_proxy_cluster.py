"""The proxy in front of a two-broker cluster (one controller, brokers 1 and 2, PLAINTEXT, no authorizer).

A partition led by broker 2 is written and read through the proxy's port for node 2: the client only ever knows
the proxy. When broker 2 stops, requests meant for it fail fast (the proxy closes the connection, a retriable
broker failure to every client) and nothing hangs; when it returns, the same client path works again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName

from kafkaguard.model import AclOperation, ResourceType
from kafkaguard.proxy.nodes import node_port
from tests.kafka.broker import KafkaCluster
from tests.kafka.proxy.conftest import start_cluster_proxy
from tests.kafka.proxy.test_proxy_clients import PASSWORD, grant, sasl, unique, user
from tests.serving import ServerHandle
from tests.wire import Wire, encode_request


@pytest.fixture(scope="module")
def cluster_proxy(kafka_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    handle = start_cluster_proxy(tmp_path_factory.mktemp("proxy-cluster"), kafka_cluster)
    try:
        yield handle
    finally:
        handle.stop()


def split_topic(cluster: KafkaCluster) -> str:
    """A topic whose partition 0 is led by broker 1 and partition 1 by broker 2."""
    topic = unique("split")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replica_assignment=[[1], [2]])])[topic].result(30)
    return topic


def test_a_partition_led_by_the_second_broker_is_served_through_the_proxy(
    cluster_proxy: ServerHandle, kafka_cluster: KafkaCluster
):
    topic, group = split_topic(kafka_cluster), unique("split-readers")
    name = user(cluster_proxy)
    grant(cluster_proxy, f"User:{name}", ResourceType.TOPIC, topic, AclOperation.WRITE, AclOperation.READ)
    grant(cluster_proxy, f"User:{name}", ResourceType.GROUP, group, AclOperation.READ)
    bootstrap = cluster_proxy.bootstrap(next(iter(cluster_proxy.ports)))
    listener_port = next(iter(cluster_proxy.ports.values()))

    metadata = AdminClient(sasl(bootstrap, name, PASSWORD)).list_topics(topic, timeout=30)
    assert {b.id: (str(b.host), b.port) for b in metadata.brokers.values()} == {
        node: ("127.0.0.1", node_port(listener_port, node)) for node in (1, 2)
    }
    assert metadata.topics[topic].partitions[1].leader == 2

    producer = Producer(sasl(bootstrap, name, PASSWORD))
    errors: list[KafkaError | None] = []
    for partition in (0, 1):
        for i in range(3):
            producer.produce(topic, f"{partition}-{i}".encode(), partition=partition,
                             on_delivery=lambda err, _m: errors.append(err))  # fmt: skip
    assert producer.flush(30) == 0
    assert errors == [None] * 6

    consumer = Consumer(sasl(bootstrap, name, PASSWORD, **{"group.id": group, "auto.offset.reset": "earliest"}))
    consumer.assign([TopicPartition(topic, 1, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 3 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value() or b"")
    consumer.close()
    assert sorted(got) == [b"1-0", b"1-1", b"1-2"]
    served = cluster_proxy.server.connections_per_node  # type: ignore[attr-defined]
    assert served[2] > 0, "the client reached broker 2 only through the proxy's port for node 2"


def test_a_stopped_upstream_broker_fails_fast_and_recovers(cluster_proxy: ServerHandle, kafka_cluster: KafkaCluster):
    listener_port = next(iter(cluster_proxy.ports.values()))
    name = user(cluster_proxy)
    grant(cluster_proxy, f"User:{name}", ResourceType.TOPIC, "*", AclOperation.DESCRIBE)
    request = MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=TopicName("x")),),
                              allow_auto_topic_creation=False, include_topic_authorized_operations=False)  # fmt: skip
    kafka_cluster.stop_broker(2)
    try:
        with Wire(("127.0.0.1", node_port(listener_port, 2)), timeout=20) as wire:
            wire.login(name, PASSWORD)
            started = time.monotonic()
            wire.send_frame(encode_request(request, wire.next_correlation_id()))
            assert wire.recv_frame() is None, "the proxy closes a connection whose broker is down"
            assert time.monotonic() - started < 10
        with Wire(cluster_proxy.sasl, timeout=20) as bootstrap:  # the bootstrap path still works (broker 1)
            bootstrap.login(name, PASSWORD)
            assert bootstrap.request(request).brokers
    finally:
        kafka_cluster.start_broker(2)
    with Wire(("127.0.0.1", node_port(listener_port, 2)), timeout=20) as wire:
        wire.login(name, PASSWORD)
        assert wire.request(request).brokers
