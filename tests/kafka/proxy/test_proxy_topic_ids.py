"""Topics named by id through ``kafkaguard proxy`` in front of the real Kafka 3.9 broker (issue 28).

Metadata v12 may name topics only by id (name null). Before the fix the proxy dropped id-only entries and asked the
upstream for an empty list: every such request was answered with no topics and no error, for the super user too.
Kafka (``KafkaApis.handleTopicMetadataRequest``) answers each id: NONE with its name when the caller may describe
it, TOPIC_AUTHORIZATION_FAILED with a null name (and the id) when not, UNKNOWN_TOPIC_ID (null name) when no topic
has it. Fetch v13+ (``handleFetchRequest``) likewise: UNKNOWN_TOPIC_ID for an id no topic has, then READ on the
id's name (TOPIC_AUTHORIZATION_FAILED). The super user's answers are compared with the broker's own, asked straight.
"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclBinding as KafkaAclBinding
from confluent_kafka.admin._acl import AclOperation as KafkaOperation
from confluent_kafka.admin._acl import AclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType
from confluent_kafka.admin._resource import ResourceType as KafkaResource
from confluent_kafka.admin._scram import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.describe_topic_partitions.v0.request import Cursor, DescribeTopicPartitionsRequest, TopicRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.model import AclOperation, ResourceType
from kafkaguard.protocol.build import nested
from kafkaguard.protocol.codec import request_schema
from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker
from tests.kafka.proxy.test_proxy_auto_create import grant_prefix
from tests.kafka.proxy.test_proxy_clients import PASSWORD, create_topics, grant, sasl, unique, user
from tests.serving import ServerHandle
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


def fetch_by_id(version: int, ids: list[uuid.UUID], partition: int = 0) -> Any:
    """Fetch ``version`` (13+) of ``partition`` of each of ``ids`` from offset 0, sessionless."""
    schema = request_schema(ApiKey.FETCH, version)
    topic_cls, partition_cls = nested(schema, "FetchTopic"), nested(schema, "FetchPartition")
    topics = tuple(
        topic_cls(topic_id=i, partitions=(partition_cls(partition=i32(partition), fetch_offset=i64(0),
                                                        partition_max_bytes=i32(1 << 20)),))
        for i in ids
    )  # fmt: skip
    extra = {"replica_id": BrokerId(-1)} if version < 15 else {}
    return schema(max_wait=timedelta(milliseconds=100), min_bytes=i32(0), max_bytes=i32(1 << 20),
                  isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1), topics=topics,
                  forgotten_topics_data=(), rack_id="", **extra)  # fmt: skip


def fetched(answer: Any) -> dict[uuid.UUID, tuple[ErrorCode, int]]:
    """Per topic id: partition 0's error and how many record bytes came."""
    return {t.topic_id: (t.partitions[0].error_code, len(t.partitions[0].records or b"")) for t in answer.responses}


@pytest.mark.parametrize("version", [13, 15, 16, 17])
def test_fetch_by_id_reads_what_is_allowed_and_refuses_the_rest_as_kafka(
    proxy: ServerHandle, kafka: KafkaBroker, version: int
):
    prefix = unique("fetch-ids")
    readable, hidden = f"{prefix}-readable", f"{prefix}-hidden"
    create_topics(kafka, readable, hidden)
    producer = Producer(sasl(kafka.bootstrap, ADMIN, ADMIN_PASSWORD))
    for topic in (readable, hidden):
        producer.produce(topic, b"record", partition=0)
    assert producer.flush(30) == 0
    ids = topic_ids(kafka, [readable, hidden])
    unknown = uuid.uuid4()
    asked = [ids[readable], ids[hidden], unknown]

    with Wire(broker_address(kafka)) as direct:
        direct.login(ADMIN, ADMIN_PASSWORD)
        straight = fetched(direct.request(fetch_by_id(version, asked)))
    with Wire(proxy.sasl) as wire:
        wire.login(ADMIN, ADMIN_PASSWORD)
        proxied = fetched(wire.request(fetch_by_id(version, asked)))
    assert proxied == straight
    assert straight[unknown] == (ErrorCode.unknown_topic_id, 0) and straight[ids[hidden]][1] > 0

    reader = user(proxy)
    grant(proxy, f"User:{reader}", ResourceType.TOPIC, readable, AclOperation.READ)
    with Wire(proxy.sasl) as wire:
        wire.login(reader, PASSWORD)
        answer = fetched(wire.request(fetch_by_id(version, asked)))
    assert answer == {
        ids[readable]: straight[ids[readable]],
        ids[hidden]: (ErrorCode.topic_authorization_failed, 0),  # Kafka: unauthorized, not unknown (ids not secret)
        unknown: (ErrorCode.unknown_topic_id, 0),
    }
    denied = {
        r["resource_name"]
        for r in proxy.audit_records()
        if r.get("principal") == f"User:{reader}" and r.get("api") == "Fetch" and r.get("decision") == "DENIED"
    }
    assert denied == {hidden}, "the refusal is audited under the topic's name"  # fmt: skip


def pages(wire: Wire, names: list[str], limit: int) -> list[list[tuple[str, int, ErrorCode, int]]]:
    """Every page of DescribeTopicPartitions v0 for ``names`` (empty: every topic), following ``next_cursor``: per
    page, (topic, first partition, error, partition count)."""
    walked = []
    cursor = None
    for _ in range(50):
        request = DescribeTopicPartitionsRequest(
            topics=tuple(TopicRequest(name=TopicName(n)) for n in names),
            response_partition_limit=i32(limit),
            cursor=cursor,
        )
        answer = wire.request(request)
        walked.append([(str(t.name), t.partitions[0].partition_index if t.partitions else -1, t.error_code,
                        len(t.partitions)) for t in answer.topics])  # fmt: skip
        if answer.next_cursor is None:
            return walked
        cursor = Cursor(topic_name=answer.next_cursor.topic_name, partition_index=answer.next_cursor.partition_index)
    raise AssertionError(f"no last page: {walked}")


def test_describe_topic_partitions_pages_as_kafka_pages_the_callers_topics(proxy: ServerHandle, kafka: KafkaBroker):
    """The same user and ACLs on both sides (DESCRIBE on a, c, d; not b): the same pages, named or all topics."""
    walks = {}
    for side in ("kafka", "proxy"):
        prefix = unique(f"dtp-{side}")
        sizes = {"a": 3, "b": 2, "c": 2, "d": 1}
        for role, count in sizes.items():
            create_topics(kafka, f"{prefix}-{role}", partitions=count)
        name = f"{prefix}-user"
        if side == "kafka":
            on_broker(kafka, name, [f"{prefix}-{r}" for r in "acd"])
            address, password = broker_address(kafka), PASSWORD
        else:
            proxy.add_user(name, PASSWORD)
            for r in "acd":
                grant(proxy, f"User:{name}", ResourceType.TOPIC, f"{prefix}-{r}", AclOperation.DESCRIBE)
            address, password = proxy.sasl, PASSWORD
        time.sleep(1)  # the broker applies new credentials and ACLs asynchronously (well within this)
        with Wire(address) as wire:
            wire.login(name, password)
            named = pages(wire, [f"{prefix}-{r}" for r in "abcd"], limit=2)
            every = pages(wire, [], limit=2)
        walks[side] = [[(t.replace(prefix, "P"), *rest) for t, *rest in page] for page in named + every]
    assert walks["proxy"] == walks["kafka"]
    shown = {t for page in walks["kafka"] for t, _p, error, _n in page if error == ErrorCode.none}
    assert shown == {"P-a", "P-c", "P-d"}
    assert len(walks["kafka"]) > 4, "several pages each way"


def on_broker(kafka: KafkaBroker, name: str, describable: list[str]) -> None:
    """``name`` on the broker itself: a SCRAM-SHA-256 credential and DESCRIBE on each of ``describable``."""
    admin = AdminClient(sasl(kafka.bootstrap, ADMIN, ADMIN_PASSWORD))
    upsert = UserScramCredentialUpsertion(name, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                          PASSWORD.encode())  # fmt: skip
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(60)
    bindings = [
        KafkaAclBinding(
            KafkaResource.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            f"User:{name}",
            "*",
            KafkaOperation.DESCRIBE,
            AclPermissionType.ALLOW,
        )
        for topic in describable
    ]
    for future in admin.create_acls(bindings).values():
        future.result(60)


def test_delete_and_describe_by_id_for_a_limited_user_match_kafka(proxy: ServerHandle, kafka: KafkaBroker):
    """DeleteTopics v6 and Metadata v12 by id from a user with DESCRIBE on ``visible`` only, on both sides: the same
    answers (names shown only where Kafka shows them), nothing deleted."""
    results = {}
    for side in ("kafka", "proxy"):
        prefix = unique(f"del-{side}")
        visible, hidden = f"{prefix}-visible", f"{prefix}-hidden"
        create_topics(kafka, visible, hidden)
        ids = topic_ids(kafka, [visible, hidden])
        name = f"{prefix}-user"
        if side == "kafka":
            on_broker(kafka, name, [visible])
            address = broker_address(kafka)
        else:
            proxy.add_user(name, PASSWORD)
            grant(proxy, f"User:{name}", ResourceType.TOPIC, visible, AclOperation.DESCRIBE)
            address = proxy.sasl
        time.sleep(1)  # the broker applies new credentials and ACLs asynchronously (well within this)
        unknown = uuid.uuid5(uuid.NAMESPACE_URL, "no such topic")
        request = DeleteTopicsRequest(
            topics=(
                *(DeleteTopicState(name=None, topic_id=i) for i in (ids[visible], ids[hidden], unknown)),
                DeleteTopicState(name=TopicName(visible), topic_id=None),
            ),
            timeout=i32Timedelta.parse(timedelta(seconds=30)),
        )
        with Wire(address) as wire:
            wire.login(name, PASSWORD)
            deleted = wire.request(request)
            described = by_id(wire, [ids[visible], ids[hidden], unknown])
        roles = {ids[visible]: "V", ids[hidden]: "H", unknown: "U", None: "-"}
        results[side] = (
            sorted(
                (roles.get(r.topic_id, "?"), r.name and r.name.replace(prefix, "P"), r.error_code, r.error_message)
                for r in deleted.responses
            ),
            sorted((roles[i], e, n and n.replace(prefix, "P"), c) for i, e, n, c in described),
        )
        assert set(topic_ids(kafka, [visible, hidden])) == {visible, hidden}, "nothing was deleted"
    assert results["proxy"] == results["kafka"]
    deleted, _described = results["kafka"]
    assert ("V", "P-visible", ErrorCode.topic_authorization_failed, "Topic authorization failed.") in deleted
    assert ("H", None, ErrorCode.topic_authorization_failed, "Topic authorization failed.") in deleted
