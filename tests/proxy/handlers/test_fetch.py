"""``proxy.handlers.fetch`` against an in-memory upstream: an allowed sessionless Fetch goes up as the client sent it
and its answer comes back unchanged; a Fetch with a session goes up sessionless; a denied topic's partitions are
answered TOPIC_AUTHORIZATION_FAILED by the proxy and only the allowed topics go upstream; a follower's fetch never
goes upstream; an upstream that fails ends the request with ``UpstreamUnavailable``."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch_request
from kio.schema.fetch.v12 import response as fetch_response

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.bootstrap import Services
from kafkaguard.model import AclOperation, ResourceType
from kafkaguard.protocol.build import nested
from kafkaguard.protocol.codec import decode_request, request_schema
from kafkaguard.proxy.handlers import fetch as fetch_handler
from kafkaguard.proxy.upstream import UpstreamUnavailable
from tests.proxy.memory_upstream import (
    VERSIONS,
    MemoryUpstream,
    allow,
    answer_of,
    assert_relayed,
    entity,
    handle,
    unavailable,
)


@pytest.fixture(autouse=True)
def reader(services: Services) -> None:
    allow(services, "User:alice", ResourceType.TOPIC, "feed-", AclOperation.READ)


def fetch(*topics: str, session: tuple[int, int] = (0, -1), replica_id: int = -1) -> Any:
    wanted = tuple(
        entity(fetch_request.FetchTopic, topic=name, partitions=(entity(fetch_request.FetchPartition, partition=0),))
        for name in topics
    )
    return entity(fetch_request.FetchRequest, replica_id=replica_id, max_bytes=1 << 20, session_id=session[0],
                  session_epoch=session[1], topics=wanted)  # fmt: skip


def refuse_to_rebuild(_request: Any) -> Any:
    raise AssertionError("rebuilt: the request was decoded and re-encoded")


def fetched(api_key: ApiKey, version: int, request: Any) -> Any:
    """The upstream's answer: each partition at high watermark 100."""
    responses = tuple(
        entity(fetch_response.FetchableTopicResponse, topic=topic.topic, partitions=tuple(
            entity(fetch_response.PartitionData, partition_index=p.partition, high_watermark=100)
            for p in topic.partitions))
        for topic in request.topics
    )  # fmt: skip
    return answer_of(api_key, version, responses=responses)


def partitions(answer: Any) -> dict[str, tuple[ErrorCode, int]]:
    return {t.topic: (p.error_code, int(p.high_watermark)) for t in answer.responses for p in t.partitions}


def test_an_allowed_fetch_is_relayed_as_the_client_sent_it(services: Services):
    upstream = MemoryUpstream(fetched)
    handled = handle(services, upstream, fetch("feed-a", "feed-b"))
    assert_relayed(handled, upstream)
    assert partitions(handled.answer()) == {"feed-a": (ErrorCode.none, 100), "feed-b": (ErrorCode.none, 100)}


def test_a_fetch_in_a_session_goes_upstream_sessionless(services: Services):
    upstream = MemoryUpstream(fetched)
    handled = handle(services, upstream, fetch("feed-a", session=(5, 3)))
    (sent,) = upstream.bodies(ApiKey.FETCH)
    assert (sent.session_id, sent.session_epoch) == (0, -1)
    assert upstream.sent[0].payload != handled.payload
    assert partitions(handled.answer()) == {"feed-a": (ErrorCode.none, 100)}


def test_a_request_for_a_new_session_goes_up_as_the_client_sent_it_but_sessionless(
    services: Services, monkeypatch: pytest.MonkeyPatch
):
    """Java asks for a new session (id 0, epoch 0) after every answer that made none: the client's bytes go up with
    only the epoch set to -1 (FINAL: no session), not decoded and rebuilt."""
    upstream = MemoryUpstream(fetched)
    monkeypatch.setattr(fetch_handler, "_sessionless", refuse_to_rebuild)  # the bytes are patched, not rebuilt
    handled = handle(services, upstream, fetch("feed-a", session=(0, 0)))
    (sent,) = upstream.bodies(ApiKey.FETCH)
    assert (sent.session_id, sent.session_epoch) == (0, -1)
    assert sent == dataclasses.replace(decode_request(handled.payload, VERSIONS).body, session_epoch=-1)
    differing = [i for i, (a, b) in enumerate(zip(upstream.sent[0].payload, handled.payload, strict=True)) if a != b]
    assert len(differing) == 4 and differing[-1] - differing[0] == 3  # one int32 changed in place: the epoch 0 -> -1
    assert upstream.sent[0].payload[differing[0] : differing[-1] + 1] == b"\xff" * 4
    assert upstream.passed_on, "relayed, not decoded"
    assert partitions(handled.answer()) == {"feed-a": (ErrorCode.none, 100)}


@pytest.mark.parametrize("version", range(7, 13))
def test_a_new_session_is_declined_in_place_at_every_layout_by_name(
    services: Services, version: int, monkeypatch: pytest.MonkeyPatch
):
    """v7-v11 (header v1, no tagged fields) and v12 (flexible): the epoch found at the same body offset."""
    monkeypatch.setattr(fetch_handler, "_sessionless", refuse_to_rebuild)
    schema = request_schema(ApiKey.FETCH, version)
    topic = entity(nested(schema, "FetchTopic"), topic="feed-a", partitions=(entity(nested(schema, "FetchPartition"),
                                                                                    partition=0),))  # fmt: skip
    request = entity(schema, replica_id=-1, max_bytes=1 << 20, session_id=0, session_epoch=0, topics=(topic,))
    upstream = MemoryUpstream(fetched)
    handled = handle(services, upstream, request)
    (sent,) = upstream.bodies(ApiKey.FETCH)
    assert sent == dataclasses.replace(request, session_epoch=-1)
    assert sum(a != b for a, b in zip(upstream.sent[0].payload, handled.payload, strict=True)) == 4


def test_a_denied_topic_is_refused_and_only_the_allowed_ones_go_upstream(services: Services):
    upstream = MemoryUpstream(fetched)
    handled = handle(services, upstream, fetch("feed-a", "secret-b"))
    assert [t.topic for t in upstream.bodies(ApiKey.FETCH)[0].topics] == ["feed-a"]
    assert partitions(handled.answer()) == {
        "feed-a": (ErrorCode.none, 100),
        "secret-b": (ErrorCode.topic_authorization_failed, -1),
    }


def test_a_followers_fetch_never_reaches_the_upstream(services: Services):
    upstream = MemoryUpstream(fetched)
    handled = handle(services, upstream, fetch("feed-a", replica_id=2))
    assert upstream.sent == []
    assert partitions(handled.answer()) == {"feed-a": (ErrorCode.topic_authorization_failed, -1)}


def test_an_upstream_failure_ends_the_request(services: Services):
    with pytest.raises(UpstreamUnavailable):
        handle(services, MemoryUpstream(unavailable), fetch("feed-a"))
