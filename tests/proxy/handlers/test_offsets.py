"""``proxy.handlers.offsets`` (ListOffsets) against an in-memory upstream: allowed topics go up as the client sent
them; a denied topic is answered TOPIC_AUTHORIZATION_FAILED (offset -1) by the proxy and only the allowed ones go
upstream; an upstream that fails ends the request with ``UpstreamUnavailable``."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v8 import request as offsets_request
from kio.schema.list_offsets.v8 import response as offsets_response

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.bootstrap import Services
from kafkaguard.model import AclOperation, ResourceType
from kafkaguard.proxy.upstream import UpstreamUnavailable
from tests.proxy.memory_upstream import MemoryUpstream, allow, answer_of, assert_relayed, entity, handle, unavailable


@pytest.fixture(autouse=True)
def describer(services: Services) -> None:
    allow(services, "User:alice", ResourceType.TOPIC, "feed-", AclOperation.DESCRIBE)


def list_offsets(*topics: str) -> Any:
    wanted = tuple(
        entity(offsets_request.ListOffsetsTopic, name=name,
               partitions=(entity(offsets_request.ListOffsetsPartition, partition_index=0, timestamp=-1),))
        for name in topics
    )  # fmt: skip
    return entity(offsets_request.ListOffsetsRequest, replica_id=-1, topics=wanted)


def listed(api_key: ApiKey, version: int, request: Any) -> Any:
    topics = tuple(
        entity(offsets_response.ListOffsetsTopicResponse, name=topic.name, partitions=tuple(
            entity(offsets_response.ListOffsetsPartitionResponse, partition_index=p.partition_index, offset=55)
            for p in topic.partitions))
        for topic in request.topics
    )  # fmt: skip
    return answer_of(api_key, version, topics=topics)


def offsets(answer: Any) -> dict[str, tuple[ErrorCode, int]]:
    return {t.name: (p.error_code, int(p.offset)) for t in answer.topics for p in t.partitions}


def test_allowed_topics_are_relayed_as_the_client_sent_them(services: Services):
    upstream = MemoryUpstream(listed)
    handled = handle(services, upstream, list_offsets("feed-a"))
    assert_relayed(handled, upstream)
    assert offsets(handled.answer()) == {"feed-a": (ErrorCode.none, 55)}


def test_a_denied_topic_is_refused_and_only_the_allowed_ones_go_upstream(services: Services):
    upstream = MemoryUpstream(listed)
    handled = handle(services, upstream, list_offsets("feed-a", "secret-b"))
    assert [t.name for t in upstream.bodies(ApiKey.LIST_OFFSETS)[0].topics] == ["feed-a"]
    assert offsets(handled.answer()) == {
        "feed-a": (ErrorCode.none, 55),
        "secret-b": (ErrorCode.topic_authorization_failed, -1),
    }


def test_denied_topics_only_never_reach_the_upstream(services: Services):
    upstream = MemoryUpstream(listed)
    handled = handle(services, upstream, list_offsets("secret-b"))
    assert upstream.sent == []
    assert offsets(handled.answer()) == {"secret-b": (ErrorCode.topic_authorization_failed, -1)}


def test_an_upstream_failure_ends_the_request(services: Services):
    with pytest.raises(UpstreamUnavailable):
        handle(services, MemoryUpstream(unavailable), list_offsets("feed-a"))
