"""Topics named by id through ``kafkaguard proxy`` in front of the real Kafka 3.9 broker (issue 28).

Metadata v12 may name topics only by id (name null). Before the fix the proxy dropped id-only entries and asked the
upstream for an empty list: every such request was answered with no topics and no error, for the super user too.
Kafka (``KafkaApis.handleTopicMetadataRequest``) answers each id: NONE with its name when the caller may describe
it, TOPIC_AUTHORIZATION_FAILED with a null name (and the id) when not, UNKNOWN_TOPIC_ID (null name) when no topic
has it. The super user's answers are compared with the broker's own, asked straight.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

from kafkaguard.model import AclOperation
from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker
from tests.kafka.proxy.test_proxy_auto_create import grant_prefix
from tests.kafka.proxy.test_proxy_clients import PASSWORD, create_topics, unique, user
from tests.server.conftest import ServerHandle
from tests.wire import Wire, metadata


def broker_address(kafka: KafkaBroker) -> tuple[str, int]:
    host, port = kafka.bootstrap.rsplit(":", 1)
    return host, int(port)


def topic_ids(kafka: KafkaBroker, names: list[str]) -> dict[str, uuid.UUID]:
    """The ids the broker gave ``names``, asked straight as its admin."""
    with Wire(broker_address(kafka)) as wire:
        wire.login(ADMIN, ADMIN_PASSWORD)
        answer = metadata(wire, names, allow_auto_topic_creation=False)
    ids = {t.name: t.topic_id for t in answer.topics if t.error_code == ErrorCode.none}
    assert set(ids) == set(names), answer
    return ids


def by_id(wire: Wire, ids: list[uuid.UUID]) -> list[tuple[Any, ...]]:
    """Metadata v12 naming only ``ids``: per topic (id, error, name, partition count), sorted."""
    request = MetadataRequest(
        topics=tuple(MetadataRequestTopic(topic_id=i, name=None) for i in ids),
        allow_auto_topic_creation=True,  # must create nothing: ids name only existing topics
        include_topic_authorized_operations=False,
    )
    answer = wire.request(request)
    return sorted(((t.topic_id, t.error_code, t.name, len(t.partitions)) for t in answer.topics), key=str)


def test_metadata_by_id_answers_each_id_as_kafka_does(proxy: ServerHandle, kafka: KafkaBroker):
    prefix = unique("ids")
    seen, hidden = f"{prefix}-seen", f"{prefix}-hidden"
    create_topics(kafka, seen, hidden, partitions=2)
    ids = topic_ids(kafka, [seen, hidden])
    unknown = uuid.uuid4()
    asked = [ids[seen], ids[hidden], unknown]

    with Wire(broker_address(kafka)) as direct:
        direct.login(ADMIN, ADMIN_PASSWORD)
        straight = by_id(direct, asked)
    with Wire(proxy.sasl) as wire:
        wire.login(ADMIN, ADMIN_PASSWORD)
        proxied = by_id(wire, asked)
    assert proxied == straight
    assert (ids[seen], ErrorCode.none, seen, 2) in proxied
    assert (unknown, ErrorCode.unknown_topic_id, None, 0) in proxied

    limited = user(proxy)
    grant_prefix(proxy, limited, seen, AclOperation.DESCRIBE)
    with Wire(proxy.sasl) as wire:
        wire.login(limited, PASSWORD)
        answered = by_id(wire, asked)
    assert answered == sorted(
        [
            (ids[seen], ErrorCode.none, seen, 2),
            (ids[hidden], ErrorCode.topic_authorization_failed, None, 0),  # Kafka: ids are not secret
            (unknown, ErrorCode.unknown_topic_id, None, 0),
        ],
        key=str,
    )
