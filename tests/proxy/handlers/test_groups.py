"""``proxy.handlers.groups`` against an in-memory upstream: the group membership APIs go up as the client sent them
with READ on the group and are refused GROUP_AUTHORIZATION_FAILED without it (nothing goes upstream); OffsetCommit and
OffsetFetch refuse a denied topic per partition and forward only the allowed ones, and OffsetFetch for all of a
group's topics leaves out those the caller may not describe; an upstream that fails ends the request with
``UpstreamUnavailable``."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v9.request import JoinGroupRequest
from kio.schema.leave_group.v5.request import LeaveGroupRequest
from kio.schema.offset_commit.v8 import request as commit_request
from kio.schema.offset_commit.v8 import response as commit_response
from kio.schema.offset_fetch.v7 import request as fetch_request
from kio.schema.offset_fetch.v7 import response as fetch_response
from kio.schema.sync_group.v5.request import SyncGroupRequest

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
