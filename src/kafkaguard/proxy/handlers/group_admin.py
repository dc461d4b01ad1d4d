"""The group administration APIs (DescribeGroups, ListGroups, DeleteGroups, OffsetDelete, ConsumerGroupDescribe), as
KafkaApis.

As ``KafkaApis`` (Kafka 3.9):

* DescribeGroups: DESCRIBE on each group; a refused group is answered ``DescribeGroupsResponse.groupError`` (state,
  protocol type and protocol "", no members, operations omitted) with GROUP_AUTHORIZATION_FAILED, before the
  described ones. The KIP-430 authorized operations (v3+, when asked) are the caller's under kafkaguard's ACLs, not
  the upstream's (which would be the proxy's own);
* ListGroups: DESCRIBE on the cluster lists every group; otherwise only the groups the caller may DESCRIBE (the rest
  are left out, no error);
* DeleteGroups: DELETE on each group (refused: GROUP_AUTHORIZATION_FAILED), the others deleted;
* OffsetDelete: DELETE on the group, else the whole request is GROUP_AUTHORIZATION_FAILED; then READ on each topic
  (a refused topic's partitions: TOPIC_AUTHORIZATION_FAILED). The allowed part is forwarded even when empty, as
  Kafka always asks its coordinator: a group-level error of the upstream (e.g. GROUP_ID_NOT_FOUND) then replaces
  the partition errors, as ``OffsetDeleteResponse.Builder.merge`` does;
* ConsumerGroupDescribe (KIP-848, ``handleConsumerGroupDescribe``): DESCRIBE on each group; a refused group is
  ``DescribedGroup`` with only its id and GROUP_AUTHORIZATION_FAILED (every other field at its default), listed
  before the described ones; the others are asked of the coordinator (duplicates kept, as Kafka passes the list on).
  With ``IncludeAuthorizedOperations`` each described group without an error gets the caller's authorized
  operations under kafkaguard's ACLs (the upstream's would be the proxy's own).

Kafka 3.9's ConsumerGroupDescribe returns members' assignments and target assignments by topic id *and name* whatever
the caller may DESCRIBE. Kafka 4.0 closed that (KAFKA-18813, apache/kafka#18989): a described group whose members'
assignments or target assignments name a topic the caller may not DESCRIBE is replaced by an error group,
TOPIC_AUTHORIZATION_FAILED, without its members (as a refused group). The proxy does as 4.0, decided per group (fail
closed). Nothing in the answer is a broker address (members' ``client_host`` is the address the upstream saw the
member connect from: the proxy's own outbound address).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kio.schema.errors import ErrorCode

from kafkaguard.apis.operations import OPERATIONS_NOT_REQUESTED
from kafkaguard.authorizer.requests import REQUIREMENTS, ApiKey, Check, Requirement, authorized_operations
from kafkaguard.model import AclOperation, ItemError, ResourceType
from kafkaguard.protocol.build import NO_THROTTLE
from kafkaguard.protocol.codec import response_schema
from kafkaguard.protocol.replies import Reply
from kafkaguard.protocol.routes import route, routes
from kafkaguard.protocol.wire_errors import wire_error
from kafkaguard.proxy.builders import (
    ConsumerGroupDescribeDescribedGroup,
    DescribeGroupsDescribedGroup,
    OffsetDeleteResponseTopic,
    consumer_group_describe_described_group,
    consumer_group_describe_response,
    deletable_group_result,
    delete_groups_response,
    describe_groups_described_group,
    describe_groups_response,
    offset_delete_response_partition,
    offset_delete_response_topic,
    rebuild_consumer_group_describe_described_group,
    rebuild_consumer_group_describe_request,
    rebuild_consumer_group_describe_response,
    rebuild_delete_groups_request,
    rebuild_delete_groups_response,
    rebuild_describe_groups_described_group,
    rebuild_describe_groups_request,
    rebuild_describe_groups_response,
    rebuild_list_groups_response,
    rebuild_offset_delete_request,
    rebuild_offset_delete_response,
)
from kafkaguard.proxy.messages import (
    CONSUMER_GROUP_DESCRIBE,
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    LIST_GROUPS,
    OFFSET_DELETE,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
)
from kafkaguard.proxy.refusals import (
    GROUP_DENIED,
    TOPIC_DENIED,
    error_response,
    named,
    refused_topics,
    with_refused,
)
from kafkaguard.proxy.scope import ProxyHandler, ProxyScope

GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC


def _refused_topic(
    cls: type[OffsetDeleteResponse], name: str, indexes: Iterable[int], error: ItemError
) -> OffsetDeleteResponseTopic:
    partitions = tuple(
        offset_delete_response_partition(cls, partition_index=index, error_code=wire_error(error)) for index in indexes
    )
    return offset_delete_response_topic(cls, name=name, partitions=partitions)


#: Kafka 4.0's check of the topics a described consumer group's members are assigned (KAFKA-18813): DESCRIBE on each.
ASSIGNED_TOPICS = Requirement(
    "ConsumerGroupDescribe(assignments)",
    per_resource=(Check(AclOperation.DESCRIBE, TOPIC),),
    denial_error="TOPIC_AUTHORIZATION_FAILED",
)


def _allowed(scope: ProxyScope, requirement: Requirement, rtype: ResourceType, names: Sequence[str]) -> set[str]:
    outcome = scope.authorize(requirement, {rtype: names})
    return {name for name in names if outcome.allows(rtype, name)}


# ------------------------------------------------------------------------------------------------ DescribeGroups


async def describe_groups(scope: ProxyScope, request: DescribeGroupsRequest) -> Reply:
    cls: type[DescribeGroupsResponse] = response_schema(ApiKey.DESCRIBE_GROUPS, scope.api_version)
    describable = _allowed(scope, REQUIREMENTS[ApiKey.DESCRIBE_GROUPS], GROUP, list(dict.fromkeys(request.groups)))
    with_operations = bool(getattr(request, "include_authorized_operations", False))
    refused = tuple(
        describe_groups_described_group(
            cls,
            error_code=wire_error(GROUP_DENIED),
            group_id=group_id,
            group_state="",
            protocol_type="",
            protocol_data="",
            members=(),
            authorized_operations=OPERATIONS_NOT_REQUESTED,
        )
        for group_id in request.groups
        if group_id not in describable
    )
    if not refused and not with_operations:
        return await scope.relay()
    allowed = tuple(group_id for group_id in request.groups if group_id in describable)
    if not allowed:
        return describe_groups_response(cls, throttle_time=NO_THROTTLE, groups=refused)
    answer: DescribeGroupsResponse = (
        await scope.forward(rebuild_describe_groups_request(request, groups=allowed) if refused else None)
    ).body(DESCRIBE_GROUPS)
    described: tuple[DescribeGroupsDescribedGroup, ...] = answer.groups
    if with_operations:
        described = tuple(
            rebuild_describe_groups_described_group(
                group, authorized_operations=authorized_operations(scope.snapshot, scope.context, GROUP, group.group_id)
            )
            if group.error_code == ErrorCode.none
            else group
            for group in described
        )
    return rebuild_describe_groups_response(answer, groups=refused + tuple(described))


# ---------------------------------------------------------------------------------------------------- ListGroups


async def list_groups(scope: ProxyScope, request: ListGroupsRequest) -> Reply:
    answer: ListGroupsResponse = (await scope.forward()).body(LIST_GROUPS)
    ids = list(dict.fromkeys(group.group_id for group in answer.groups))
    visible = _allowed(scope, REQUIREMENTS[ApiKey.LIST_GROUPS], GROUP, ids)
    return rebuild_list_groups_response(
        answer, groups=tuple(group for group in answer.groups if group.group_id in visible)
    )


# -------------------------------------------------------------------------------------------------- DeleteGroups


async def delete_groups(scope: ProxyScope, request: DeleteGroupsRequest) -> Reply:
    cls: type[DeleteGroupsResponse] = response_schema(ApiKey.DELETE_GROUPS, scope.api_version)
    names = list(dict.fromkeys(request.groups_names))
    deletable = _allowed(scope, REQUIREMENTS[ApiKey.DELETE_GROUPS], GROUP, names)
    if len(deletable) == len(names):
        return await scope.relay()
    refused = tuple(
        deletable_group_result(cls, group_id=group_id, error_code=wire_error(GROUP_DENIED))
        for group_id in request.groups_names
        if group_id not in deletable
    )
    allowed = tuple(group_id for group_id in request.groups_names if group_id in deletable)
    return await with_refused(
        scope,
        DELETE_GROUPS,
        rebuild_delete_groups_request(request, groups_names=allowed) if allowed else None,
        own=lambda: delete_groups_response(cls, throttle_time=NO_THROTTLE, results=refused),
        merged=lambda answer: rebuild_delete_groups_response(answer, results=answer.results + refused),
    )


# -------------------------------------------------------------------------------------------------- OffsetDelete


async def offset_delete(scope: ProxyScope, request: OffsetDeleteRequest) -> Reply:
    cls: type[OffsetDeleteResponse] = response_schema(ApiKey.OFFSET_DELETE, scope.api_version)
    names = list(dict.fromkeys(topic.name for topic in request.topics))
    outcome = scope.authorize(REQUIREMENTS[ApiKey.OFFSET_DELETE], {GROUP: [request.group_id], TOPIC: names})
    if not outcome.allows(GROUP, request.group_id):
        return error_response(scope, GROUP_DENIED, topics=())
    readable = {name for name in names if outcome.allows(TOPIC, name)}
    if len(readable) == len(names):
        return await scope.relay()
    refused = refused_topics(
        _refused_topic, cls, named(t for t in request.topics if t.name not in readable), TOPIC_DENIED
    )
    allowed = tuple(topic for topic in request.topics if topic.name in readable)
    answer: OffsetDeleteResponse = (await scope.forward(rebuild_offset_delete_request(request, topics=allowed))).body(
        OFFSET_DELETE
    )
    if answer.error_code != ErrorCode.none:  # OffsetDeleteResponse.Builder.merge: a group-level error wins
        return answer
    return rebuild_offset_delete_response(answer, topics=answer.topics + refused)


# ------------------------------------------------------------------------------------------ ConsumerGroupDescribe


async def consumer_group_describe(scope: ProxyScope, request: ConsumerGroupDescribeRequest) -> Reply:
    cls: type[ConsumerGroupDescribeResponse] = response_schema(ApiKey.CONSUMER_GROUP_DESCRIBE, scope.api_version)
    ids = list(dict.fromkeys(request.group_ids))
    describable = _allowed(scope, REQUIREMENTS[ApiKey.CONSUMER_GROUP_DESCRIBE], GROUP, ids)
    refused = tuple(
        _consumer_group_error(cls, group_id, GROUP_DENIED)
        for group_id in request.group_ids
        if group_id not in describable
    )
    allowed = tuple(group_id for group_id in request.group_ids if group_id in describable)
    if not allowed:
        return consumer_group_describe_response(cls, throttle_time=NO_THROTTLE, groups=refused)
    # Only the describable groups go upstream: the request loses groups, never gains any (forward no more than
    # was authorized); ``include_authorized_operations`` goes as sent, its answer is replaced below.
    answer: ConsumerGroupDescribeResponse = (
        await scope.forward(rebuild_consumer_group_describe_request(request, group_ids=allowed) if refused else None)
    ).body(CONSUMER_GROUP_DESCRIBE)
    assigned = {
        group.group_id: _assigned_topics(group) for group in answer.groups if group.error_code == ErrorCode.none
    }
    visible = _allowed(scope, ASSIGNED_TOPICS, TOPIC, sorted(set().union(*assigned.values()))) if assigned else set()
    described: list[ConsumerGroupDescribeDescribedGroup] = []
    for group in answer.groups:
        if group.error_code != ErrorCode.none:
            described.append(group)
        elif not assigned[group.group_id] <= visible:
            described.append(_consumer_group_error(cls, group.group_id, TOPIC_DENIED))
        elif request.include_authorized_operations:
            operations = authorized_operations(scope.snapshot, scope.context, GROUP, group.group_id)
            described.append(rebuild_consumer_group_describe_described_group(group, authorized_operations=operations))
        else:
            described.append(group)
    return rebuild_consumer_group_describe_response(answer, groups=refused + tuple(described))


def _consumer_group_error(
    cls: type[ConsumerGroupDescribeResponse], group_id: str, error: ItemError
) -> ConsumerGroupDescribeDescribedGroup:
    """Kafka's refused ``DescribedGroup``: the group id and the error, every other field at its default."""
    return consumer_group_describe_described_group(
        cls,
        error_code=wire_error(error),
        error_message=None,
        group_id=group_id,
        group_state="",
        group_epoch=0,
        assignment_epoch=0,
        assignor_name="",
        members=(),
        authorized_operations=OPERATIONS_NOT_REQUESTED,
    )


def _assigned_topics(group: ConsumerGroupDescribeDescribedGroup) -> set[str]:
    """The topic names of every member's current and target assignment."""
    return {
        partitions.topic_name
        for member in group.members
        for assignment in (member.assignment, member.target_assignment)
        for partitions in assignment.topic_partitions
    }


#: API → handler (each checked against its API's request union); merged into ``proxy.dispatch.HANDLERS``.
HANDLERS: dict[ApiKey, ProxyHandler] = routes(
    route(DESCRIBE_GROUPS, describe_groups),
    route(LIST_GROUPS, list_groups),
    route(DELETE_GROUPS, delete_groups),
    route(OFFSET_DELETE, offset_delete),
    route(CONSUMER_GROUP_DESCRIBE, consumer_group_describe),
)
