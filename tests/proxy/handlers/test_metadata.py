"""``proxy.handlers.metadata`` (Metadata, DescribeCluster) against an in-memory upstream: a topic the caller may not
describe is answered TOPIC_AUTHORIZATION_FAILED and never named upstream; the first ask never auto-creates, and a
missing topic is asked for again with auto-creation only when the caller may create it and the broker creates topics;
a listing of all topics shows only the describable ones; v1-v3 go upstream as v4; brokers are answered at the proxy's
addresses; an upstream that fails ends the request with ``UpstreamUnavailable``."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kio.schema.describe_cluster.v1 import response as cluster_response
from kio.schema.describe_cluster.v1.request import DescribeClusterRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v1 import request as metadata_v1
from kio.schema.metadata.v12 import request as metadata_v12

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.bootstrap import Services
from kafkaguard.model import AclOperation, ResourceType
from kafkaguard.protocol.build import nested
from kafkaguard.protocol.codec import response_schema
from kafkaguard.proxy.nodes import NodeDirectory
from kafkaguard.proxy.upstream import UpstreamUnavailable
from tests.proxy.memory_upstream import (
    LISTENER,
    PROXY_HOST,
    UPSTREAM,
    MemoryUpstream,
    allow,
    answer_of,
    entity,
    handle,
    unavailable,
)

NODE_PORT = LISTENER.port + 1 + 1  # node 1 through the proxy


@pytest.fixture(autouse=True)
def describer(services: Services) -> None:
    allow(services, "User:alice", ResourceType.TOPIC, "feed-", AclOperation.DESCRIBE, AclOperation.CREATE)
    allow(services, "User:bob", ResourceType.TOPIC, "feed-", AclOperation.DESCRIBE)


def cluster(*existing: str) -> Any:
    """A one-broker upstream (node 1 at ``UPSTREAM``) holding the topics ``existing`` and creating any other topic
    asked for with auto-creation."""

    def answer(api_key: ApiKey, version: int, request: Any) -> Any:
        cls = response_schema(api_key, version)
        topic_cls = nested(cls, "MetadataResponseTopic")
        names = existing if request.topics is None else [t.name for t in request.topics]
        creates = bool(getattr(request, "allow_auto_topic_creation", True))
        topics = tuple(
            entity(topic_cls, name=name, error_code=ErrorCode.none if name in existing or creates
                   else ErrorCode.unknown_topic_or_partition)
            for name in names
        )  # fmt: skip
        broker = entity(nested(cls, "MetadataResponseBroker"), node_id=1, host=UPSTREAM.host, port=UPSTREAM.port)
        return answer_of(api_key, version, brokers=(broker,), controller_id=1, topics=topics)

    return answer


def metadata(*names: str, version: Any = metadata_v12, auto_create: bool = True) -> Any:
    if not names:
        return entity(version.MetadataRequest, topics=None, allow_auto_topic_creation=auto_create)
    if version is metadata_v1:  # no topic ids, no say on auto-creation (Kafka reads it as allowed)
        return entity(
            version.MetadataRequest, topics=tuple(entity(version.MetadataRequestTopic, name=n) for n in names)
        )
    topics = tuple(entity(version.MetadataRequestTopic, name=n, topic_id=uuid.UUID(int=0)) for n in names)
    return entity(version.MetadataRequest, topics=topics, allow_auto_topic_creation=auto_create)


def topics(answer: Any) -> dict[str, ErrorCode]:
    return {t.name: t.error_code for t in answer.topics}


def asked(upstream: MemoryUpstream) -> list[tuple[list[str] | None, bool]]:
    return [
        (None if b.topics is None else [t.name for t in b.topics], b.allow_auto_topic_creation)
        for b in upstream.bodies(ApiKey.METADATA)
    ]


def test_a_topic_not_describable_is_refused_and_never_named_upstream(services: Services):
    upstream = MemoryUpstream(cluster("feed-a", "secret-b"))
    handled = handle(services, upstream, metadata("feed-a", "secret-b"))
    assert asked(upstream) == [(["feed-a"], False)]
    answer = handled.answer()
    assert topics(answer) == {"feed-a": ErrorCode.none, "secret-b": ErrorCode.topic_authorization_failed}
    assert [(b.node_id, b.host, b.port) for b in answer.brokers] == [(1, PROXY_HOST, NODE_PORT)]


def test_all_topics_lists_only_the_describable_ones(services: Services):
    upstream = MemoryUpstream(cluster("feed-a", "secret-b"))
    handled = handle(services, upstream, metadata())
    assert asked(upstream) == [(None, False)]
    assert topics(handled.answer()) == {"feed-a": ErrorCode.none}


def test_a_missing_topic_is_created_only_for_a_caller_who_may_create_it(services: Services):
    upstream = MemoryUpstream(cluster())
    handled = handle(services, upstream, metadata("feed-new"))
    assert asked(upstream) == [(["feed-new"], False), (["feed-new"], True)]
    assert topics(handled.answer()) == {"feed-new": ErrorCode.none}
    upstream = MemoryUpstream(cluster())
    handled = handle(services, upstream, metadata("feed-new"), principal="User:bob")
    assert asked(upstream) == [(["feed-new"], False)]
    assert topics(handled.answer()) == {"feed-new": ErrorCode.topic_authorization_failed}


def test_no_creation_is_asked_of_a_broker_that_does_not_create_topics(services: Services):
    nodes = NodeDirectory([UPSTREAM], PROXY_HOST)
    nodes.record_auto_create(1, False, address=UPSTREAM)
    upstream = MemoryUpstream(cluster())
    handled = handle(services, upstream, metadata("feed-new"), nodes=nodes)
    assert asked(upstream) == [(["feed-new"], False)]
    assert topics(handled.answer()) == {"feed-new": ErrorCode.unknown_topic_or_partition}


def test_metadata_v1_goes_upstream_as_v4_without_auto_creation(services: Services):
    upstream = MemoryUpstream(cluster("feed-a"))
    handled = handle(services, upstream, metadata("feed-a", version=metadata_v1))
    assert [s.request.header.api_version for s in upstream.sent] == [4]
    assert asked(upstream) == [(["feed-a"], False)]
    assert topics(handled.answer()) == {"feed-a": ErrorCode.none}  # decoded at v1: the client's version


def test_describe_cluster_answers_the_brokers_at_the_proxys_addresses(services: Services):
    def described(api_key: ApiKey, version: int, _request: Any) -> Any:
        broker = entity(cluster_response.DescribeClusterBroker, broker_id=1, host=UPSTREAM.host, port=UPSTREAM.port)
        return answer_of(api_key, version, brokers=(broker,), cluster_id="c1", controller_id=1)

    upstream, nodes = MemoryUpstream(described), NodeDirectory([UPSTREAM], PROXY_HOST)
    handled = handle(services, upstream, entity(DescribeClusterRequest, endpoint_type=1), nodes=nodes)
    assert [s.payload for s in upstream.sent] == [handled.payload]
    assert [(b.broker_id, b.host, b.port) for b in handled.answer().brokers] == [(1, PROXY_HOST, NODE_PORT)]
    assert nodes.address_of(1) == UPSTREAM


def test_an_upstream_failure_ends_the_request(services: Services):
    with pytest.raises(UpstreamUnavailable):
        handle(services, MemoryUpstream(unavailable), metadata("feed-a"))
