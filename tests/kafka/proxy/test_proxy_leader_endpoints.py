"""KIP-951 leader discovery in Fetch v16+ through the proxy, on the two-broker cluster of ``test_proxy_cluster``.

A partition led by broker 2, fetched from broker 1, is answered NOT_LEADER_OR_FOLLOWER with its ``current_leader``
and, from v16, ``node_endpoints``: broker 2's address. Straight to the cluster that is broker 2's own listener.
Through the proxy (which forwards Fetch v16+ at the client's version and rewrites the answer's last section as it
streams: ``handlers.fetch``, ``fetch_walk``) the client gets the same error and leader, and broker 2 at the proxy's
port for it — the same address Metadata gives — never an upstream address (checked on the decoded answer, on its
raw bytes, and on every byte the proxy wrote to any client meanwhile).
"""

from __future__ import annotations

import os
import struct
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from kio.schema.errors import ErrorCode

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.proxy.nodes import node_port
from tests.kafka.broker import LOOPBACK, KafkaCluster
from tests.kafka.proxy.test_proxy_cluster import cluster_proxy, split_topic
from tests.kafka.proxy.test_proxy_topic_ids import fetch_by_id
from tests.proxy.fetch_answers import counted_peeks, readable
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle
from tests.wire import Wire, decode_response, encode_request, metadata

__all__ = ["cluster_proxy"]  # the fixture, used here


def address(text: str) -> tuple[str, int]:
    host, port = text.rsplit(":", 1)
    return host, int(port)


def fetch_raw(wire: Wire, version: int, topic_id: uuid.UUID) -> tuple[bytes, Any]:
    """Partition 1 of ``topic_id`` fetched on ``wire``: the raw answer and the decoded one."""
    request = fetch_by_id(version, [topic_id], partition=1)
    wire.send_frame(encode_request(request, wire.next_correlation_id()))
    payload = wire.recv_frame()
    assert payload is not None
    return payload, decode_response(readable(payload, version), ApiKey.FETCH, version)[1]


@pytest.mark.parametrize("version", [16, 17])
def test_a_moved_leader_is_named_at_the_proxys_address(
    cluster_proxy: ServerHandle, kafka_cluster: KafkaCluster, version: int, to_clients: bytearray
):
    topic = split_topic(kafka_cluster)
    broker_1, broker_2 = kafka_cluster.broker(1), kafka_cluster.broker(2)
    deadline = time.monotonic() + 30
    while True:  # broker 1 learns the new topic from the controller asynchronously
        with Wire(address(broker_1.address)) as direct:
            [described] = metadata(direct, [topic], allow_auto_topic_creation=False).topics
            if described.topic_id is not None and len(described.partitions) == 2:
                _raw, straight = fetch_raw(direct, version, described.topic_id)
                if straight.responses[0].partitions[0].error_code == ErrorCode.not_leader_or_follower:
                    break
        assert time.monotonic() < deadline, f"broker 1 never knew the topic's partitions: {described}"
        time.sleep(0.2)
    topic_id = described.topic_id
    [answered] = straight.responses[0].partitions
    assert answered.error_code == ErrorCode.not_leader_or_follower
    assert answered.current_leader.leader_id == 2
    assert [(e.node_id, e.host, e.port) for e in straight.node_endpoints] == [(2, broker_2.host, broker_2.port)]

    listener_port = next(iter(cluster_proxy.ports.values()))
    with Wire((LOOPBACK, node_port(listener_port, 1))) as wire:  # the proxy's port for broker 1
        wire.login(ADMIN, ADMIN_PASSWORD)
        raw, proxied = fetch_raw(wire, version, topic_id)
    [answered] = proxied.responses[0].partitions
    assert answered.error_code == ErrorCode.not_leader_or_follower
    assert answered.current_leader.leader_id == 2, "the upstream filled it: the fetch went up at the client's version"
    assert [(e.node_id, e.host, e.port) for e in proxied.node_endpoints] == [
        (2, LOOPBACK, node_port(listener_port, 2))
    ], "broker 2 at the proxy's port for it"
    with Wire((LOOPBACK, node_port(listener_port, 1))) as wire:
        wire.login(ADMIN, ADMIN_PASSWORD)
        brokers = {
            (b.node_id, b.host, b.port) for b in metadata(wire, [topic], allow_auto_topic_creation=False).brokers
        }
    assert (2, LOOPBACK, node_port(listener_port, 2)) in brokers  # the same address Metadata gives
    assert struct.pack(">i", node_port(listener_port, 2)) in raw
    for node in (broker_1, broker_2):
        assert struct.pack(">i", node.port) not in raw, f"broker {node.node_id}'s port reached the client"
        assert struct.pack(">i", node.port) not in to_clients, f"broker {node.node_id}'s port reached a client"


def test_a_large_v17_answer_streams_through_unchanged(
    cluster_proxy: ServerHandle, kafka_cluster: KafkaCluster, monkeypatch: pytest.MonkeyPatch
):
    """An answer of ~600 KB from the partition's leader: walked and spliced on (``links``: its structure peeked at),
    the records the broker's own, byte for byte, and nothing but them changed."""
    peeks = counted_peeks(monkeypatch)
    topic = split_topic(kafka_cluster)
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap, "compression.type": "none"})
    for _ in range(60):
        producer.produce(topic, os.urandom(10_000), partition=1)
    assert producer.flush(30) == 0
    broker_2 = kafka_cluster.broker(2)
    with Wire(address(broker_2.address)) as direct:
        [described] = metadata(direct, [topic], allow_auto_topic_creation=False).topics
        _raw, straight = fetch_raw(direct, 17, described.topic_id)
    listener_port = next(iter(cluster_proxy.ports.values()))
    with Wire((LOOPBACK, node_port(listener_port, 2))) as wire:
        wire.login(ADMIN, ADMIN_PASSWORD)
        raw, proxied = fetch_raw(wire, 17, described.topic_id)
    assert len(raw) > 600_000
    [partition] = proxied.responses[0].partitions
    assert partition.error_code == ErrorCode.none and len(partition.records) > 600_000
    assert proxied.responses == straight.responses
    assert peeks, "spliced, its structure peeked at"
