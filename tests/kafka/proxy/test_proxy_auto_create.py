"""Metadata auto-creation through ``kafkaguard proxy`` in front of the real Kafka 3.9 broker, which runs with Kafka's
default ``auto.create.topics.enable=true`` (``tests/kafka/broker.py`` leaves it unset) — issue 24, finding 1.

Metadata v1-v3 have no ``allow_auto_topic_creation``: Kafka reads its absence as "create". Before the fix the proxy
forwarded its "describe without creating" probe at the client's version, so a user with only READ on ``feed-``
who named 100 topics in one Metadata v1 got 100 topics created upstream (while being told
TOPIC_AUTHORIZATION_FAILED and audited as denied). The proxy now forwards v1-v3 as v4.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkaguard.protocol.build import nested
from kafkaguard.protocol.codec import request_schema
from tests.actors import ACTOR
from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker
from tests.kafka.proxy.test_proxy_clients import PASSWORD, sasl, unique, user
from tests.serving import ServerHandle
from tests.wire import Wire

TOPICS_PER_REQUEST = 100


def grant_prefix(proxy: ServerHandle, name: str, prefix: str, *operations: AclOperation) -> None:
    pattern = ResourcePattern(ResourceType.TOPIC, prefix, PatternType.PREFIXED)
    bindings = [
        AclBinding(pattern, AccessControlEntry(f"User:{name}", "*", op, AclPermissionType.ALLOW)) for op in operations
    ]
    assert all(result.succeeded for result in proxy.services.acls.create_acls(bindings, actor=ACTOR))


def metadata_at(version: int, names: list[str]) -> object:
    schema = request_schema(ApiKey.METADATA, version)
    topic_cls = nested(schema, "MetadataRequestTopic")
    return schema(topics=tuple(topic_cls(name=name) for name in names))


def broker_topics(kafka: KafkaBroker) -> set[str]:
    """The topics the broker has, asked straight (as its admin), never through the proxy."""
    return set(AdminClient(sasl(kafka.bootstrap, ADMIN, ADMIN_PASSWORD)).list_topics(timeout=30).topics)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_metadata_v1_to_v3_from_a_reader_creates_nothing_upstream(proxy: ServerHandle, kafka: KafkaBroker,
                                                                  version: int):  # fmt: skip
    """Before the fix: 100 topics created, per request."""
    prefix = f"{unique('feed')}-"
    name = user(proxy)
    grant_prefix(proxy, name, prefix, AclOperation.READ)  # READ implies DESCRIBE; no CREATE
    names = [f"{prefix}x{i}" for i in range(TOPICS_PER_REQUEST)]
    with Wire(proxy.sasl) as wire:
        wire.login(name, PASSWORD)
        answer = wire.request(metadata_at(version, names))
    assert {t.name: t.error_code for t in answer.topics} == dict.fromkeys(names, ErrorCode.topic_authorization_failed)
    time.sleep(3)  # Kafka creates asynchronously: a creation asked for is visible well within this (< 0.5 s)
    assert not broker_topics(kafka) & set(names)
    denied = {
        r["resource_name"]
        for r in proxy.audit_records()
        if r.get("principal") == f"User:{name}" and r.get("api") == "Metadata" and r.get("operation") == "AUTO_CREATE"
        and r.get("decision") == "DENIED"
    }  # fmt: skip
    assert denied == set(names), "the audit says AUTO_CREATE was denied, and it was"


def test_metadata_v1_from_a_user_with_create_still_auto_creates(proxy: ServerHandle, kafka: KafkaBroker):
    prefix = f"{unique('feed')}-"
    name = user(proxy)
    grant_prefix(proxy, name, prefix, AclOperation.READ, AclOperation.CREATE)
    topic = f"{prefix}made"
    with Wire(proxy.sasl) as wire:
        wire.login(name, PASSWORD)
        [answered] = wire.request(metadata_at(1, [topic])).topics
    # Kafka 3.9 asks its controller to create the topic and answers before it exists: UNKNOWN_TOPIC_OR_PARTITION
    # (older brokers: LEADER_NOT_AVAILABLE); the topic appears shortly after
    assert answered.error_code in (ErrorCode.none, ErrorCode.leader_not_available, ErrorCode.unknown_topic_or_partition)
    deadline = time.monotonic() + 30
    while topic not in broker_topics(kafka):
        assert time.monotonic() < deadline, f"{topic} was not created upstream"
        time.sleep(0.2)  # polling the broker's metadata, bounded by the deadline
    allowed = [r for r in proxy.audit_records() if r.get("principal") == f"User:{name}"
               and r.get("operation") == "AUTO_CREATE" and r.get("resource_name") == topic]  # fmt: skip
    assert [r["decision"] for r in allowed] == ["ALLOWED"]
