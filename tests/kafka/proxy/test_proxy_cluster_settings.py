"""The proxy reads each broker's ``auto.create.topics.enable`` from that broker (issue 24, finding 6), on the real
two-broker cluster (brokers 1 and 2, PLAINTEXT, Kafka's default ``auto.create.topics.enable=true``).

``--upstream <down>,b2,b1``: the first bootstrap server is down, broker 2 answers discovery and its Metadata lists
broker 1 first. Before the fix the proxy asked broker 2 about broker 1 ("Unexpected broker id, expected 2 or empty
string, but received 1"), took the setting as false, and never auto-created a topic, whoever asked.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode

from kafkaguard.model import AclOperation
from kafkaguard.proxy.upstream import Address
from tests.kafka.broker import KafkaCluster
from tests.kafka.proxy.conftest import start_proxy
from tests.kafka.proxy.test_proxy_auto_create import grant_prefix
from tests.kafka.proxy.test_proxy_clients import PASSWORD, unique, user
from tests.wire import Wire, metadata


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_each_broker_is_read_from_itself_and_auto_creation_works(kafka_cluster: KafkaCluster, tmp_path: Path):
    first, second = kafka_cluster.broker(1), kafka_cluster.broker(2)
    upstream = f"127.0.0.1:{closed_port()},{second.address},{first.address}"
    proxy = start_proxy(tmp_path, kafka_cluster, upstream=upstream, upstream_security_protocol="PLAINTEXT",
                        upstream_user=None, upstream_password=None)  # fmt: skip
    try:
        nodes = proxy.server.nodes  # type: ignore[attr-defined]
        for broker in (first, second):
            assert nodes.auto_create_topics(Address(broker.host, broker.port)) is True, broker.address
        prefix = f"{unique('feed')}-"
        name = user(proxy)
        grant_prefix(proxy, name, prefix, AclOperation.DESCRIBE, AclOperation.CREATE)
        topic = f"{prefix}auto"
        with Wire(proxy.sasl) as wire:  # the bootstrap port: the connection reaches broker 2, the first one alive
            wire.login(name, PASSWORD)
            [answered] = metadata(wire, [topic]).topics
        assert answered.error_code != ErrorCode.topic_authorization_failed
        admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap})
        deadline = time.monotonic() + 30
        while topic not in admin.list_topics(timeout=30).topics:
            assert time.monotonic() < deadline, f"{topic} was not auto-created"
            time.sleep(0.2)  # polling the cluster's metadata, bounded by the deadline
    finally:
        proxy.stop()
    assert proxy.errors == []
