"""``proxy.handlers.group_admin`` against an in-memory upstream: DescribeGroups and DeleteGroups go up as the client
sent them when every group is allowed, and otherwise refuse the denied groups (GROUP_AUTHORIZATION_FAILED) and forward
only the allowed ones; ListGroups leaves out the groups the caller may not describe; OffsetDelete refuses a denied
group whole and a denied topic per partition; an upstream that fails ends the request with ``UpstreamUnavailable``.

ConsumerGroupDescribe (KIP-848) refuses the groups the caller may not describe (before the others), forwards the rest,
replaces a group whose assignments name a topic the caller may not describe with TOPIC_AUTHORIZATION_FAILED (Kafka
4.0's check), and fills authorized operations from kafkaguard's ACLs."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kio.schema.consumer_group_describe.v0 import request as consumer_describe_request
from kio.schema.consumer_group_describe.v0 import response as consumer_describe_response
from kio.schema.delete_groups.v2 import request as delete_request
from kio.schema.delete_groups.v2 import response as delete_response
from kio.schema.describe_groups.v5 import request as describe_request
from kio.schema.describe_groups.v5 import response as describe_response
from kio.schema.errors import ErrorCode
from kio.schema.list_groups.v4 import request as list_request
from kio.schema.list_groups.v4 import response as list_response
from kio.schema.offset_delete.v0 import request as offset_delete_request
from kio.schema.offset_delete.v0 import response as offset_delete_response
from kio.static.primitive import i32

from kafkaguard.apis.operations import OPERATIONS_NOT_REQUESTED
from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.bootstrap import Services
from kafkaguard.model import AclOperation, ResourceType
from kafkaguard.proxy.upstream import UpstreamUnavailable
from tests.proxy.memory_upstream import MemoryUpstream, allow, answer_of, assert_relayed, entity, handle, unavailable


@pytest.fixture(autouse=True)
def administrator(services: Services) -> None:
    allow(services, "User:alice", ResourceType.GROUP, "feed-", AclOperation.DESCRIBE, AclOperation.DELETE)
    allow(services, "User:alice", ResourceType.TOPIC, "feed-", AclOperation.READ)


def described(api_key: ApiKey, version: int, request: Any) -> Any:
    groups = tuple(entity(describe_response.DescribedGroup, group_id=g, group_state="Stable") for g in request.groups)
    return answer_of(api_key, version, groups=groups)


def describe(*groups: str) -> Any:
    return entity(describe_request.DescribeGroupsRequest, groups=groups)


def test_describe_groups_all_allowed_is_relayed(services: Services):
    upstream = MemoryUpstream(described)
    handled = handle(services, upstream, describe("feed-g", "feed-h"))
    assert_relayed(handled, upstream)


def test_describe_groups_refuses_a_denied_group_and_forwards_the_others(services: Services):
    upstream = MemoryUpstream(described)
    handled = handle(services, upstream, describe("feed-g", "secret-g"))
    assert upstream.bodies(ApiKey.DESCRIBE_GROUPS)[0].groups == ("feed-g",)
    answered = {g.group_id: (g.error_code, g.group_state) for g in handled.answer().groups}
    assert answered == {"feed-g": (ErrorCode.none, "Stable"), "secret-g": (ErrorCode.group_authorization_failed, "")}


def test_list_groups_leaves_out_the_groups_not_describable(services: Services):
    def listed(api_key: ApiKey, version: int, _request: Any) -> Any:
        groups = tuple(entity(list_response.ListedGroup, group_id=g) for g in ("feed-g", "secret-g"))
        return answer_of(api_key, version, groups=groups)

    upstream = MemoryUpstream(listed)
    handled = handle(services, upstream, entity(list_request.ListGroupsRequest))
    assert [sent.payload for sent in upstream.sent] == [handled.payload]
    assert [g.group_id for g in handled.answer().groups] == ["feed-g"]


def deleted(api_key: ApiKey, version: int, request: Any) -> Any:
    results = tuple(entity(delete_response.DeletableGroupResult, group_id=g) for g in request.groups_names)
    return answer_of(api_key, version, results=results)


def test_delete_groups_all_allowed_is_relayed(services: Services):
    upstream = MemoryUpstream(deleted)
    assert_relayed(handle(services, upstream, entity(delete_request.DeleteGroupsRequest, groups_names=("feed-g",))),
                   upstream)  # fmt: skip


def test_delete_groups_refuses_a_denied_group_and_forwards_the_others(services: Services):
    upstream = MemoryUpstream(deleted)
    request = entity(delete_request.DeleteGroupsRequest, groups_names=("feed-g", "secret-g"))
    handled = handle(services, upstream, request)
    assert upstream.bodies(ApiKey.DELETE_GROUPS)[0].groups_names == ("feed-g",)
    answered = {r.group_id: r.error_code for r in handled.answer().results}
    assert answered == {"feed-g": ErrorCode.none, "secret-g": ErrorCode.group_authorization_failed}


def offset_delete(group_id: str, *topics: str) -> Any:
    named = tuple(
        entity(offset_delete_request.OffsetDeleteRequestTopic, name=name,
               partitions=(entity(offset_delete_request.OffsetDeleteRequestPartition, partition_index=0),))
        for name in topics
    )  # fmt: skip
    return entity(offset_delete_request.OffsetDeleteRequest, group_id=group_id, topics=named)


def offsets_deleted(api_key: ApiKey, version: int, request: Any) -> Any:
    topics = tuple(
        entity(offset_delete_response.OffsetDeleteResponseTopic, name=topic.name, partitions=tuple(
            entity(offset_delete_response.OffsetDeleteResponsePartition, partition_index=p.partition_index)
            for p in topic.partitions))
        for topic in request.topics
    )  # fmt: skip
    return answer_of(api_key, version, topics=topics)


def test_offset_delete_refuses_a_denied_topic_and_forwards_the_others(services: Services):
    upstream = MemoryUpstream(offsets_deleted)
    handled = handle(services, upstream, offset_delete("feed-g", "feed-a", "secret-b"))
    assert [t.name for t in upstream.bodies(ApiKey.OFFSET_DELETE)[0].topics] == ["feed-a"]
    answered = {t.name: p.error_code for t in handled.answer().topics for p in t.partitions}
    assert answered == {"feed-a": ErrorCode.none, "secret-b": ErrorCode.topic_authorization_failed}


def test_offset_delete_of_a_denied_group_never_goes_upstream(services: Services):
    upstream = MemoryUpstream(offsets_deleted)
    handled = handle(services, upstream, offset_delete("secret-g", "feed-a"))
    assert upstream.sent == []
    assert handled.answer().error_code == ErrorCode.group_authorization_failed


def test_an_upstream_failure_ends_the_request(services: Services):
    with pytest.raises(UpstreamUnavailable):
        handle(services, MemoryUpstream(unavailable), describe("feed-g", "secret-g"))


# ------------------------------------------------------------------------------------------ ConsumerGroupDescribe

FEED_ID = uuid.UUID(int=1)
SECRET_ID = uuid.UUID(int=2)


def assignment(*topics: tuple[uuid.UUID, str]) -> Any:
    return entity(consumer_describe_response.Assignment, topic_partitions=tuple(
        entity(consumer_describe_response.TopicPartitions, topic_id=topic_id, topic_name=name, partitions=(i32(0),))
        for topic_id, name in topics
    ))  # fmt: skip


def described_with(topics: dict[str, tuple[str, ...]]) -> Any:
    """An upstream describing each asked group with one member assigned ``topics[group]`` (target: the same)."""

    def answer(api_key: ApiKey, version: int, request: Any) -> Any:
        groups = []
        for group_id in request.group_ids:
            named = [(FEED_ID if name.startswith("feed-") else SECRET_ID, name) for name in topics.get(group_id, ())]
            one = entity(
                consumer_describe_response.Member, member_id="m-1", client_id="c", client_host="/10.0.0.9",
                assignment=assignment(*named), target_assignment=assignment(*named),
            )  # fmt: skip
            groups.append(entity(consumer_describe_response.DescribedGroup, group_id=group_id, group_state="Stable",
                                 group_epoch=i32(4), assignor_name="uniform", members=(one,),
                                 authorized_operations=i32(OPERATIONS_NOT_REQUESTED)))  # fmt: skip
        return answer_of(api_key, version, groups=tuple(groups))

    return answer


def describe_consumer_groups(*group_ids: str, operations: bool = False) -> Any:
    return entity(consumer_describe_request.ConsumerGroupDescribeRequest, group_ids=group_ids,
                  include_authorized_operations=operations)  # fmt: skip


@pytest.fixture
def describer(services: Services) -> None:
    allow(services, "User:alice", ResourceType.GROUP, "feed-", AclOperation.DESCRIBE)
    allow(services, "User:alice", ResourceType.TOPIC, "feed-", AclOperation.DESCRIBE)


def group_errors(answer: Any) -> list[tuple[str, ErrorCode, int]]:
    return [(g.group_id, g.error_code, len(g.members)) for g in answer.groups]


@pytest.mark.usefixtures("describer")
def test_describe_refuses_denied_groups_first_and_forwards_only_the_others(services: Services):
    upstream = MemoryUpstream(described_with({"feed-g": ("feed-a",)}))
    answer = handle(services, upstream, describe_consumer_groups("feed-g", "secret-g")).answer()
    assert upstream.bodies(ApiKey.CONSUMER_GROUP_DESCRIBE)[0].group_ids == ("feed-g",)
    assert group_errors(answer) == [
        ("secret-g", ErrorCode.group_authorization_failed, 0),
        ("feed-g", ErrorCode.none, 1),
    ]
    refused = answer.groups[0]
    assert (refused.group_state, refused.group_epoch, refused.authorized_operations) == (
        "",
        0,
        OPERATIONS_NOT_REQUESTED,
    )


@pytest.mark.usefixtures("describer")
def test_describe_of_only_denied_groups_never_goes_upstream(services: Services):
    upstream = MemoryUpstream(described_with({}))
    answer = handle(services, upstream, describe_consumer_groups("secret-g", "secret-h")).answer()
    assert upstream.sent == []
    assert [g.error_code for g in answer.groups] == [ErrorCode.group_authorization_failed] * 2


@pytest.mark.usefixtures("describer")
def test_describe_hides_a_group_assigned_a_topic_not_describable(services: Services):
    upstream = MemoryUpstream(described_with({"feed-g": ("feed-a",), "feed-h": ("feed-a", "secret-b")}))
    answer = handle(services, upstream, describe_consumer_groups("feed-g", "feed-h")).answer()
    assert group_errors(answer) == [("feed-g", ErrorCode.none, 1), ("feed-h", ErrorCode.topic_authorization_failed, 0)]
    assert "secret-b" not in repr(answer)


@pytest.mark.usefixtures("describer")
def test_describe_authorized_operations_are_the_callers(services: Services):
    upstream = MemoryUpstream(described_with({"feed-g": ("feed-a",)}))
    answer = handle(services, upstream, describe_consumer_groups("feed-g", operations=True)).answer()
    describe_, delete = AclOperation.DESCRIBE.code, AclOperation.DELETE.code
    assert answer.groups[0].authorized_operations == (1 << describe_) | (1 << delete)


@pytest.mark.usefixtures("describer")
def test_describe_without_operations_keeps_the_upstreams_field(services: Services):
    upstream = MemoryUpstream(described_with({"feed-g": ("feed-a",)}))
    answer = handle(services, upstream, describe_consumer_groups("feed-g")).answer()
    assert answer.groups[0].authorized_operations == OPERATIONS_NOT_REQUESTED
    assert answer.groups[0].members[0].assignment.topic_partitions[0].topic_name == "feed-a"
