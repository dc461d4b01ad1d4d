"""The KIP-848 consumer group protocol through ``proxy.handlers`` against an in-memory upstream.

ConsumerGroupHeartbeat goes up as the client sent it with READ on the group and DESCRIBE on every subscribed name; a
denied group is GROUP_AUTHORIZATION_FAILED and a subscribed name the caller may not describe TOPIC_AUTHORIZATION_FAILED
(Kafka 4.0's check), nothing upstream either way. ConsumerGroupDescribe refuses the groups the caller may not describe
(before the others), forwards the rest, replaces a group whose assignments name a topic the caller may not describe
with TOPIC_AUTHORIZATION_FAILED, and fills authorized operations from kafkaguard's ACLs. OffsetCommit v9 and
OffsetFetch v9 (a KIP-848 member's member id and epoch) are authorized by topic as before, the member fields kept.
"""

from __future__ import annotations

import dataclasses
import struct
import typing
import uuid
from typing import Any

import pytest
from kio.schema.consumer_group_describe.v0 import request as describe_request
from kio.schema.consumer_group_describe.v0 import response as describe_response
from kio.schema.consumer_group_heartbeat.v0 import request as heartbeat_request
from kio.schema.consumer_group_heartbeat.v0 import response as heartbeat_response
from kio.schema.errors import ErrorCode
from kio.schema.offset_commit.v9 import request as commit_request
from kio.schema.offset_commit.v9 import response as commit_response
from kio.schema.offset_fetch.v9 import request as fetch_request
from kio.schema.offset_fetch.v9 import response as fetch_response
from kio.static.primitive import i32

from kafkaguard.apis.operations import OPERATIONS_NOT_REQUESTED
from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.bootstrap import Services
from kafkaguard.model import AclOperation, ResourceType
from kafkaguard.protocol.codec import response_schema
from kafkaguard.proxy.upstream import UpstreamUnavailable
from kafkaguard.proxy.wire import UpstreamProtocolError, decode_response
from tests.proxy.memory_upstream import MemoryUpstream, allow, answer_of, assert_relayed, entity, handle, unavailable
from tests.server.hostile import hostile_bodies

FEED_ID = uuid.UUID(int=1)
SECRET_ID = uuid.UUID(int=2)


@pytest.fixture(autouse=True)
def member(services: Services) -> None:
    allow(services, "User:alice", ResourceType.GROUP, "feed-", AclOperation.READ)
    allow(services, "User:alice", ResourceType.TOPIC, "feed-", AclOperation.READ)


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


# ---------------------------------------------------------------------------------------------- describe


def assignment(*topics: tuple[uuid.UUID, str]) -> Any:
    return entity(describe_response.Assignment, topic_partitions=tuple(
        entity(describe_response.TopicPartitions, topic_id=topic_id, topic_name=name, partitions=(i32(0),))
        for topic_id, name in topics
    ))  # fmt: skip


def described_with(topics: dict[str, tuple[str, ...]]) -> Any:
    """An upstream describing each asked group with one member assigned ``topics[group]`` (target: the same)."""

    def answer(api_key: ApiKey, version: int, request: Any) -> Any:
        groups = []
        for group_id in request.group_ids:
            named = [(FEED_ID if name.startswith("feed-") else SECRET_ID, name) for name in topics.get(group_id, ())]
            one = entity(
                describe_response.Member, member_id="m-1", client_id="c", client_host="/10.0.0.9",
                assignment=assignment(*named), target_assignment=assignment(*named),
            )  # fmt: skip
            groups.append(entity(describe_response.DescribedGroup, group_id=group_id, group_state="Stable",
                                 group_epoch=i32(4), assignor_name="uniform", members=(one,),
                                 authorized_operations=i32(OPERATIONS_NOT_REQUESTED)))  # fmt: skip
        return answer_of(api_key, version, groups=tuple(groups))

    return answer


def describe(*group_ids: str, operations: bool = False) -> Any:
    return entity(describe_request.ConsumerGroupDescribeRequest, group_ids=group_ids,
                  include_authorized_operations=operations)  # fmt: skip


@pytest.fixture
def describer(services: Services) -> None:
    allow(services, "User:alice", ResourceType.GROUP, "feed-", AclOperation.DESCRIBE)
    allow(services, "User:alice", ResourceType.TOPIC, "feed-", AclOperation.DESCRIBE)


def errors(answer: Any) -> list[tuple[str, ErrorCode, int]]:
    return [(g.group_id, g.error_code, len(g.members)) for g in answer.groups]


@pytest.mark.usefixtures("describer")
def test_describe_refuses_denied_groups_first_and_forwards_only_the_others(services: Services):
    upstream = MemoryUpstream(described_with({"feed-g": ("feed-a",)}))
    answer = handle(services, upstream, describe("feed-g", "secret-g")).answer()
    assert upstream.bodies(ApiKey.CONSUMER_GROUP_DESCRIBE)[0].group_ids == ("feed-g",)
    assert errors(answer) == [("secret-g", ErrorCode.group_authorization_failed, 0), ("feed-g", ErrorCode.none, 1)]
    refused = answer.groups[0]
    assert (refused.group_state, refused.group_epoch, refused.authorized_operations) == ("", 0, -(2**31))


@pytest.mark.usefixtures("describer")
def test_describe_of_only_denied_groups_never_goes_upstream(services: Services):
    upstream = MemoryUpstream(described_with({}))
    answer = handle(services, upstream, describe("secret-g", "secret-h")).answer()
    assert upstream.sent == []
    assert [g.error_code for g in answer.groups] == [ErrorCode.group_authorization_failed] * 2


@pytest.mark.usefixtures("describer")
def test_describe_hides_a_group_assigned_a_topic_not_describable(services: Services):
    upstream = MemoryUpstream(described_with({"feed-g": ("feed-a",), "feed-h": ("feed-a", "secret-b")}))
    answer = handle(services, upstream, describe("feed-g", "feed-h")).answer()
    assert errors(answer) == [("feed-g", ErrorCode.none, 1), ("feed-h", ErrorCode.topic_authorization_failed, 0)]
    assert "secret-b" not in repr(answer)


@pytest.mark.usefixtures("describer")
def test_describe_authorized_operations_are_the_callers(services: Services):
    upstream = MemoryUpstream(described_with({"feed-g": ("feed-a",)}))
    answer = handle(services, upstream, describe("feed-g", operations=True)).answer()
    read, describe_ = AclOperation.READ.code, AclOperation.DESCRIBE.code
    assert answer.groups[0].authorized_operations == (1 << read) | (1 << describe_)


@pytest.mark.usefixtures("describer")
def test_describe_without_operations_keeps_the_upstreams_field(services: Services):
    upstream = MemoryUpstream(described_with({"feed-g": ("feed-a",)}))
    answer = handle(services, upstream, describe("feed-g")).answer()
    assert answer.groups[0].authorized_operations == OPERATIONS_NOT_REQUESTED
    assert answer.groups[0].members[0].assignment.topic_partitions[0].topic_name == "feed-a"


# ------------------------------------------------------------------------------------- offsets, v9 (member epoch)


def commit_v9(group_id: str, *topics: str) -> Any:
    named = tuple(
        entity(commit_request.OffsetCommitRequestTopic, name=name,
               partitions=(entity(commit_request.OffsetCommitRequestPartition, partition_index=i32(0)),))
        for name in topics
    )  # fmt: skip
    return entity(commit_request.OffsetCommitRequest, group_id=group_id, member_id="m-1",
                  generation_id_or_member_epoch=i32(7), topics=named)  # fmt: skip


def committed(api_key: ApiKey, version: int, request: Any) -> Any:
    topics = tuple(
        entity(commit_response.OffsetCommitResponseTopic, name=topic.name, partitions=tuple(
            entity(commit_response.OffsetCommitResponsePartition, partition_index=p.partition_index)
            for p in topic.partitions))
        for topic in request.topics
    )  # fmt: skip
    return answer_of(api_key, version, topics=topics)


def test_offset_commit_v9_keeps_the_member_fields_when_it_drops_a_denied_topic(services: Services):
    upstream = MemoryUpstream(committed)
    answer = handle(services, upstream, commit_v9("feed-g", "feed-a", "secret-b")).answer()
    sent = upstream.bodies(ApiKey.OFFSET_COMMIT)[0]
    assert (sent.member_id, sent.generation_id_or_member_epoch) == ("m-1", 7)
    assert [t.name for t in sent.topics] == ["feed-a"]
    assert {t.name: t.partitions[0].error_code for t in answer.topics} == {
        "feed-a": ErrorCode.none,
        "secret-b": ErrorCode.topic_authorization_failed,
    }


def test_offset_commit_v9_allowed_is_relayed(services: Services):
    upstream = MemoryUpstream(committed)
    assert_relayed(handle(services, upstream, commit_v9("feed-g", "feed-a")), upstream)


def fetch_v9(group_id: str, topics: tuple[str, ...] | None) -> Any:
    named = (
        None
        if topics is None
        else tuple(entity(fetch_request.OffsetFetchRequestTopics, name=name, partition_indexes=(i32(0),))
                   for name in topics)
    )  # fmt: skip
    group = entity(fetch_request.OffsetFetchRequestGroup, group_id=group_id, member_id="m-1",
                   member_epoch=i32(7), topics=named)  # fmt: skip
    return entity(fetch_request.OffsetFetchRequest, groups=(group,), require_stable=True)


def fetched_groups(*all_topics: str) -> Any:
    def answer(api_key: ApiKey, version: int, request: Any) -> Any:
        groups = []
        for group in request.groups:
            names = all_topics if group.topics is None else [t.name for t in group.topics]
            topics = tuple(
                entity(fetch_response.OffsetFetchResponseTopics, name=name, partitions=(
                    entity(fetch_response.OffsetFetchResponsePartitions, partition_index=i32(0),
                           committed_offset=9),))
                for name in names
            )  # fmt: skip
            groups.append(entity(fetch_response.OffsetFetchResponseGroup, group_id=group.group_id, topics=topics))
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


# --------------------------------------------------------------------------------------------- addresses


def address_fields(cls: type[Any], path: str = "") -> set[str]:
    """Every field of a response entity, nested ones included, whose name says it holds a host or a port."""
    found = set()
    for each in dataclasses.fields(cls):
        name = f"{path}{each.name}"
        if any(word in each.name for word in ("host", "port", "endpoint")):
            found.add(name)
        for arg in typing.get_args(each.type) or (each.type,):
            for inner in typing.get_args(arg) or (arg,):
                if dataclasses.is_dataclass(inner) and isinstance(inner, type):
                    found |= address_fields(inner, f"{name}.")
    return found


def test_the_answers_carry_no_broker_address():
    """Why the proxy relays them without rewriting: the heartbeat names the member and its assignment by topic id;
    the description's only address is each member's ``client_host``, the address the upstream saw the member
    connect from (the proxy's own outbound address), never a broker's."""
    assert address_fields(heartbeat_response.ConsumerGroupHeartbeatResponse) == set()
    assert address_fields(describe_response.ConsumerGroupDescribeResponse) == {"groups.members.client_host"}


# ------------------------------------------------------------------------------- hostile upstream answers

DECODED_ANSWERS = [
    (ApiKey.CONSUMER_GROUP_HEARTBEAT, 0),
    (ApiKey.CONSUMER_GROUP_DESCRIBE, 0),
    (ApiKey.OFFSET_COMMIT, 9),
    (ApiKey.OFFSET_FETCH, 9),
]


@pytest.mark.parametrize(("api_key", "version"), DECODED_ANSWERS, ids=lambda v: str(v))
def test_a_hostile_upstream_answer_is_a_protocol_error_not_an_allocation(api_key: ApiKey, version: int):
    """The answers these handlers decode (to merge refusals, check assignments, fill operations) go through the same
    length check as requests: a hostile first length is refused before kio reserves anything."""
    bodies = hostile_bodies(response_schema(api_key, version))
    assert len(bodies) > 3
    for label, body in bodies:
        payload = struct.pack(">i", 5) + b"\x00" + body  # correlation id, the flexible header's empty tag section
        try:
            decode_response(api_key, version, payload)
        except UpstreamProtocolError:
            continue
        pytest.fail(f"{api_key.name} v{version} {label}: decoded")
