"""The consumer-group APIs: JoinGroup, SyncGroup, Heartbeat, LeaveGroup (11-14), OffsetCommit (8), OffsetFetch (9).

As ``KafkaApis`` (Kafka 3.9):

* JoinGroup, SyncGroup, Heartbeat, LeaveGroup need READ on the group; a refusal is the API's error response with
  GROUP_AUTHORIZATION_FAILED and nothing reaches the upstream; allowed, the request and its answer pass unchanged;
* OffsetCommit needs READ on the group (else every partition gets GROUP_AUTHORIZATION_FAILED) and READ on each
  topic (a denied topic's partitions get TOPIC_AUTHORIZATION_FAILED; the rest are committed);
* OffsetFetch needs DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED for the group) and DESCRIBE on each
  topic: a named topic without it gets TOPIC_AUTHORIZATION_FAILED per partition (offset -1, metadata ""), and a
  request for all of a group's offsets silently leaves such topics out.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkaguard.authorizer.requests import REQUIREMENTS, ApiKey
from kafkaguard.model import ResourceType
from kafkaguard.protocol.build import NO_THROTTLE, build, nested, rebuild, rebuild_request
from kafkaguard.protocol.codec import response_schema
from kafkaguard.protocol.replies import Reply
from kafkaguard.proxy.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafkaguard.proxy.scope import ProxyScope

GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC
_GROUP_DENIED, _TOPIC_DENIED = ErrorCode.group_authorization_failed, ErrorCode.topic_authorization_failed


def _may_read_group(scope: ProxyScope, group_id: str) -> bool:
    return scope.authorize(REQUIREMENTS[scope.api_key], {GROUP: [group_id]}).allows(GROUP, group_id)


async def join_group(scope: ProxyScope, request: JoinGroupRequest) -> Reply:
    if _may_read_group(scope, request.group_id):
        return await scope.relay()
    cls = response_schema(ApiKey.JOIN_GROUP, scope.api_version)
    return build(
        cls, throttle_time=NO_THROTTLE, error_code=_GROUP_DENIED, generation_id=-1, protocol_type=None,
        protocol_name=None if scope.api_version >= 7 else "", leader="", skip_assignment=False, member_id="",
        members=(),
    )  # fmt: skip


async def sync_group(scope: ProxyScope, request: SyncGroupRequest) -> Reply:
    if _may_read_group(scope, request.group_id):
        return await scope.relay()
    cls = response_schema(ApiKey.SYNC_GROUP, scope.api_version)
    return build(
        cls, throttle_time=NO_THROTTLE, error_code=_GROUP_DENIED, protocol_type=None, protocol_name=None,
        assignment=b"",
    )  # fmt: skip


async def heartbeat(scope: ProxyScope, request: HeartbeatRequest) -> Reply:
    if _may_read_group(scope, request.group_id):
        return await scope.relay()
    return build(response_schema(ApiKey.HEARTBEAT, scope.api_version), throttle_time=NO_THROTTLE,
                 error_code=_GROUP_DENIED)  # fmt: skip


async def leave_group(scope: ProxyScope, request: LeaveGroupRequest) -> Reply:
    if _may_read_group(scope, request.group_id):
        return await scope.relay()
    return build(response_schema(ApiKey.LEAVE_GROUP, scope.api_version), throttle_time=NO_THROTTLE,
                 error_code=_GROUP_DENIED, members=())  # fmt: skip


async def offset_commit(scope: ProxyScope, request: OffsetCommitRequest) -> Reply:
    cls = response_schema(ApiKey.OFFSET_COMMIT, scope.api_version)
    names = list(dict.fromkeys(topic.name for topic in request.topics))
    outcome = scope.authorize(REQUIREMENTS[ApiKey.OFFSET_COMMIT], {GROUP: [request.group_id], TOPIC: names})
    if not outcome.allows(GROUP, request.group_id):
        return build(cls, throttle_time=NO_THROTTLE, topics=_commit_errors(cls, request.topics, _GROUP_DENIED))
    denied = {name for name in names if not outcome.allows(TOPIC, name)}
    if not denied:
        return await scope.relay()
    refused = _commit_errors(cls, [t for t in request.topics if t.name in denied], _TOPIC_DENIED)
    allowed = tuple(topic for topic in request.topics if topic.name not in denied)
    if not allowed:
        return build(cls, throttle_time=NO_THROTTLE, topics=refused)
    answer = (await scope.forward(rebuild_request(request, topics=allowed))).body()
    return rebuild(answer, topics=answer.topics + refused)


def _commit_errors(cls: type[Any], topics: Any, error: ErrorCode) -> tuple[Any, ...]:
    topic_cls, partition_cls = nested(cls, "OffsetCommitResponseTopic"), nested(cls, "OffsetCommitResponsePartition")
    return tuple(
        build(
            topic_cls,
            name=topic.name,
            partitions=tuple(
                build(partition_cls, partition_index=p.partition_index, error_code=error) for p in topic.partitions
            ),
        )
        for topic in topics
    )


async def offset_fetch(scope: ProxyScope, request: OffsetFetchRequest) -> Reply:
    if hasattr(request, "groups"):
        return await _offset_fetch_groups(scope, request)
    cls = response_schema(ApiKey.OFFSET_FETCH, scope.api_version)
    group_id = request.group_id
    named = request.topics
    names = [topic.name for topic in named] if named is not None else []
    outcome = scope.authorize(REQUIREMENTS[ApiKey.OFFSET_FETCH], {GROUP: [group_id], TOPIC: names})
    if not outcome.allows(GROUP, group_id):
        return build(cls, throttle_time=NO_THROTTLE, error_code=_GROUP_DENIED, topics=())
    if named is None:  # every topic of the group: those the caller may not describe are left out
        answer = (await scope.forward()).body()
        visible = _describable(scope, [topic.name for topic in answer.topics])
        return rebuild(answer, topics=tuple(topic for topic in answer.topics if topic.name in visible))
    denied = {name for name in names if not outcome.allows(TOPIC, name)}
    if not denied:
        return await scope.relay()
    refused = _fetch_errors(cls, [topic for topic in named if topic.name in denied])
    allowed = tuple(topic for topic in named if topic.name not in denied)
    if not allowed:
        return build(cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, topics=refused)
    answer = (await scope.forward(rebuild_request(request, topics=allowed))).body()
    return rebuild(answer, topics=answer.topics + refused)


async def _offset_fetch_groups(scope: ProxyScope, request: Any) -> Reply:
    """v8+: several groups, each decided alone (DESCRIBE on the group, then on its named topics)."""
    cls = response_schema(ApiKey.OFFSET_FETCH, scope.api_version)
    group_cls = nested(cls, "OffsetFetchResponseGroup")
    refused_groups: list[Any] = []
    asked: list[Any] = []
    refused_topics: dict[str, tuple[Any, ...]] = {}
    all_topics: set[str] = set()
    for group in request.groups:
        names = [topic.name for topic in group.topics] if group.topics is not None else []
        outcome = scope.authorize(REQUIREMENTS[ApiKey.OFFSET_FETCH], {GROUP: [group.group_id], TOPIC: names})
        if not outcome.allows(GROUP, group.group_id):
            refused_groups.append(build(group_cls, group_id=group.group_id, topics=(), error_code=_GROUP_DENIED))
            continue
        if group.topics is None:
            all_topics.add(group.group_id)
            asked.append(group)
            continue
        denied = {name for name in names if not outcome.allows(TOPIC, name)}
        refused_topics[group.group_id] = _fetch_errors(cls, [t for t in group.topics if t.name in denied], grouped=True)
        asked.append(rebuild_request(group, topics=tuple(t for t in group.topics if t.name not in denied)))
    answered: list[Any] = []
    if asked:
        answer = (await scope.forward(rebuild_request(request, groups=tuple(asked)))).body()
        for group in answer.groups:
            topics = group.topics
            if group.group_id in all_topics:
                visible = _describable(scope, [topic.name for topic in topics])
                topics = tuple(topic for topic in topics if topic.name in visible)
            answered.append(rebuild(group, topics=topics + refused_topics.get(group.group_id, ())))
    return build(cls, throttle_time=NO_THROTTLE, groups=tuple(answered + refused_groups))


def _describable(scope: ProxyScope, names: list[str]) -> set[str]:
    outcome = scope.authorize(REQUIREMENTS[ApiKey.OFFSET_FETCH], {TOPIC: names})
    return {name for name in names if outcome.allows(TOPIC, name)}


def _fetch_errors(cls: type[Any], topics: Any, *, grouped: bool = False) -> tuple[Any, ...]:
    """Kafka's ``OffsetFetchResponse.UNAUTHORIZED_PARTITION`` for each named partition: offset -1, epoch -1,
    metadata "", TOPIC_AUTHORIZATION_FAILED."""
    suffix = "s" if grouped else ""
    topic_cls = nested(cls, f"OffsetFetchResponseTopic{suffix}")
    partition_cls = nested(cls, f"OffsetFetchResponsePartition{suffix}")
    return tuple(
        build(
            topic_cls,
            name=topic.name,
            partitions=tuple(
                build(
                    partition_cls,
                    partition_index=index,
                    committed_offset=-1,
                    committed_leader_epoch=-1,
                    metadata="",
                    error_code=_TOPIC_DENIED,
                )
                for index in topic.partition_indexes
            ),
        )
        for topic in topics
    )
