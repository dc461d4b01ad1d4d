"""``proxy.handlers.produce`` against an in-memory upstream: an allowed Produce goes up as the client sent it and
its answer comes back as the upstream sent it; a denied topic is answered TOPIC_AUTHORIZATION_FAILED by the proxy and
never reaches the upstream (only the allowed topics do); with acks=0 the allowed part goes up and the connection
closes; an upstream that fails ends the request with ``UpstreamUnavailable``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9 import request as produce_request
from kio.static.primitive import Records

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.bootstrap import Services
from kafkaguard.model import AclOperation, ResourceType
from kafkaguard.protocol.build import nested
from kafkaguard.protocol.codec import encode_response, response_schema
from kafkaguard.protocol.lengths import tagged_fields_at
from kafkaguard.protocol.replies import Close
from kafkaguard.proxy.nodes import MAX_NODE_ID, NodeDirectory, node_port
from kafkaguard.proxy.produce_walk import names_brokers
from kafkaguard.proxy.quotas import QuotaMeter
from kafkaguard.proxy.upstream import Address, UpstreamUnavailable
from kafkaguard.proxy.wire import UpstreamProtocolError
from tests.proxy.memory_upstream import (
    LISTENER,
    PROXY_HOST,
    UPSTREAM,
    MemoryUpstream,
    allow,
    answer_of,
    assert_relayed,
    entity,
    handle,
    unavailable,
)
from tests.proxy.test_quotas import Fixed

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
    cls = response_schema(api_key, version)
    topics = tuple(
        entity(nested(cls, "TopicProduceResponse"), name=topic.name, partition_responses=tuple(
            entity(nested(cls, "PartitionProduceResponse"), index=p.index, base_offset=42, log_start_offset=0)
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


# ------------------------------------------------------------------------- KIP-951 leader discovery (v10-v11)

NOT_LEADER = ErrorCode.not_leader_or_follower


def produce_at(version: int, *topics: str) -> Any:
    """A Produce of ``version`` (v10/v11: the same request as v9) to partition 0 of each of ``topics``."""
    request = load_request_schema(0, version)
    data = tuple(
        entity(nested(request, "TopicProduceData"), name=name,
               partition_data=(entity(nested(request, "PartitionProduceData"), index=0, records=BATCH),))
        for name in topics
    )  # fmt: skip
    return entity(request, acks=-1, topic_data=data)


def moved(leader: int, host: str, port: int) -> Any:
    """The upstream's answer when partition 0 of ``feed-`` topics moved to node ``leader`` at ``host:port``, as Kafka
    3.9 sends it (``KafkaApis.handleProduceRequest``): NOT_LEADER_OR_FOLLOWER, the new leader's id and epoch, and
    its endpoint in ``node_endpoints``; other topics are written."""

    def answer(api_key: ApiKey, version: int, request: Any) -> Any:
        cls = response_schema(api_key, version)
        partition, topic = nested(cls, "PartitionProduceResponse"), nested(cls, "TopicProduceResponse")
        leader_cls, endpoint = nested(cls, "LeaderIdAndEpoch"), nested(cls, "NodeEndpoint")
        topics = tuple(
            entity(topic, name=t.name, partition_responses=(
                entity(partition, index=0, error_code=NOT_LEADER, base_offset=-1,
                       current_leader=entity(leader_cls, leader_id=leader, leader_epoch=5))
                if t.name.startswith("feed-") else entity(partition, index=0, base_offset=42),))
            for t in request.topic_data
        )  # fmt: skip
        endpoints = (entity(endpoint, node_id=leader, host=host, port=port, rack="rack-b"),)
        return answer_of(api_key, version, responses=topics, node_endpoints=endpoints)

    return answer


def leaders(answer: Any) -> dict[str, tuple[ErrorCode, int, int]]:
    return {t.name: (p.error_code, int(p.current_leader.leader_id), int(p.current_leader.leader_epoch))
            for t in answer.responses for p in t.partition_responses}  # fmt: skip


@pytest.mark.parametrize("version", [10, 11])
def test_v10_plus_without_endpoints_is_relayed_unchanged(services: Services, version: int):
    upstream = MemoryUpstream(written)
    handled = handle(services, upstream, produce_at(version, "feed-a"))
    assert_relayed(handled, upstream)
    assert not names_brokers(version, handled.client[0])
    assert handled.answer().node_endpoints == ()


@pytest.mark.parametrize("version", [10, 11])
def test_node_endpoints_of_a_relayed_answer_are_the_proxys(services: Services, version: int):
    nodes = NodeDirectory([UPSTREAM], PROXY_HOST)
    upstream = MemoryUpstream(moved(2, "kafka-2.internal", 9093))
    handled = handle(services, upstream, produce_at(version, "feed-a"), nodes=nodes)
    assert [s.payload for s in upstream.sent] == [handled.payload]  # the request itself went up unchanged
    assert names_brokers(version, upstream.answered[0][4:])
    answer = handled.answer()
    assert [(int(e.node_id), e.host, int(e.port), e.rack) for e in answer.node_endpoints] == [
        (2, PROXY_HOST, node_port(LISTENER.port, 2), "rack-b")
    ]
    assert leaders(answer) == {"feed-a": (NOT_LEADER, 2, 5)}  # the leader's id and epoch are passed on as they are
    assert b"kafka-2.internal" not in b"".join(handled.client)
    assert nodes.address_of(2) == Address("kafka-2.internal", 9093)  # learned: its listener opens before the answer


def test_node_endpoints_are_rewritten_when_a_denied_topic_is_merged_in(services: Services):
    upstream = MemoryUpstream(moved(3, "kafka-3.internal", 9092))
    handled = handle(services, upstream, produce_at(11, "feed-a", "secret-b"))
    assert [t.name for t in upstream.bodies(ApiKey.PRODUCE)[0].topic_data] == ["feed-a"]
    answer = handled.answer()
    assert [(int(e.node_id), e.host, int(e.port)) for e in answer.node_endpoints] == [
        (3, PROXY_HOST, node_port(LISTENER.port, 3))
    ]
    assert {name: error for name, (error, _, _) in leaders(answer).items()} == {
        "feed-a": NOT_LEADER, "secret-b": ErrorCode.topic_authorization_failed,
    }  # fmt: skip


def test_node_endpoints_are_rewritten_on_a_throttled_answer(services: Services):
    meter = QuotaMeter(Fixed(1.0))  # one byte a second for every user: this Produce is over it (decoded path)
    upstream = MemoryUpstream(moved(2, "kafka-2.internal", 9093))
    handled = handle(services, upstream, produce_at(11, "feed-a"), meter=meter)
    answer = handled.answer()
    assert [(e.host, int(e.port)) for e in answer.node_endpoints] == [(PROXY_HOST, node_port(LISTENER.port, 2))]
    assert answer.throttle_time.total_seconds() > 0


def test_an_endpoint_the_proxy_cannot_serve_is_left_out(services: Services):
    upstream = MemoryUpstream(moved(MAX_NODE_ID + 1, "kafka-far.internal", 9092))
    handled = handle(services, upstream, produce_at(11, "feed-a"))
    answer = handled.answer()
    assert answer.node_endpoints == ()
    assert b"kafka-far.internal" not in b"".join(handled.client)


def test_a_truncated_answer_is_refused_not_passed_on():
    framed = encode_response(ApiKey.PRODUCE, 11, 7, moved(2, "kafka-2.internal", 9093)(
        ApiKey.PRODUCE, 11, produce_at(11, "feed-a")))  # fmt: skip
    payload = framed[4:]
    assert names_brokers(11, payload)
    section = tagged_fields_at(response_schema(ApiKey.PRODUCE, 11), payload, 5)  # after the v1 response header
    for cut in range(5, section + 1):  # every cut before the tagged fields' count: never read past the bytes
        with pytest.raises(UpstreamProtocolError, match="malformed Produce v11"):
            names_brokers(11, payload[:cut])
    assert not names_brokers(9, payload)  # below v10 a Produce answer names no broker: nothing is read


@pytest.mark.parametrize("version", [9, 10, 11])
@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_names_brokers_agrees_with_kio_on_any_answer(version: int, data: st.DataObject):
    """The walk reads exactly what kio decodes: an answer names brokers iff its ``node_endpoints`` are not empty."""
    body = data.draw(st.from_type(response_schema(ApiKey.PRODUCE, version)))
    payload = encode_response(ApiKey.PRODUCE, version, 7, body)[4:]
    assert names_brokers(version, payload) == bool(getattr(body, "node_endpoints", ()))
