"""Real clients through ``kafkaguard proxy`` to a real Kafka broker: kafkaguard's ACLs decide, per resource.

The broker's own ACLs never apply here (the proxy logs in as its super user); every refusal a client sees is the
proxy's, in Kafka's shape, and what is allowed really reaches the broker (messages are read back through it).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from kafkaguard.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from tests.actors import ACTOR
from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker
from tests.serving import ServerHandle

PASSWORD = "proxy-client-pw"  # noqa: S105 - a test password


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def sasl(bootstrap: str, user: str, password: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": password,
        **extra,
    }


def create_topics(kafka: KafkaBroker, *names: str, partitions: int = 1) -> None:
    """Straight on the broker, as its admin (the proxy is not what is under test here)."""
    admin = AdminClient(sasl(kafka.bootstrap, ADMIN, ADMIN_PASSWORD))
    for future in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        future.result(30)


def grant(proxy: ServerHandle, principal: str, resource_type: ResourceType, name: str, *ops: AclOperation) -> None:
    pattern = ResourcePattern(resource_type, name, PatternType.LITERAL)
    bindings = [AclBinding(pattern, AccessControlEntry(principal, "*", op, AclPermissionType.ALLOW)) for op in ops]
    assert all(r.succeeded for r in proxy.services.acls.create_acls(bindings, actor=ACTOR))


def user(proxy: ServerHandle) -> str:
    name = unique("client")
    proxy.add_user(name, PASSWORD)
    return name


def proxy_bootstrap(proxy: ServerHandle) -> str:
    return proxy.bootstrap(next(iter(proxy.ports)))


def produce(proxy: ServerHandle, name: str, topic: str, count: int, **extra: Any) -> list[KafkaError | None]:
    producer = Producer(sasl(proxy_bootstrap(proxy), name, PASSWORD, **{"linger.ms": 5, **extra}))
    outcomes: list[KafkaError | None] = []
    for i in range(count):
        producer.produce(topic, f"m{i}".encode(), on_delivery=lambda err, _msg: outcomes.append(err))
    assert producer.flush(30) == 0
    return outcomes


def consume(proxy: ServerHandle, name: str, topic: str, group: str, count: int) -> list[bytes]:
    consumer = Consumer(sasl(proxy_bootstrap(proxy), name, PASSWORD, **{"group.id": group,
                        "auto.offset.reset": "earliest", "enable.auto.commit": False}))  # fmt: skip
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is None:
                if len(values) >= count:
                    break
                continue
            if message.error() is not None:
                raise KafkaException(message.error())
            values.append(message.value() or b"")
            if len(values) >= count:
                consumer.commit(asynchronous=False)
                break
    finally:
        consumer.close()
    return values


def test_an_allowed_producer_and_consumer_move_messages_through_the_proxy(proxy: ServerHandle, kafka: KafkaBroker):
    topic, group = unique("orders"), unique("readers")
    create_topics(kafka, topic)
    name = user(proxy)
    grant(proxy, f"User:{name}", ResourceType.TOPIC, topic, AclOperation.WRITE, AclOperation.READ)
    grant(proxy, f"User:{name}", ResourceType.GROUP, group, AclOperation.READ)
    assert produce(proxy, name, topic, 20) == [None] * 20
    assert sorted(consume(proxy, name, topic, group, 20)) == sorted(f"m{i}".encode() for i in range(20))
    # the committed offset reached the broker: read it back there, as the broker's admin
    admin = Consumer(sasl(kafka.bootstrap, ADMIN, ADMIN_PASSWORD, **{"group.id": group}))
    try:
        [committed] = admin.committed([TopicPartition(topic, 0)], timeout=30)
    finally:
        admin.close()
    assert committed.offset == 20


def test_a_producer_without_write_gets_topic_authorization_failed(proxy: ServerHandle, kafka: KafkaBroker):
    topic = unique("secret")
    create_topics(kafka, topic)
    name = user(proxy)
    grant(proxy, f"User:{name}", ResourceType.TOPIC, topic, AclOperation.DESCRIBE)  # may see it, not write it
    outcomes = produce(proxy, name, topic, 3, **{"message.timeout.ms": 10_000})
    assert {err.code() if err else None for err in outcomes} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    audit = [r for r in proxy.audit_records() if r.get("principal") == f"User:{name}" and r.get("api") == "Produce"]
    assert audit and all(r["decision"] == "DENIED" for r in audit)


def test_metadata_hides_topics_the_client_may_not_describe(proxy: ServerHandle, kafka: KafkaBroker):
    visible, hidden = unique("visible"), unique("hidden")
    create_topics(kafka, visible, hidden)
    name = user(proxy)
    grant(proxy, f"User:{name}", ResourceType.TOPIC, visible, AclOperation.DESCRIBE)
    admin = AdminClient(sasl(proxy_bootstrap(proxy), name, PASSWORD))
    topics = admin.list_topics(timeout=30).topics
    assert visible in topics
    assert hidden not in topics
    # the brokers a client sees are the proxy's ports, never the broker's
    brokers = admin.list_topics(timeout=30).brokers
    assert {b.port for b in brokers.values()} and kafka.port not in {b.port for b in brokers.values()}


def test_a_consumer_without_group_read_is_refused(proxy: ServerHandle, kafka: KafkaBroker):
    topic, group = unique("events"), unique("nogroup")
    create_topics(kafka, topic)
    name = user(proxy)
    grant(proxy, f"User:{name}", ResourceType.TOPIC, topic, AclOperation.WRITE, AclOperation.READ)
    assert produce(proxy, name, topic, 1) == [None]
    with pytest.raises(KafkaException) as refused:
        consume(proxy, name, topic, group, 1)
    assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
