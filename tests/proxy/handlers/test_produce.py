"""``proxy.handlers.produce`` against an in-memory upstream: an allowed Produce goes up as the client sent it and
its answer comes back as the upstream sent it; a denied topic is answered TOPIC_AUTHORIZATION_FAILED by the proxy and
never reaches the upstream (only the allowed topics do); with acks=0 the allowed part goes up and the connection
closes; an upstream that fails ends the request with ``UpstreamUnavailable``."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9 import request as produce_request
from kio.schema.produce.v9 import response as produce_response
from kio.static.primitive import Records

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.bootstrap import Services
from kafkaguard.model import AclOperation, ResourceType
from kafkaguard.protocol.replies import Close
from kafkaguard.proxy.upstream import UpstreamUnavailable
from tests.proxy.memory_upstream import MemoryUpstream, allow, answer_of, assert_relayed, entity, handle, unavailable

#: A v2 record batch header, not transactional (all the proxy reads of it are magic and attributes).
BATCH = Records(bytes(16) + b"\x02" + bytes(44))


@pytest.fixture(autouse=True)
def writer(services: Services) -> None:
    allow(services, "User:alice", ResourceType.TOPIC, "feed-", AclOperation.WRITE)


def produce(*topics: str, acks: int = -1) -> Any:
    data = tuple(
        entity(produce_request.TopicProduceData, name=name,
               partition_data=(entity(produce_request.PartitionProduceData, index=0, records=BATCH),))
        for name in topics
    )  # fmt: skip
    return entity(produce_request.ProduceRequest, acks=acks, topic_data=data)


def written(api_key: ApiKey, version: int, request: Any) -> Any:
    """The upstream's answer: every partition written at offset 42."""
    topics = tuple(
        entity(produce_response.TopicProduceResponse, name=topic.name, partition_responses=tuple(
            entity(produce_response.PartitionProduceResponse, index=p.index, base_offset=42, log_start_offset=0)
            for p in topic.partition_data))
        for topic in request.topic_data
    )  # fmt: skip
    return answer_of(api_key, version, responses=topics)


def errors(answer: Any) -> dict[str, tuple[ErrorCode, int]]:
    return {t.name: (p.error_code, int(p.base_offset)) for t in answer.responses for p in t.partition_responses}


def test_an_allowed_produce_is_relayed_as_the_client_sent_it(services: Services):
    upstream = MemoryUpstream(written)
    handled = handle(services, upstream, produce("feed-a", "feed-b"))
    assert_relayed(handled, upstream)
    assert errors(handled.answer()) == {"feed-a": (ErrorCode.none, 42), "feed-b": (ErrorCode.none, 42)}


def test_a_denied_topic_is_refused_and_only_the_allowed_ones_go_upstream(services: Services):
    upstream = MemoryUpstream(written)
    handled = handle(services, upstream, produce("feed-a", "secret-b"))
    assert [t.name for t in upstream.bodies(ApiKey.PRODUCE)[0].topic_data] == ["feed-a"]
    assert errors(handled.answer()) == {
        "feed-a": (ErrorCode.none, 42),
        "secret-b": (ErrorCode.topic_authorization_failed, -1),
    }


def test_a_produce_to_denied_topics_only_never_reaches_the_upstream(services: Services):
    upstream = MemoryUpstream(written)
    handled = handle(services, upstream, produce("secret-a"))
    assert upstream.sent == []
    assert errors(handled.answer()) == {"secret-a": (ErrorCode.topic_authorization_failed, -1)}


def test_acks_0_with_a_denied_topic_forwards_the_allowed_part_and_closes(services: Services):
    upstream = MemoryUpstream(lambda *_: None)  # acks=0: the broker answers nothing
    handled = handle(services, upstream, produce("feed-a", "secret-b", acks=0))
    assert [t.name for t in upstream.bodies(ApiKey.PRODUCE)[0].topic_data] == ["feed-a"]
    assert isinstance(handled.reply, Close)
    assert handled.client == []


def test_an_upstream_failure_ends_the_request(services: Services):
    with pytest.raises(UpstreamUnavailable, match="unreachable"):
        handle(services, MemoryUpstream(unavailable), produce("feed-a"))
