"""The handlers of requests that name topics by id, against an in-memory upstream whose topics the test sets:
Fetch v13+ (ids resolved, READ checked on the name, UNKNOWN_TOPIC_ID / TOPIC_AUTHORIZATION_FAILED as Kafka, all
allowed relayed unchanged; v16+ at their own version, their ``node_endpoints`` rewritten to the proxy's addresses),
DeleteTopics v6 and DescribeTopicPartitions v0 (pages cut over what the caller may describe; never an empty list
upstream)."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta
from typing import Any

import pytest
from kio.schema.delete_topics.v6 import request as delete_v6
from kio.schema.describe_topic_partitions.v0 import request as dtp_v0
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.bootstrap import Services
from kafkaguard.model import AclOperation, ResourceType
from kafkaguard.protocol.build import nested
from kafkaguard.protocol.codec import request_schema, response_schema
from kafkaguard.protocol.outbox import OutboxClosed
from kafkaguard.protocol.replies import Throttled
from kafkaguard.proxy.handlers import fetch as fetch_handler
from kafkaguard.proxy.nodes import NodeDirectory
from kafkaguard.proxy.upstream import Address, UpstreamUnavailable
from kafkaguard.proxy.wire import correlation_id_of, decode_response
from tests.proxy.memory_upstream import (
    LISTENER,
    PROXY_HOST,
    UPSTREAM,
    MemoryUpstream,
    allow,
    answer_of,
    entity,
    handle,
)
from tests.proxy.test_quotas import meter as quota_meter
from tests.proxy.test_topic_ids import Cluster

FEED, SECRET, OTHER, GONE = uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
NODE_2_PORT = LISTENER.port + 1 + 2


@pytest.fixture(autouse=True)
def acls(services: Services) -> None:
    allow(services, "User:alice", ResourceType.TOPIC, "feed-", AclOperation.READ, AclOperation.DELETE)
    allow(services, "User:alice", ResourceType.TOPIC, "seen-", AclOperation.DESCRIBE)


class Upstream(Cluster):
    """Metadata from ``Cluster``; Fetch, DeleteTopics and DescribeTopicPartitions answered per item, no error."""

    endpoints: tuple[tuple[int, str, int], ...] = ()

    def __call__(self, api_key: ApiKey, version: int, request: Any) -> Any:
        if api_key is ApiKey.METADATA:
            return super().__call__(api_key, version, request)
        cls = response_schema(api_key, version)
        if api_key is ApiKey.FETCH:
            topic_cls, partition_cls = nested(cls, "FetchableTopicResponse"), nested(cls, "PartitionData")
            responses = tuple(
                entity(topic_cls, topic_id=t.topic_id, partitions=tuple(
                    entity(partition_cls, partition_index=p.partition, high_watermark=100, records=b"")
                    for p in t.partitions))
                for t in request.topics
            )  # fmt: skip
            fields: dict[str, Any] = {"responses": responses}
            if self.endpoints:
                endpoint_cls = nested(cls, "NodeEndpoint")
                fields["node_endpoints"] = tuple(
                    entity(endpoint_cls, node_id=n, host=h, port=p) for n, h, p in self.endpoints
                )
            return answer_of(api_key, version, **fields)
        if api_key is ApiKey.DELETE_TOPICS:
            result_cls = nested(cls, "DeletableTopicResult")
            by_id = {i: n for n, i in self.topics.items()}
            results = tuple(
                entity(result_cls, name=t.name or by_id.get(t.topic_id), topic_id=t.topic_id or self.topics[t.name])
                for t in request.topics
            )
            return answer_of(api_key, version, responses=results)
        assert api_key is ApiKey.DESCRIBE_TOPIC_PARTITIONS
        topic_cls, partition_cls = (
            nested(cls, "DescribeTopicPartitionsResponseTopic"),
            nested(cls, "DescribeTopicPartitionsResponsePartition"),
        )
        assert request.topics, "never asked for every topic"
        names = sorted(t.name for t in request.topics)
        topics = tuple(
            entity(topic_cls, name=n, topic_id=self.topics[n], partitions=(entity(partition_cls, partition_index=0),))
            for n in names
        )
        return answer_of(api_key, version, topics=topics, next_cursor=None)


def upstream_of(**topics: uuid.UUID) -> tuple[Upstream, MemoryUpstream, NodeDirectory]:
    cluster = Upstream(**topics)
    return cluster, MemoryUpstream(cluster), NodeDirectory([UPSTREAM], PROXY_HOST)


def fetch(version: int, *ids: uuid.UUID, partitions: int = 1) -> Any:
    schema = request_schema(ApiKey.FETCH, version)
    topic_cls, partition_cls = nested(schema, "FetchTopic"), nested(schema, "FetchPartition")
    each = tuple(entity(partition_cls, partition=p) for p in range(partitions))
    topics = tuple(entity(topic_cls, topic_id=i, partitions=each) for i in ids)
    return entity(schema, max_bytes=1 << 20, session_id=0, session_epoch=-1, topics=topics)


def refuse_to_rebuild(_request: Any) -> Any:
    raise AssertionError("rebuilt: the request was decoded and re-encoded")


def fetched(answer: Any) -> dict[uuid.UUID, tuple[ErrorCode, int]]:
    return {t.topic_id: (p.error_code, int(p.high_watermark)) for t in answer.responses for p in t.partitions}


@pytest.mark.parametrize("version", [13, 15])
def test_an_allowed_fetch_by_id_is_relayed_after_one_lookup(services: Services, version: int):
    _cluster, upstream, nodes = upstream_of(**{"feed-a": FEED})
    handled = handle(services, upstream, fetch(version, FEED), nodes=nodes)
    lookup, relayed = upstream.sent
    assert lookup.api_key is ApiKey.METADATA and [t.topic_id for t in lookup.body.topics] == [FEED]
    assert relayed.payload == handled.payload, "the client's bytes went upstream unchanged"
    assert handled.client == [upstream.answered[-1][4:]], "and the answer came back unchanged"
    assert upstream.passed_on, "relayed, not decoded"
    assert fetched(handled.answer()) == {FEED: (ErrorCode.none, 100)}

    again = handle(services, upstream, fetch(version, FEED), nodes=nodes)
    assert [s.api_key for s in upstream.sent[2:]] == [ApiKey.FETCH], "a known id costs no lookup"
    assert fetched(again.answer()) == {FEED: (ErrorCode.none, 100)}


@pytest.mark.parametrize("version", [13, 14, 15, 16, 17])
def test_javas_request_for_a_new_session_goes_up_relayed_with_only_its_epoch_changed(
    services: Services, version: int, monkeypatch: pytest.MonkeyPatch
):
    """Session id 0, epoch 0 (what Java sends after every answer that made no session) at each body layout: v13-v14
    have ``replica_id`` before the session fields, v15+ do not."""
    _cluster, upstream, nodes = upstream_of(**{"feed-a": FEED})
    monkeypatch.setattr(fetch_handler, "_sessionless", refuse_to_rebuild)  # the bytes are patched, not rebuilt
    request = dataclasses.replace(fetch(version, FEED), session_epoch=0)
    handled = handle(services, upstream, request, nodes=nodes)
    relayed = upstream.sent[-1]
    assert relayed.body == dataclasses.replace(request, session_epoch=-1)
    assert len(relayed.payload) == len(handled.payload)
    assert sum(a != b for a, b in zip(relayed.payload, handled.payload, strict=True)) == 4  # the int32 0 -> -1
    assert upstream.passed_on, "relayed, not decoded"
    assert fetched(handled.answer()) == {FEED: (ErrorCode.none, 100)}


@pytest.mark.parametrize("version", [13, 16, 17])
def test_a_fetch_by_id_refuses_what_kafka_refuses_and_forwards_only_the_rest(services: Services, version: int):
    _cluster, upstream, nodes = upstream_of(**{"feed-a": FEED, "secret-b": SECRET})
    handled = handle(services, upstream, fetch(version, FEED, SECRET, GONE), nodes=nodes)
    assert fetched(handled.answer()) == {
        FEED: (ErrorCode.none, 100),
        SECRET: (ErrorCode.topic_authorization_failed, -1),
        GONE: (ErrorCode.unknown_topic_id, -1),
    }
    (sent,) = upstream.bodies(ApiKey.FETCH)
    assert [t.topic_id for t in sent.topics] == [FEED]


def test_a_zero_topic_id_is_unknown_and_never_looked_up(services: Services):
    _cluster, upstream, nodes = upstream_of(**{"feed-a": FEED})
    answer = handle(services, upstream, fetch(13, uuid.UUID(int=0), FEED), nodes=nodes).answer()
    assert fetched(answer) == {None: (ErrorCode.unknown_topic_id, -1), FEED: (ErrorCode.none, 100)}  # kio: 0 → None
    (lookup,) = upstream.bodies(ApiKey.METADATA)
    assert [t.topic_id for t in lookup.topics] == [FEED]


def test_a_refused_id_of_a_topic_deleted_since_is_unknown(services: Services):
    cluster, upstream, nodes = upstream_of(**{"feed-a": FEED, "secret-b": SECRET})
    handle(services, upstream, fetch(13, SECRET), nodes=nodes)
    assert nodes.topic_ids.name_of(SECRET) == "secret-b"
    cluster.topics = {"feed-a": FEED}  # secret-b deleted: the proxy's map does not know yet
    answer = handle(services, upstream, fetch(13, SECRET), nodes=nodes).answer()
    assert fetched(answer) == {SECRET: (ErrorCode.unknown_topic_id, -1)}
    assert upstream.bodies(ApiKey.FETCH) == [], "nothing was forwarded"


def test_a_re_created_topic_never_lends_its_name_to_the_old_id(services: Services):
    cluster, upstream, nodes = upstream_of(**{"feed-a": FEED})
    handle(services, upstream, fetch(13, FEED), nodes=nodes)
    cluster.topics = {"feed-a": OTHER}  # deleted and created again: a new id
    handle(services, upstream, fetch(13, OTHER), nodes=nodes)
    assert nodes.topic_ids.name_of(FEED) is None and nodes.topic_ids.id_of("feed-a") == OTHER


@pytest.mark.parametrize("version", [16, 17])
def test_v16_and_v17_go_upstream_as_they_came_and_an_answer_naming_no_broker_passes_unchanged(
    services: Services, version: int
):
    _cluster, upstream, nodes = upstream_of(**{"feed-a": FEED})
    handled = handle(services, upstream, fetch(version, FEED), nodes=nodes)
    [sent] = [s for s in upstream.sent if s.api_key is ApiKey.FETCH]
    assert sent.request.header.api_version == version, "at the client's version: the upstream fills KIP-951's fields"
    assert sent.payload == handled.payload, "the client's bytes themselves"
    assert handled.client == [upstream.answered[-1][4:]], "the upstream's bytes, unchanged"
    assert upstream.passed_on == [correlation_id_of(handled.client[0])], "relayed as it arrived, never decoded"
    answer = handled.answer()
    assert answer.node_endpoints == ()
    assert fetched(answer) == {FEED: (ErrorCode.none, 100)}


@pytest.mark.parametrize("version", [16, 17])
def test_node_endpoints_reach_the_client_at_the_proxys_addresses(services: Services, version: int):
    """Walked as it streams (in pieces of 7 bytes here), the answer's last bytes rewritten to the same length: the
    upstream's host never reaches the client, and every other byte is the upstream's."""
    cluster, upstream, nodes = upstream_of(**{"feed-a": FEED})
    cluster.endpoints = ((2, "kafka-2.internal", 9092), (3, "kafka-3.internal", 9093))
    handled = handle(services, upstream, fetch(version, FEED), nodes=nodes)
    assert upstream.passed_on, "relayed, not decoded"
    (client,) = handled.client
    upstream_answer = upstream.answered[-1][4:]
    assert len(client) == len(upstream_answer), "the same length: the frame's size went out first"
    assert b"internal" not in client
    answer = handled.answer()
    assert [(e.node_id, e.host, e.port, e.rack) for e in answer.node_endpoints] == [
        (2, PROXY_HOST, NODE_2_PORT, None), (3, PROXY_HOST, NODE_2_PORT + 1, None)
    ]  # fmt: skip
    assert nodes.address_of(2) == Address("kafka-2.internal", 9092), "the node learned before the client knows it"
    upstream_body = decode_response(ApiKey.FETCH, version, upstream_answer)
    assert dataclasses.replace(answer, node_endpoints=()) == dataclasses.replace(upstream_body, node_endpoints=())


def test_node_endpoints_that_cannot_fit_are_blanked_never_passed_on(services: Services):
    """A proxy host longer than the upstream's cannot fit in the answer's bytes: the field is blanked (an unknown tag
    of zeros), and the client asks Metadata, as a client without KIP-951 does."""
    cluster, upstream, nodes = upstream_of(**{"feed-a": FEED})
    cluster.endpoints = ((2, "k2", 9092),)
    handled = handle(services, upstream, fetch(16, FEED), nodes=nodes)
    (client,) = handled.client
    assert b"k2" not in client
    answer = handled.answer()
    assert answer.node_endpoints == ()
    assert fetched(answer) == {FEED: (ErrorCode.none, 100)}


def test_node_endpoints_of_a_decoded_answer_are_rewritten_too(services: Services):
    """Some topics refused: the answer is decoded, merged with the refusals and encoded — endpoints rewritten."""
    cluster, upstream, nodes = upstream_of(**{"feed-a": FEED, "secret-b": SECRET})
    cluster.endpoints = ((2, "k2", 9092),)
    handled = handle(services, upstream, fetch(17, FEED, SECRET), nodes=nodes)
    assert b"k2" not in handled.client[0]
    answer = handled.answer()
    assert [(e.node_id, e.host, e.port) for e in answer.node_endpoints] == [(2, PROXY_HOST, NODE_2_PORT)]
    assert fetched(answer)[SECRET] == (ErrorCode.topic_authorization_failed, -1)


@pytest.mark.parametrize("quota", [1e9, 1.0])
def test_under_a_consumer_quota_the_answer_is_walked_too(services: Services, quota: float):
    """The metering writer (``_Charge.relay``) stands for the client: the walk copies through it. Within the quota the
    client gets the rewritten endpoints; over it, Kafka's empty throttled answer — never the upstream's host."""
    cluster, upstream, nodes = upstream_of(**{"feed-a": FEED})
    cluster.endpoints = ((2, "kafka-2.internal", 9092),)
    handled = handle(services, upstream, fetch(16, FEED), nodes=nodes, meter=quota_meter(quota)[0])
    assert upstream.passed_on, "relayed through the metering writer"
    assert b"internal" not in handled.client[0]
    answer = handled.answer()
    if quota > 1:
        assert [(e.node_id, e.host, e.port) for e in answer.node_endpoints] == [(2, PROXY_HOST, NODE_2_PORT)]
        assert fetched(answer) == {FEED: (ErrorCode.none, 100)}
    else:
        assert isinstance(handled.reply, Throttled)
        assert answer.responses == () and answer.node_endpoints == ()


def test_a_malformed_v16_answer_closes_the_clients_connection(services: Services):
    """A records length that overruns the answer: the walk refuses it, the connection closes (as for a bad frame)
    and the answer's end — where an upstream address would be — is never passed on."""
    cluster, upstream, nodes = upstream_of(**{"feed-a": FEED})
    cluster.endpoints = ((2, "kafka-2.internal", 9092),)
    # size, correlation id, header tags, throttle/error/session, 1 topic, its id, 1 partition, its head, no aborted
    # transactions, replica: then the records' length, made 256 MiB in the same 4 bytes
    at = 4 + 4 + 1 + 10 + 1 + 16 + 1 + 30 + 1 + 4
    upstream.corrupt = lambda framed: framed[:at] + bytes.fromhex("ffffff7f") + framed[at + 4 :]
    with pytest.raises(OutboxClosed, match="malformed Fetch v16 response: a field of 268435454 bytes overruns"):
        handle(services, upstream, fetch(16, FEED), nodes=nodes)  # the connection closes on it
    assert upstream.passed_on, "it was being passed on"
    with pytest.raises(UpstreamUnavailable):  # and that upstream connection is done, as a real one after a bad frame
        handle(services, upstream, fetch(16, FEED), nodes=nodes)


def test_a_v17_consumer_fetch_naming_a_replica_directory_goes_up_as_it_came(services: Services):
    """v17's ``ReplicaDirectoryId`` (KIP-853) is read only for a follower's fetch, and a follower is refused (below):
    a consumer's fetch naming one gives the upstream nothing to act on."""
    _cluster, upstream, nodes = upstream_of(**{"feed-a": FEED})
    request = fetch(17, FEED)
    [topic] = request.topics
    [partition] = topic.partitions
    partition = dataclasses.replace(partition, replica_directory_id=uuid.uuid4())
    request = dataclasses.replace(request, topics=(dataclasses.replace(topic, partitions=(partition,)),))
    handled = handle(services, upstream, request, nodes=nodes)
    [sent] = [s for s in upstream.sent if s.api_key is ApiKey.FETCH]
    assert sent.request.header.api_version == 17 and sent.payload == handled.payload
    assert fetched(handled.answer()) == {FEED: (ErrorCode.none, 100)}


@pytest.mark.parametrize("version", [13, 15, 17])
def test_a_followers_fetch_by_id_never_reaches_the_upstream(services: Services, version: int):
    """v15+ name the replica in the tagged ``replica_state``, no longer in ``replica_id``."""
    _cluster, upstream, nodes = upstream_of(**{"feed-a": FEED})
    request = fetch(version, FEED)
    if version >= 15:
        state_cls = nested(type(request), "ReplicaState")
        request = dataclasses.replace(request, replica_state=entity(state_cls, replica_id=2, replica_epoch=1))
    else:
        request = dataclasses.replace(request, replica_id=2)
    answer = handle(services, upstream, request, nodes=nodes).answer()
    assert fetched(answer) == {FEED: (ErrorCode.topic_authorization_failed, -1)}
    assert upstream.sent == []


# ------------------------------------------------------------------------------------------------ DeleteTopics v6


def delete(*topics: tuple[str | None, uuid.UUID | None]) -> Any:
    return delete_v6.DeleteTopicsRequest(
        topics=tuple(delete_v6.DeleteTopicState(name=TopicName(n) if n else None, topic_id=i) for n, i in topics),
        timeout=i32Timedelta.parse(timedelta(seconds=30)),
    )


def test_delete_topics_v6_by_id_as_kafka(services: Services):
    _cluster, upstream, nodes = upstream_of(**{"feed-a": FEED, "secret-b": SECRET, "seen-c": OTHER})
    zero = uuid.UUID(int=0)
    request = delete(
        (None, FEED), (None, SECRET), (None, OTHER), (None, GONE), (None, zero), ("feed-x", FEED), ("feed-a", zero)
    )
    answer = handle(services, upstream, request, nodes=nodes).answer()
    got = sorted(((r.name, r.topic_id, r.error_code, r.error_message) for r in answer.responses), key=repr)
    assert got == sorted(
        [
            ("feed-a", FEED, ErrorCode.none, None),  # the upstream's, by id
            ("feed-a", FEED, ErrorCode.none, None),  # the upstream's, by name
            (None, SECRET, ErrorCode.topic_authorization_failed, "Topic authorization failed."),
            ("seen-c", OTHER, ErrorCode.topic_authorization_failed, "Topic authorization failed."),
            (None, GONE, ErrorCode.unknown_topic_id, "This server does not host this topic ID."),
            (None, None, ErrorCode.invalid_request, "Neither topic name nor id were specified."),  # zero id: None
            ("feed-x", FEED, ErrorCode.invalid_request, "You may not specify both topic name and topic id."),
        ],
        key=repr,
    )
    (sent,) = upstream.bodies(ApiKey.DELETE_TOPICS)
    assert [(t.name, t.topic_id) for t in sent.topics] == [(None, FEED), ("feed-a", None)]


def test_delete_topics_v6_duplicates_are_invalid(services: Services):
    _cluster, upstream, nodes = upstream_of(**{"feed-a": FEED})
    answer = handle(services, upstream, delete((None, FEED), (None, FEED)), nodes=nodes).answer()
    assert [(r.name, r.topic_id, r.error_message) for r in answer.responses] == [(None, FEED, "Duplicate topic id.")]
    assert upstream.bodies(ApiKey.DELETE_TOPICS) == []


# ---------------------------------------------------------------------------------------- DescribeTopicPartitions


def describe(*names: str, cursor: tuple[str, int] | None = None, limit: int = 2000) -> Any:
    return dtp_v0.DescribeTopicPartitionsRequest(
        topics=tuple(dtp_v0.TopicRequest(name=TopicName(n)) for n in names),
        response_partition_limit=i32(limit),
        cursor=None
        if cursor is None
        else dtp_v0.Cursor(topic_name=TopicName(cursor[0]), partition_index=i32(cursor[1])),
    )


def described(answer: Any) -> list[tuple[str | None, ErrorCode]]:
    return [(t.name, t.error_code) for t in answer.topics]


def test_describe_topic_partitions_of_every_topic_asks_only_for_the_describable_ones(services: Services):
    _cluster, upstream, nodes = upstream_of(**{"feed-a": FEED, "secret-b": SECRET, "seen-c": OTHER})
    answer = handle(services, upstream, describe(cursor=("feed-b", 0)), nodes=nodes).answer()
    assert described(answer) == [("seen-c", ErrorCode.none)], "after the cursor, describable, hidden ones left out"
    (sent,) = upstream.bodies(ApiKey.DESCRIBE_TOPIC_PARTITIONS)
    assert [t.name for t in sent.topics] == ["seen-c"] and sent.cursor is None
    assert answer.topics[0].topic_authorized_operations > 0


def test_describe_topic_partitions_refuses_named_topics_and_never_sends_an_empty_list(services: Services):
    _cluster, upstream, nodes = upstream_of(**{"feed-a": FEED, "secret-b": SECRET})
    answer = handle(services, upstream, describe("secret-b", "secret-z"), nodes=nodes).answer()
    assert described(answer) == [
        ("secret-b", ErrorCode.topic_authorization_failed),
        ("secret-z", ErrorCode.topic_authorization_failed),
    ]
    assert upstream.bodies(ApiKey.DESCRIBE_TOPIC_PARTITIONS) == []
    answer = handle(services, upstream, describe("feed-a", "secret-b", cursor=("feed-a", 1)), nodes=nodes).answer()
    assert described(answer) == [("feed-a", ErrorCode.none), ("secret-b", ErrorCode.topic_authorization_failed)]
    (sent,) = upstream.bodies(ApiKey.DESCRIBE_TOPIC_PARTITIONS)
    assert [t.name for t in sent.topics] == ["feed-a"] and sent.cursor.partition_index == 1


@pytest.mark.parametrize("cursor", [("feed-z", 0), ("feed-a", -1)], ids=["cursor-not-listed", "negative-partition"])
def test_describe_topic_partitions_invalid_cursors_as_kafka(services: Services, cursor: tuple[str, int]):
    _cluster, upstream, nodes = upstream_of(**{"feed-a": FEED})
    answer = handle(services, upstream, describe("feed-a", cursor=cursor), nodes=nodes).answer()
    assert described(answer) == [("feed-a", ErrorCode.invalid_request)]
    assert upstream.sent == []
