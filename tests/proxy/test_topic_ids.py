"""``proxy.topic_ids``: the upstream's topic ids ↔ names, kept a bijection that each new fact replaces (never merges),
so delete/re-create can never resolve an id to another topic's name; bounded; refreshed from an in-memory upstream
whose topics change under it. And the Metadata handler's answers by id (v12), which feed it."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v11 import request as metadata_v11
from kio.schema.metadata.v12 import request as metadata_v12
from kio.schema.types import TopicName

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.bootstrap import Services
from kafkaguard.model import AclOperation, ResourceType
from kafkaguard.protocol.build import nested
from kafkaguard.protocol.codec import response_schema
from kafkaguard.proxy.nodes import NodeDirectory
from kafkaguard.proxy.topic_ids import TopicIds, resolve
from tests.proxy.memory_upstream import PROXY_HOST, UPSTREAM, MemoryUpstream, allow, entity, handle

A, B, C = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()


def test_a_name_re_created_with_a_new_id_forgets_the_old_id():
    ids = TopicIds()
    ids.learn("orders", A)
    ids.learn("orders", B)  # deleted and created again
    assert ids.name_of(A) is None
    assert ids.name_of(B) == "orders"
    assert ids.id_of("orders") == B
    assert len(ids) == 1


def test_an_id_said_to_be_another_name_replaces_both_pairs():
    ids = TopicIds()
    ids.learn("orders", A)
    ids.learn("payments", A)  # never in Kafka; were it said, the old pair goes whole
    assert ids.name_of(A) == "payments"
    assert ids.id_of("orders") is None


def test_a_complete_listing_replaces_everything_and_unknown_answers_forget():
    ids = TopicIds()
    ids.learn("orders", A)
    ids.learn("gone", C)
    cls = nested(response_schema(ApiKey.METADATA, 12), "MetadataResponseTopic")
    ids.observe([entity(cls, name="orders", topic_id=B, error_code=ErrorCode.none)], complete=True)
    assert (ids.name_of(A), ids.name_of(B), ids.name_of(C)) == (None, "orders", None)
    ids.observe([entity(cls, name=None, topic_id=B, error_code=ErrorCode.unknown_topic_id)])
    assert ids.name_of(B) is None and ids.id_of("orders") is None
    ids.learn("orders", A)
    ids.observe(
        [entity(cls, name="orders", topic_id=uuid.UUID(int=0), error_code=ErrorCode.unknown_topic_or_partition)]
    )
    assert ids.name_of(A) is None


def test_memory_is_bounded_and_the_oldest_entry_goes_first():
    ids = TopicIds(max_topics=3)
    made = [uuid.uuid4() for _ in range(5)]
    for i, topic_id in enumerate(made):
        ids.learn(f"t{i}", topic_id)
    assert len(ids) == 3
    assert [ids.name_of(i) for i in made] == [None, None, "t2", "t3", "t4"]
    with pytest.raises(ValueError, match="max_topics must be at least 1"):
        TopicIds(max_topics=0)


class Cluster:
    """An upstream whose topics (name → id) the test changes; it answers Metadata by name, by id or for all."""

    def __init__(self, **topics: uuid.UUID) -> None:
        self.topics = dict(topics)

    def __call__(self, api_key: ApiKey, version: int, request: Any) -> Any:
        assert api_key is ApiKey.METADATA
        cls = response_schema(api_key, version)
        topic_cls, partition_cls = nested(cls, "MetadataResponseTopic"), nested(cls, "MetadataResponsePartition")
        by_id = {i: n for n, i in self.topics.items()}

        def described(name: str, topic_id: uuid.UUID) -> Any:
            return entity(topic_cls, name=name, topic_id=topic_id, error_code=ErrorCode.none,
                          partitions=(entity(partition_cls, partition_index=0, leader_id=1),))  # fmt: skip

        if request.topics is None:
            topics = tuple(described(n, i) for n, i in self.topics.items())
        else:
            answered = []
            for asked in request.topics:
                if asked.name is None:
                    name = by_id.get(asked.topic_id)
                    answered.append(described(name, asked.topic_id) if name is not None else
                                    entity(topic_cls, name=None, topic_id=asked.topic_id,
                                           error_code=ErrorCode.unknown_topic_id))  # fmt: skip
                elif asked.name in self.topics:
                    answered.append(described(asked.name, self.topics[asked.name]))
                else:
                    answered.append(entity(topic_cls, name=asked.name, error_code=ErrorCode.unknown_topic_or_partition))
            topics = tuple(answered)
        broker = entity(nested(cls, "MetadataResponseBroker"), node_id=1, host=UPSTREAM.host, port=UPSTREAM.port)
        return entity(cls, brokers=(broker,), topics=topics, controller_id=1)


def test_resolve_asks_the_upstream_only_for_unknown_ids_and_follows_a_re_creation():
    cluster = Cluster(orders=A)
    upstream, ids = MemoryUpstream(cluster), TopicIds()
    assert asyncio.run(resolve(upstream.call, [A, C], ids)) == {A: "orders"}
    assert [t.topic_id for t in upstream.bodies(ApiKey.METADATA)[0].topics] == [A, C]
    assert asyncio.run(resolve(upstream.call, [A], ids)) == {A: "orders"}
    assert len(upstream.sent) == 1, "a known id costs no round trip"

    cluster.topics = {"orders": B}  # deleted and re-created
    assert asyncio.run(resolve(upstream.call, [B], ids)) == {B: "orders"}
    assert ids.name_of(A) is None, "the old id no longer resolves to the re-created topic's name"
    assert asyncio.run(resolve(upstream.call, [A], ids)) == {}


@pytest.fixture(autouse=True)
def describer(services: Services) -> None:
    allow(services, "User:alice", ResourceType.TOPIC, "feed-", AclOperation.DESCRIBE)


def by_id(*ids: uuid.UUID, names: tuple[str, ...] = ()) -> Any:
    topics = tuple(metadata_v12.MetadataRequestTopic(topic_id=i, name=None) for i in ids) + tuple(
        metadata_v12.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=TopicName(n)) for n in names
    )
    return metadata_v12.MetadataRequest(
        topics=topics, allow_auto_topic_creation=True, include_topic_authorized_operations=True
    )


def test_metadata_by_id_answers_each_id_and_names_nothing_the_caller_may_not_describe(services: Services):
    cluster = Cluster(**{"feed-a": A, "secret": B})
    upstream, nodes = MemoryUpstream(cluster), NodeDirectory([UPSTREAM], PROXY_HOST)
    handled = handle(services, upstream, by_id(A, B, C, names=("feed-ignored",)), nodes=nodes)
    answer = handled.answer()
    got = {t.topic_id: (t.error_code, t.name, len(t.partitions)) for t in answer.topics}
    assert got == {
        A: (ErrorCode.none, "feed-a", 1),
        B: (ErrorCode.topic_authorization_failed, None, 0),
        C: (ErrorCode.unknown_topic_id, None, 0),
    }
    lookup, confirmation, forwarded = upstream.bodies(ApiKey.METADATA)
    assert [t.topic_id for t in lookup.topics] == [A, B, C], "the unknown ids resolved in one lookup"
    assert [t.topic_id for t in confirmation.topics] == [B], "a refused id is confirmed afresh"
    assert [(t.topic_id, t.name) for t in forwarded.topics] == [(A, None)], "only what the caller may describe"
    assert forwarded.allow_auto_topic_creation is False
    described = next(t for t in answer.topics if t.topic_id == A)
    assert described.topic_authorized_operations > 0, "the caller's operations, from kafkaguard's ACLs"
    assert nodes.topic_ids.name_of(A) == "feed-a" and nodes.topic_ids.name_of(C) is None

    cluster.topics = {"feed-a": A}  # "secret" deleted: its id is now unknown, as Kafka would say
    again = handle(services, upstream, by_id(A, B), nodes=nodes).answer()
    assert {t.topic_id: t.error_code for t in again.topics} == {A: ErrorCode.none, B: ErrorCode.unknown_topic_id}


@pytest.mark.parametrize("named", [False, True], ids=["null-name", "id-given"])
def test_metadata_v11_naming_an_id_is_invalid_and_never_forwarded(services: Services, named: bool):
    upstream = MemoryUpstream(Cluster(**{"feed-a": A}))
    topic = metadata_v11.MetadataRequestTopic(
        topic_id=A if named else uuid.UUID(int=0), name=TopicName("feed-a") if named else None
    )
    request = metadata_v11.MetadataRequest(topics=(topic,), allow_auto_topic_creation=False,
                                           include_topic_authorized_operations=False)  # fmt: skip
    answer = handle(services, upstream, request).answer()
    assert [(t.error_code, t.name) for t in answer.topics] == [(ErrorCode.invalid_request, "feed-a" if named else "")]
    assert upstream.sent == []
