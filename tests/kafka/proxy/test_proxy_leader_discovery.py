"""KIP-951 leader discovery through the proxy against real Kafka 3.9 brokers: Produce v10-v11 answers name brokers
(``node_endpoints``) only at the proxy's per-broker addresses, checked on the bytes a client receives.

* A confluent-kafka producer (librdkafka 2.4+ produces at v10, KIP-951) and Kafka's own Java producer
  (kafka-clients 3.9, v11; ``tests/kafka/ProducerProbe.java``) write through the proxy: their Produce requests reach
  the broker at v10 / v11 and nothing the proxy sends any client carries the broker's address.
* On the two-broker cluster, a Produce v10 / v11 for a partition led by broker 2 is sent to the proxy's port for node
  1: broker 1 answers NOT_LEADER_OR_FOLLOWER with broker 2's endpoint (``KafkaApis.handleProduceRequest``, 3.9; the
  same request straight to broker 1 shows it), and the client gets that endpoint at the proxy's port for node 2.
"""

from __future__ import annotations

import struct
import subprocess
import time
import warnings
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.model import AclOperation, ResourceType
from kafkaguard.protocol.build import nested
from kafkaguard.proxy.nodes import node_port
from tests.kafka.broker import KafkaBroker, KafkaCluster, java
from tests.kafka.proxy.conftest import start_cluster_proxy
from tests.kafka.proxy.test_proxy_clients import PASSWORD, create_topics, grant, proxy_bootstrap, sasl, unique, user
from tests.serving import ServerHandle
from tests.wire import Wire, decode_response, encode_request

with warnings.catch_warnings():  # kafka-python's package import reads its schemas with a deprecated call
    warnings.filterwarnings("ignore", message=r"(read_text|open_text) is deprecated", category=DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatchBuilder  # type: ignore[import-untyped]

_PORT = struct.Struct(">i")


def addresses_in(data: bytes, host: str, port: int) -> int:
    """How often ``host:port`` appears in ``data`` as a Kafka broker address: the host as a string (compact, flexible
    versions; int16-prefixed, older ones) followed by the port as an int32."""
    raw = host.encode()
    compact = bytes([len(raw) + 1]) + raw + _PORT.pack(port)
    legacy = struct.pack(">h", len(raw)) + raw + _PORT.pack(port)
    return data.count(compact) + data.count(legacy)


def produce_versions(payloads: list[bytes]) -> set[int]:
    return {struct.unpack_from(">h", p, 2)[0] for p in payloads if struct.unpack_from(">h", p)[0] == ApiKey.PRODUCE}


def test_a_librdkafka_producer_at_v10_plus_never_learns_the_brokers_address(
    proxy: ServerHandle, kafka: KafkaBroker, to_clients: bytearray, upstream_requests: list[bytes]
):
    topic, name = unique("kip951"), user(proxy)
    create_topics(kafka, topic)
    grant(proxy, f"User:{name}", ResourceType.TOPIC, topic, AclOperation.WRITE, AclOperation.DESCRIBE)
    producer = Producer(sasl(proxy_bootstrap(proxy), name, PASSWORD, **{"linger.ms": 5}))
    outcomes: list[KafkaError | None] = []
    for i in range(20):
        producer.produce(topic, f"m{i}".encode(), on_delivery=lambda err, _msg: outcomes.append(err))
    assert producer.flush(30) == 0
    assert outcomes == [None] * 20
    versions = produce_versions(upstream_requests)
    assert versions and min(versions) >= 10, f"librdkafka produced at {versions} (the proxy offers v3-v11)"
    host, port = kafka.bootstrap.rsplit(":", 1)
    listener_port = next(iter(proxy.ports.values()))
    assert addresses_in(bytes(to_clients), "127.0.0.1", node_port(listener_port, 1)) > 0  # the check sees addresses
    assert addresses_in(bytes(to_clients), host, int(port)) == 0, "a client was told the broker's own address"


# -------------------------------------------------------------------- NOT_LEADER_OR_FOLLOWER with endpoints


@pytest.fixture(scope="module")
def cluster_proxy(kafka_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    handle = start_cluster_proxy(tmp_path_factory.mktemp("proxy-kip951"), kafka_cluster)
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the proxy logged errors: {handle.errors}"


def split_topic(cluster: KafkaCluster) -> str:
    """A topic whose partition 0 is led by broker 1 and partition 1 by broker 2."""
    topic = unique("kip951-split")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replica_assignment=[[1], [2]])])[topic].result(30)
    return topic


def produce_request(version: int, topic: str, partition: int) -> Any:
    """A Produce of one record, acks=1, to ``topic``/``partition``."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)  # fmt: skip
    builder.append(0, timestamp=int(time.time() * 1000), key=None, value=b"v", headers=[])
    cls: Any = load_request_schema(int(ApiKey.PRODUCE), version)
    data = nested(cls, "TopicProduceData")(name=topic, partition_data=(
        nested(cls, "PartitionProduceData")(index=partition, records=bytes(builder.build())),))  # fmt: skip
    return cls(transactional_id=None, acks=1, timeout=i32Timedelta.parse(timedelta(seconds=5)), topic_data=(data,))


def answered(wire: Wire, version: int, topic: str, partition: int) -> tuple[bytes, Any]:
    """The raw answer payload and its decoding, for a Produce of ``version`` sent on ``wire``."""
    correlation_id = wire.next_correlation_id()
    wire.send_frame(encode_request(produce_request(version, topic, partition), correlation_id))
    payload = wire.recv_frame()
    assert payload is not None, "the connection closed instead of answering the Produce"
    got, body = decode_response(payload, int(ApiKey.PRODUCE), version)
    assert got == correlation_id
    return payload, body


def errors_and_leaders(body: Any) -> list[tuple[ErrorCode, int]]:
    return [(p.error_code, int(p.current_leader.leader_id)) for t in body.responses for p in t.partition_responses]


@pytest.mark.parametrize("version", [10, 11])
def test_a_moved_leaders_endpoint_is_the_proxys_port_for_it(
    cluster_proxy: ServerHandle, kafka_cluster: KafkaCluster, version: int
):
    topic, name = split_topic(kafka_cluster), user(cluster_proxy)
    grant(cluster_proxy, f"User:{name}", ResourceType.TOPIC, topic, AclOperation.WRITE)
    broker_1, broker_2 = ((kafka_cluster.broker(n).host, kafka_cluster.broker(n).port) for n in (1, 2))
    # Straight to broker 1 (the control): Kafka answers with broker 2's own address.
    with Wire(broker_1, timeout=20) as direct:
        raw, body = answered(direct, version, topic, 1)
    assert errors_and_leaders(body) == [(ErrorCode.not_leader_or_follower, 2)]
    assert [(int(e.node_id), e.host, int(e.port)) for e in body.node_endpoints] == [(2, *broker_2)]
    assert addresses_in(raw, *broker_2) == 1
    # Through the proxy's port for node 1: the same answer, broker 2 at the proxy's port for node 2.
    listener_port = next(iter(cluster_proxy.ports.values()))
    with Wire(("127.0.0.1", node_port(listener_port, 1)), timeout=20) as wire:
        wire.login(name, PASSWORD, "SCRAM-SHA-512")
        raw, body = answered(wire, version, topic, 1)
        assert errors_and_leaders(body) == [(ErrorCode.not_leader_or_follower, 2)]
        assert [(int(e.node_id), e.host, int(e.port)) for e in body.node_endpoints] == [
            (2, "127.0.0.1", node_port(listener_port, 2))
        ]
        assert addresses_in(raw, *broker_2) == 0, "the Produce answer carried broker 2's own address"
        _raw, written = answered(wire, version, topic, 0)  # partition 0 is broker 1's: written, no endpoint
        assert errors_and_leaders(written) == [(ErrorCode.none, -1)] and written.node_endpoints == ()
    # The endpoint given is one a client can use: the proxy's port for node 2 serves the partition.
    with Wire(("127.0.0.1", node_port(listener_port, 2)), timeout=20) as wire:
        wire.login(name, PASSWORD, "SCRAM-SHA-512")
        _raw, body = answered(wire, version, topic, 1)
        assert errors_and_leaders(body) == [(ErrorCode.none, -1)]


PRODUCER_PROBE = Path(__file__).resolve().parent.parent / "ProducerProbe.java"


def test_the_java_producer_at_v11_never_learns_the_brokers_address(
    proxy: ServerHandle, kafka: KafkaBroker, to_clients: bytearray, upstream_requests: list[bytes], tmp_path: Path
):
    topic, name = unique("kip951-java"), user(proxy)
    create_topics(kafka, topic)
    grant(proxy, f"User:{name}", ResourceType.TOPIC, topic, AclOperation.WRITE, AclOperation.DESCRIBE)
    log4j = tmp_path / "log4j2.properties"
    log4j.write_text("rootLogger.level = OFF\n")
    done = subprocess.run(
        [java(), f"-Dlog4j2.configurationFile={log4j}", "-cp", str(kafka.home / "libs" / "*"), str(PRODUCER_PROBE),
         proxy_bootstrap(proxy), name, PASSWORD, topic, "25"],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.stdout.strip() == "SENT 25", done.stdout + done.stderr[-3000:]
    assert 11 in produce_versions(upstream_requests), "kafka-clients 3.9 produces at v11 (the proxy offers v3-v11)"
    host, port = kafka.bootstrap.rsplit(":", 1)
    listener_port = next(iter(proxy.ports.values()))
    assert addresses_in(bytes(to_clients), "127.0.0.1", node_port(listener_port, 1)) > 0
    assert addresses_in(bytes(to_clients), host, int(port)) == 0, "a client was told the broker's own address"
