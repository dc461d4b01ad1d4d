"""``proxy.handlers.groups`` against an in-memory upstream: the group membership APIs go up as the client sent them
with READ on the group and are refused GROUP_AUTHORIZATION_FAILED without it (nothing goes upstream); OffsetCommit and
OffsetFetch refuse a denied topic per partition and forward only the allowed ones, and OffsetFetch for all of a
group's topics leaves out those the caller may not describe; an upstream that fails ends the request with
``UpstreamUnavailable``.

The KIP-848 protocol's ConsumerGroupHeartbeat goes up as sent with READ on the group and DESCRIBE on every subscribed
name; a denied group is GROUP_AUTHORIZATION_FAILED and a subscribed name the caller may not describe
TOPIC_AUTHORIZATION_FAILED (Kafka 4.0's check), nothing upstream either way. OffsetCommit v9 and OffsetFetch v9 (a
KIP-848 member's member id and epoch) are authorized by topic as before, the member fields kept."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kio.schema.consumer_group_heartbeat.v0 import request as heartbeat_request
from kio.schema.consumer_group_heartbeat.v0 import response as heartbeat_response
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v9.request import JoinGroupRequest
from kio.schema.leave_group.v5.request import LeaveGroupRequest
from kio.schema.offset_commit.v8 import request as commit_request
from kio.schema.offset_commit.v8 import response as commit_response
from kio.schema.offset_commit.v9 import request as commit_request_v9
from kio.schema.offset_commit.v9 import response as commit_response_v9
from kio.schema.offset_fetch.v7 import request as fetch_request
from kio.schema.offset_fetch.v7 import response as fetch_response
from kio.schema.offset_fetch.v9 import request as fetch_request_v9
from kio.schema.offset_fetch.v9 import response as fetch_response_v9
from kio.schema.sync_group.v5.request import SyncGroupRequest
from kio.static.primitive import i32

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.bootstrap import Services
from kafkaguard.model import AclOperation, ResourceType
from kafkaguard.proxy.upstream import UpstreamUnavailable
from tests.proxy.memory_upstream import (
    MemoryUpstream,
    allow,
    answer_of,
    assert_relayed,
    entity,
    handle,
    unavailable,
)

FEED_ID = uuid.UUID(int=1)
MEMBERSHIP = [JoinGroupRequest, SyncGroupRequest, HeartbeatRequest, LeaveGroupRequest]


@pytest.fixture(autouse=True)
def consumer(services: Services) -> None:
    allow(services, "User:alice", ResourceType.GROUP, "feed-", AclOperation.READ)
    allow(services, "User:alice", ResourceType.TOPIC, "feed-", AclOperation.READ)


@pytest.mark.parametrize("cls", MEMBERSHIP, ids=lambda cls: cls.__name__)
def test_membership_in_an_allowed_group_is_relayed(services: Services, cls: type[Any]):
    upstream = MemoryUpstream()
    assert_relayed(handle(services, upstream, entity(cls, group_id="feed-g")), upstream)


@pytest.mark.parametrize("cls", MEMBERSHIP, ids=lambda cls: cls.__name__)
def test_membership_in_a_denied_group_is_refused_and_nothing_goes_upstream(services: Services, cls: type[Any]):
    upstream = MemoryUpstream()
    handled = handle(services, upstream, entity(cls, group_id="secret-g"))
    assert upstream.sent == []
    assert handled.answer().error_code == ErrorCode.group_authorization_failed


def commit(group_id: str, *topics: str) -> Any:
    named = tuple(
        entity(commit_request.OffsetCommitRequestTopic, name=name,
               partitions=(entity(commit_request.OffsetCommitRequestPartition, partition_index=0),))
        for name in topics
    )  # fmt: skip
    return entity(commit_request.OffsetCommitRequest, group_id=group_id, topics=named)


def committed(api_key: ApiKey, version: int, request: Any) -> Any:
    topics = tuple(
        entity(commit_response.OffsetCommitResponseTopic, name=topic.name, partitions=tuple(
            entity(commit_response.OffsetCommitResponsePartition, partition_index=p.partition_index)
            for p in topic.partitions))
        for topic in request.topics
    )  # fmt: skip
    return answer_of(api_key, version, topics=topics)


def commit_errors(answer: Any) -> dict[str, ErrorCode]:
    return {t.name: p.error_code for t in answer.topics for p in t.partitions}


def test_offset_commit_forwards_only_the_allowed_topics(services: Services):
    upstream = MemoryUpstream(committed)
    handled = handle(services, upstream, commit("feed-g", "feed-a", "secret-b"))
    assert [t.name for t in upstream.bodies(ApiKey.OFFSET_COMMIT)[0].topics] == ["feed-a"]
    assert commit_errors(handled.answer()) == {
        "feed-a": ErrorCode.none,
        "secret-b": ErrorCode.topic_authorization_failed,
    }


def test_offset_commit_to_an_allowed_group_and_topics_is_relayed(services: Services):
    upstream = MemoryUpstream(committed)
    assert_relayed(handle(services, upstream, commit("feed-g", "feed-a")), upstream)


def test_offset_commit_to_a_denied_group_refuses_every_partition(services: Services):
    upstream = MemoryUpstream(committed)
    handled = handle(services, upstream, commit("secret-g", "feed-a"))
    assert upstream.sent == []
    assert commit_errors(handled.answer()) == {"feed-a": ErrorCode.group_authorization_failed}


def offset_fetch(group_id: str, topics: tuple[str, ...] | None) -> Any:
    named = (
        None
        if topics is None
        else tuple(entity(fetch_request.OffsetFetchRequestTopic, name=name, partition_indexes=(0,)) for name in topics)
    )
    return entity(fetch_request.OffsetFetchRequest, group_id=group_id, topics=named)


def offsets_of(*names: str) -> Any:
    def answer(api_key: ApiKey, version: int, request: Any) -> Any:
        asked = names if request.topics is None else [t.name for t in request.topics]
        topics = tuple(
            entity(fetch_response.OffsetFetchResponseTopic, name=name, partitions=(
                entity(fetch_response.OffsetFetchResponsePartition, partition_index=0, committed_offset=9),))
            for name in asked
        )  # fmt: skip
        return answer_of(api_key, version, topics=topics)

    return answer


def fetched(answer: Any) -> dict[str, tuple[ErrorCode, int]]:
    return {t.name: (p.error_code, int(p.committed_offset)) for t in answer.topics for p in t.partitions}


def test_offset_fetch_forwards_only_the_describable_topics(services: Services):
    allow(services, "User:alice", ResourceType.GROUP, "feed-", AclOperation.DESCRIBE)
    allow(services, "User:alice", ResourceType.TOPIC, "feed-", AclOperation.DESCRIBE)
    upstream = MemoryUpstream(offsets_of())
    handled = handle(services, upstream, offset_fetch("feed-g", ("feed-a", "secret-b")))
    assert [t.name for t in upstream.bodies(ApiKey.OFFSET_FETCH)[0].topics] == ["feed-a"]
    assert fetched(handled.answer()) == {
        "feed-a": (ErrorCode.none, 9),
        "secret-b": (ErrorCode.topic_authorization_failed, -1),
    }


def test_offset_fetch_of_all_topics_leaves_out_those_not_describable(services: Services):
    allow(services, "User:alice", ResourceType.GROUP, "feed-", AclOperation.DESCRIBE)
    allow(services, "User:alice", ResourceType.TOPIC, "feed-", AclOperation.DESCRIBE)
    upstream = MemoryUpstream(offsets_of("feed-a", "secret-b"))
    handled = handle(services, upstream, offset_fetch("feed-g", None))
    assert [sent.payload for sent in upstream.sent] == [handled.payload]
    assert fetched(handled.answer()) == {"feed-a": (ErrorCode.none, 9)}


def test_offset_fetch_of_a_denied_group_never_goes_upstream(services: Services):
    upstream = MemoryUpstream(offsets_of("feed-a"))
    handled = handle(services, upstream, offset_fetch("secret-g", None))
    assert upstream.sent == []
    assert handled.answer().error_code == ErrorCode.group_authorization_failed


def test_an_upstream_failure_ends_the_request(services: Services):
    with pytest.raises(UpstreamUnavailable):
        handle(services, MemoryUpstream(unavailable), entity(HeartbeatRequest, group_id="feed-g"))
    with pytest.raises(UpstreamUnavailable):
        handle(services, MemoryUpstream(unavailable), commit("feed-g", "feed-a", "secret-b"))


# --------------------------------------------------------------------------------------------- heartbeat


def heartbeat(group_id: str, subscribed: tuple[str, ...] | None, epoch: int = 0) -> Any:
    return entity(
        heartbeat_request.ConsumerGroupHeartbeatRequest, group_id=group_id, member_id="m-1",
        member_epoch=i32(epoch), subscribed_topic_names=subscribed, topic_partitions=None if epoch else (),
    )  # fmt: skip


def assigned(api_key: ApiKey, version: int, _request: Any) -> Any:
    partitions = entity(heartbeat_response.TopicPartitions, topic_id=FEED_ID, partitions=(i32(0), i32(1)))
    return answer_of(
        api_key, version, member_id="m-1", member_epoch=i32(3),
        assignment=entity(heartbeat_response.Assignment, topic_partitions=(partitions,)),
    )  # fmt: skip


def test_heartbeat_in_a_readable_group_subscribing_describable_topics_is_relayed(services: Services):
    upstream = MemoryUpstream(assigned)
    handled = handle(services, upstream, heartbeat("feed-g", ("feed-a", "feed-b")))
    assert_relayed(handled, upstream)
    assert handled.answer().assignment.topic_partitions[0].topic_id == FEED_ID


def test_heartbeat_without_a_subscription_is_relayed(services: Services):
    """A null subscription is "unchanged since the last heartbeat": nothing new to check."""
    upstream = MemoryUpstream(assigned)
    assert_relayed(handle(services, upstream, heartbeat("feed-g", None, epoch=3)), upstream)


def test_heartbeat_in_a_denied_group_is_refused_and_nothing_goes_upstream(services: Services):
    upstream = MemoryUpstream(assigned)
    answer = handle(services, upstream, heartbeat("secret-g", ("feed-a",))).answer()
    assert upstream.sent == []
    assert answer.error_code == ErrorCode.group_authorization_failed
    assert (answer.member_id, answer.member_epoch, answer.assignment) == (None, 0, None)


def test_heartbeat_subscribing_a_topic_not_describable_is_refused_whole(services: Services):
    upstream = MemoryUpstream(assigned)
    answer = handle(services, upstream, heartbeat("feed-g", ("feed-a", "secret-b"))).answer()
    assert upstream.sent == []
    assert answer.error_code == ErrorCode.topic_authorization_failed
    assert (answer.member_id, answer.assignment) == (None, None)


def test_the_group_is_checked_before_the_subscription(services: Services):
    answer = handle(services, MemoryUpstream(assigned), heartbeat("secret-g", ("secret-b",))).answer()
    assert answer.error_code == ErrorCode.group_authorization_failed


def test_heartbeat_upstream_failure_ends_the_request(services: Services):
    with pytest.raises(UpstreamUnavailable):
        handle(services, MemoryUpstream(unavailable), heartbeat("feed-g", ("feed-a",)))


# ------------------------------------------------------------------------------------- offsets, v9 (member epoch)


def commit_v9(group_id: str, *topics: str) -> Any:
    named = tuple(
        entity(commit_request_v9.OffsetCommitRequestTopic, name=name,
               partitions=(entity(commit_request_v9.OffsetCommitRequestPartition, partition_index=i32(0)),))
        for name in topics
    )  # fmt: skip
    return entity(commit_request_v9.OffsetCommitRequest, group_id=group_id, member_id="m-1",
                  generation_id_or_member_epoch=i32(7), topics=named)  # fmt: skip


def committed_v9(api_key: ApiKey, version: int, request: Any) -> Any:
    topics = tuple(
        entity(commit_response_v9.OffsetCommitResponseTopic, name=topic.name, partitions=tuple(
            entity(commit_response_v9.OffsetCommitResponsePartition, partition_index=p.partition_index)
            for p in topic.partitions))
        for topic in request.topics
    )  # fmt: skip
    return answer_of(api_key, version, topics=topics)


def test_offset_commit_v9_keeps_the_member_fields_when_it_drops_a_denied_topic(services: Services):
    upstream = MemoryUpstream(committed_v9)
    answer = handle(services, upstream, commit_v9("feed-g", "feed-a", "secret-b")).answer()
    sent = upstream.bodies(ApiKey.OFFSET_COMMIT)[0]
    assert (sent.member_id, sent.generation_id_or_member_epoch) == ("m-1", 7)
    assert [t.name for t in sent.topics] == ["feed-a"]
    assert {t.name: t.partitions[0].error_code for t in answer.topics} == {
        "feed-a": ErrorCode.none,
        "secret-b": ErrorCode.topic_authorization_failed,
    }


def test_offset_commit_v9_allowed_is_relayed(services: Services):
    upstream = MemoryUpstream(committed_v9)
    assert_relayed(handle(services, upstream, commit_v9("feed-g", "feed-a")), upstream)


def fetch_v9(group_id: str, topics: tuple[str, ...] | None) -> Any:
    named = (
        None
        if topics is None
        else tuple(entity(fetch_request_v9.OffsetFetchRequestTopics, name=name, partition_indexes=(i32(0),))
                   for name in topics)
    )  # fmt: skip
    group = entity(fetch_request_v9.OffsetFetchRequestGroup, group_id=group_id, member_id="m-1",
                   member_epoch=i32(7), topics=named)  # fmt: skip
    return entity(fetch_request_v9.OffsetFetchRequest, groups=(group,), require_stable=True)


def fetched_groups(*all_topics: str) -> Any:
    def answer(api_key: ApiKey, version: int, request: Any) -> Any:
        groups = []
        for group in request.groups:
            names = all_topics if group.topics is None else [t.name for t in group.topics]
            topics = tuple(
                entity(fetch_response_v9.OffsetFetchResponseTopics, name=name, partitions=(
                    entity(fetch_response_v9.OffsetFetchResponsePartitions, partition_index=i32(0),
                           committed_offset=9),))
                for name in names
            )  # fmt: skip
            groups.append(entity(fetch_response_v9.OffsetFetchResponseGroup, group_id=group.group_id, topics=topics))
        return answer_of(api_key, version, groups=tuple(groups))

    return answer


def test_offset_fetch_v9_keeps_the_member_fields_when_it_drops_a_denied_topic(services: Services):
    allow(services, "User:alice", ResourceType.GROUP, "feed-", AclOperation.DESCRIBE)
    allow(services, "User:alice", ResourceType.TOPIC, "feed-", AclOperation.DESCRIBE)
    upstream = MemoryUpstream(fetched_groups())
    answer = handle(services, upstream, fetch_v9("feed-g", ("feed-a", "secret-b"))).answer()
    sent = upstream.bodies(ApiKey.OFFSET_FETCH)[0]
    (group,) = sent.groups
    assert (group.member_id, group.member_epoch, sent.require_stable) == ("m-1", 7, True)
    assert [t.name for t in group.topics] == ["feed-a"]
    (answered,) = answer.groups
    assert {t.name: (t.partitions[0].error_code, t.partitions[0].committed_offset) for t in answered.topics} == {
        "feed-a": (ErrorCode.none, 9),
        "secret-b": (ErrorCode.topic_authorization_failed, -1),
    }


def test_offset_fetch_v9_of_all_topics_leaves_out_those_not_describable(services: Services):
    allow(services, "User:alice", ResourceType.GROUP, "feed-", AclOperation.DESCRIBE)
    allow(services, "User:alice", ResourceType.TOPIC, "feed-", AclOperation.DESCRIBE)
    upstream = MemoryUpstream(fetched_groups("feed-a", "secret-b"))
    answer = handle(services, upstream, fetch_v9("feed-g", None)).answer()
    assert [t.name for t in answer.groups[0].topics] == ["feed-a"]


def test_offset_fetch_v9_of_a_denied_group_never_goes_upstream(services: Services):
    upstream = MemoryUpstream(fetched_groups("feed-a"))
    answer = handle(services, upstream, fetch_v9("secret-g", None)).answer()
    assert upstream.sent == []
    assert answer.groups[0].error_code == ErrorCode.group_authorization_failed
