"""The consumer-group APIs: JoinGroup, SyncGroup, Heartbeat, LeaveGroup (11-14), OffsetCommit (8), OffsetFetch (9),
and the KIP-848 consumer group protocol's ConsumerGroupHeartbeat (68).

As ``KafkaApis`` (Kafka 3.9):

* JoinGroup, SyncGroup, Heartbeat, LeaveGroup need READ on the group; a refusal is the API's error response with
  GROUP_AUTHORIZATION_FAILED and nothing reaches the upstream; allowed, the request and its answer pass unchanged;
* OffsetCommit needs READ on the group (else every partition gets GROUP_AUTHORIZATION_FAILED) and READ on each
  topic (a denied topic's partitions get TOPIC_AUTHORIZATION_FAILED; the rest are committed);
* OffsetFetch needs DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED for the group) and DESCRIBE on each
  topic: a named topic without it gets TOPIC_AUTHORIZATION_FAILED per partition (offset -1, metadata ""), and a
  request for all of a group's offsets silently leaves such topics out. v9 (the versions a KIP-848 member sends, with
  its member id and epoch) is authorized the same way: the member fields go upstream unchanged, and the coordinator
  checks them (``handleOffsetCommitRequest``/``handleOffsetFetchRequestFromCoordinator`` do not look at them);
* ConsumerGroupHeartbeat (``handleConsumerGroupHeartbeat``) needs READ on the group, else the response is
  ``ConsumerGroupHeartbeatRequest.getErrorResponse`` (GROUP_AUTHORIZATION_FAILED, member epoch and heartbeat
  interval 0, no member id, no assignment) and nothing reaches the upstream.

Kafka 3.9 checks nothing more for ConsumerGroupHeartbeat: a member may subscribe to topics it may not DESCRIBE and
is then assigned their partitions (named by topic id) — their existence and partition count leak. Kafka 4.0 closed
that (KAFKA-18813, apache/kafka#18989): when the request names its subscription (``SubscribedTopicNames`` not null),
every name must be DESCRIBE-able, else the whole response is TOPIC_AUTHORIZATION_FAILED and the coordinator is not
asked. The proxy does as 4.0 (fail closed; a null subscription is "unchanged since the last heartbeat", checked
when it was sent, as 4.0 does). Regex subscriptions: 3.9's v0 has no ``SubscribedTopicRegex`` (that is v1, Kafka
4.0), and the proxy offers v0 only; a 3.9 Java consumer subscribed to a pattern resolves it itself against Metadata,
which the proxy answers with the topics the caller may DESCRIBE only, and sends the names — checked as above. The
answer is relayed as it is: it names the member, its epoch, and its assignment by topic id and partition, never a
broker address.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.offset_fetch.v8.response import OffsetFetchResponse as OffsetFetchResponseV8
from kio.schema.offset_fetch.v9.response import OffsetFetchResponse as OffsetFetchResponseV9

from kafkaguard.authorizer.requests import REQUIREMENTS, ApiKey, Check, RequestAuthorization, Requirement
from kafkaguard.model import AclOperation, ItemError, ResourceType
from kafkaguard.protocol.build import NO_THROTTLE
from kafkaguard.protocol.codec import response_schema
from kafkaguard.protocol.replies import Reply
from kafkaguard.protocol.wire_errors import wire_error
from kafkaguard.proxy.broker_refusals import noted
from kafkaguard.proxy.builders import (
    OffsetCommitResponseTopic,
    OffsetFetchResponseGroup,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
    offset_commit_response,
    offset_commit_response_partition,
    offset_commit_response_topic,
    offset_fetch_response,
    offset_fetch_response_group,
    offset_fetch_response_partition,
    offset_fetch_response_partitions,
    offset_fetch_response_topic,
    offset_fetch_response_topics,
    rebuild_offset_commit_request,
    rebuild_offset_commit_response,
    rebuild_offset_fetch_request,
    rebuild_offset_fetch_request_group,
    rebuild_offset_fetch_response,
    rebuild_offset_fetch_response_group,
)
from kafkaguard.proxy.messages import (
    OFFSET_COMMIT,
    OFFSET_FETCH,
    ConsumerGroupHeartbeatRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
)
from kafkaguard.proxy.refusals import (
    GROUP_DENIED,
    TOPIC_DENIED,
    error_response,
    indexed,
    named,
    refused_topics,
    with_refused,
)
from kafkaguard.proxy.scope import ProxyScope
from kafkaguard.proxy.wire import UpstreamProtocolError

GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC


def _refused_commit(
    cls: type[OffsetCommitResponse], name: str, indexes: Iterable[int], error: ItemError
) -> OffsetCommitResponseTopic:
    partitions = tuple(
        offset_commit_response_partition(cls, partition_index=index, error_code=wire_error(error)) for index in indexes
    )
    return offset_commit_response_topic(cls, name=name, partitions=partitions)


def _refused_fetch(
    cls: type[OffsetFetchResponse], name: str, indexes: Iterable[int], error: ItemError
) -> OffsetFetchResponseTopic:
    """Kafka's ``OffsetFetchResponse.UNAUTHORIZED_PARTITION`` for each named partition: offset -1, epoch -1,
    metadata "" (v0-v7: one group)."""
    partitions = tuple(
        offset_fetch_response_partition(
            cls,
            partition_index=index,
            committed_offset=-1,
            committed_leader_epoch=-1,
            metadata="",
            error_code=wire_error(error),
        )
        for index in indexes
    )
    return offset_fetch_response_topic(cls, name=name, partitions=partitions)


def _refused_fetch_grouped(
    cls: type[OffsetFetchResponse], name: str, indexes: Iterable[int], error: ItemError
) -> OffsetFetchResponseTopics:
    """As ``_refused_fetch``, for v8+ (several groups; its entities are named with an "s")."""
    partitions = tuple(
        offset_fetch_response_partitions(
            cls,
            partition_index=index,
            committed_offset=-1,
            committed_leader_epoch=-1,
            metadata="",
            error_code=wire_error(error),
        )
        for index in indexes
    )
    return offset_fetch_response_topics(cls, name=name, partitions=partitions)


#: The answers per group (v8+) decoded at the request's version.
_GROUPED_ANSWERS = (OffsetFetchResponseV8, OffsetFetchResponseV9)
#: Kafka 4.0's check of a ConsumerGroupHeartbeat's subscribed names (KAFKA-18813): DESCRIBE on each.
SUBSCRIPTION = Requirement(
    "ConsumerGroupHeartbeat(subscription)",
    per_resource=(Check(AclOperation.DESCRIBE, TOPIC),),
    denial_error="TOPIC_AUTHORIZATION_FAILED",
)


def _may_read_group(scope: ProxyScope, group_id: str) -> bool:
    return scope.authorize(REQUIREMENTS[scope.api_key], {GROUP: [group_id]}).allows(GROUP, group_id)


async def join_group(scope: ProxyScope, request: JoinGroupRequest) -> Reply:
    if _may_read_group(scope, request.group_id):
        return await scope.relay()
    return error_response(
        scope,
        GROUP_DENIED,
        generation_id=-1,
        protocol_type=None,
        protocol_name=None if scope.api_version >= 7 else "",
        leader="",
        skip_assignment=False,
        member_id="",
        members=(),
    )


async def sync_group(scope: ProxyScope, request: SyncGroupRequest) -> Reply:
    if _may_read_group(scope, request.group_id):
        return await scope.relay()
    return error_response(scope, GROUP_DENIED, protocol_type=None, protocol_name=None, assignment=b"")


async def heartbeat(scope: ProxyScope, request: HeartbeatRequest) -> Reply:
    if _may_read_group(scope, request.group_id):
        return await scope.relay()
    return error_response(scope, GROUP_DENIED)


async def leave_group(scope: ProxyScope, request: LeaveGroupRequest) -> Reply:
    if _may_read_group(scope, request.group_id):
        return await scope.relay()
    return error_response(scope, GROUP_DENIED, members=())


async def consumer_group_heartbeat(scope: ProxyScope, request: ConsumerGroupHeartbeatRequest) -> Reply:
    if not _may_read_group(scope, request.group_id):
        return _heartbeat_refused(scope, GROUP_DENIED)
    subscribed = request.subscribed_topic_names
    if subscribed:  # null or empty: nothing named (null keeps the subscription already checked)
        names = list(dict.fromkeys(subscribed))
        outcome = scope.authorize(SUBSCRIPTION, {TOPIC: names})
        if not all(outcome.allows(TOPIC, name) for name in names):
            return _heartbeat_refused(scope, TOPIC_DENIED)
    return await scope.relay()


def _heartbeat_refused(scope: ProxyScope, error: ItemError) -> Reply:
    """``ConsumerGroupHeartbeatRequest.getErrorResponse``: the error code, every other field at its default."""
    return error_response(
        scope, error, member_id=None, member_epoch=0, heartbeat_interval=timedelta(0), assignment=None
    )


async def offset_commit(scope: ProxyScope, request: OffsetCommitRequest) -> Reply:
    names = list(dict.fromkeys(topic.name for topic in request.topics))
    outcome = scope.authorize(REQUIREMENTS[ApiKey.OFFSET_COMMIT], {GROUP: [request.group_id], TOPIC: names})
    cls: type[OffsetCommitResponse] = response_schema(ApiKey.OFFSET_COMMIT, scope.api_version)
    if not outcome.allows(GROUP, request.group_id):
        every = refused_topics(_refused_commit, cls, named(request.topics), GROUP_DENIED)
        return offset_commit_response(cls, throttle_time=NO_THROTTLE, topics=every)
    denied = {name for name in names if not outcome.allows(TOPIC, name)}
    if not denied:
        return await scope.relay()
    refused = refused_topics(_refused_commit, cls, named(t for t in request.topics if t.name in denied), TOPIC_DENIED)
    allowed = tuple(t for t in request.topics if t.name not in denied)
    return await with_refused(
        scope,
        OFFSET_COMMIT,
        rebuild_offset_commit_request(request, topics=allowed) if allowed else None,
        own=lambda: offset_commit_response(cls, throttle_time=NO_THROTTLE, topics=refused),
        merged=lambda answer: _committed(scope, outcome, request.group_id, answer, refused),
    )


def _committed(
    scope: ProxyScope,
    outcome: RequestAuthorization,
    group_id: str,
    answer: OffsetCommitResponse,
    refused: tuple[OffsetCommitResponseTopic, ...],
) -> OffsetCommitResponse:
    """The upstream's answer with the proxy's refusals merged in; in passthrough, the broker's refusals noted: each
    partition an item of its topic, or of the group when the broker refused the group (on every partition)."""
    codes = [(topic.name, int(p.error_code)) for topic in answer.topics for p in topic.partitions]
    group_refused = int(ErrorCode.group_authorization_failed)
    noted(scope, outcome, TOPIC, ((name, code) for name, code in codes if code != group_refused))
    noted(scope, outcome, GROUP, ((group_id, code) for _name, code in codes if code == group_refused))
    return rebuild_offset_commit_response(answer, topics=answer.topics + refused)


async def offset_fetch(scope: ProxyScope, request: OffsetFetchRequest) -> Reply:
    if hasattr(request, "groups"):
        return await _offset_fetch_groups(scope, request)
    group_id = request.group_id
    named = request.topics
    names = [topic.name for topic in named] if named is not None else []
    outcome = scope.authorize(REQUIREMENTS[ApiKey.OFFSET_FETCH], {GROUP: [group_id], TOPIC: names})
    if not outcome.allows(GROUP, group_id):
        return error_response(scope, GROUP_DENIED, topics=())
    if named is None:  # every topic of the group: those the caller may not describe are left out
        answer: OffsetFetchResponse = (await scope.forward()).body(OFFSET_FETCH)
        if isinstance(answer, _GROUPED_ANSWERS):  # decoded at the request's version: v8+ went to the per-group path
            raise UpstreamProtocolError(f"OffsetFetch v{scope.api_version} answered as v8")
        visible = _describable(scope, [topic.name for topic in answer.topics])
        return rebuild_offset_fetch_response(
            answer, topics=tuple(topic for topic in answer.topics if topic.name in visible)
        )
    denied = {name for name in names if not outcome.allows(TOPIC, name)}
    if not denied:
        return await scope.relay()
    cls: type[OffsetFetchResponse] = response_schema(ApiKey.OFFSET_FETCH, scope.api_version)
    refused = refused_topics(_refused_fetch, cls, indexed(t for t in named if t.name in denied), TOPIC_DENIED)
    allowed = tuple(t for t in named if t.name not in denied)

    def merged(answer: OffsetFetchResponse) -> Reply:
        if isinstance(answer, _GROUPED_ANSWERS):  # decoded at the request's version: v8+ went to the per-group path
            raise UpstreamProtocolError(f"OffsetFetch v{scope.api_version} answered as v8")
        return rebuild_offset_fetch_response(answer, topics=answer.topics + refused)

    return await with_refused(
        scope,
        OFFSET_FETCH,
        rebuild_offset_fetch_request(request, topics=allowed) if allowed else None,
        own=lambda: offset_fetch_response(cls, throttle_time=NO_THROTTLE, topics=refused, error_code=ErrorCode.none),
        merged=merged,
    )


async def _offset_fetch_groups(scope: ProxyScope, request: Any) -> Reply:
    """v8+: several groups, each decided alone (DESCRIBE on the group, then on its named topics)."""
    cls: type[OffsetFetchResponse] = response_schema(ApiKey.OFFSET_FETCH, scope.api_version)
    refused_groups: list[OffsetFetchResponseGroup] = []
    asked: list[Any] = []
    refused_topics_of: dict[str, tuple[OffsetFetchResponseTopics, ...]] = {}
    all_topics: set[str] = set()
    outcomes: dict[str, RequestAuthorization] = {}  # per group: what the broker's answer is checked against
    for group in request.groups:
        names = [topic.name for topic in group.topics] if group.topics is not None else []
        outcome = scope.authorize(REQUIREMENTS[ApiKey.OFFSET_FETCH], {GROUP: [group.group_id], TOPIC: names})
        outcomes[group.group_id] = outcome
        if not outcome.allows(GROUP, group.group_id):
            denial = wire_error(GROUP_DENIED)
            refused_groups.append(
                offset_fetch_response_group(cls, group_id=group.group_id, topics=(), error_code=denial)
            )
            continue
        if group.topics is None:
            all_topics.add(group.group_id)
            asked.append(group)
            continue
        denied = {name for name in names if not outcome.allows(TOPIC, name)}
        refused = [topic for topic in group.topics if topic.name in denied]
        refused_topics_of[group.group_id] = refused_topics(_refused_fetch_grouped, cls, indexed(refused), TOPIC_DENIED)
        asked.append(
            rebuild_offset_fetch_request_group(group, topics=tuple(t for t in group.topics if t.name not in denied))
        )
    answered: list[OffsetFetchResponseGroup] = []
    if asked:
        answer: OffsetFetchResponse = (
            await scope.forward(rebuild_offset_fetch_request(request, groups=tuple(asked)))
        ).body(OFFSET_FETCH)
        if not isinstance(answer, _GROUPED_ANSWERS):  # decoded at the request's version, v8+: per group
            raise UpstreamProtocolError(f"OffsetFetch v{scope.api_version} answered as {type(answer).__name__}")
        for group in answer.groups:
            topics: tuple[OffsetFetchResponseTopics, ...] = group.topics
            asked_with = outcomes.get(group.group_id)
            if asked_with is not None:  # passthrough: the broker's refusals of the group, or of its topics
                noted(scope, asked_with, GROUP, [(group.group_id, int(group.error_code))])
                noted(scope, asked_with, TOPIC, ((t.name, int(p.error_code)) for t in topics for p in t.partitions))
            if group.group_id in all_topics:
                visible = _describable(scope, [topic.name for topic in topics])
                topics = tuple(topic for topic in topics if topic.name in visible)
            answered.append(
                rebuild_offset_fetch_response_group(group, topics=topics + refused_topics_of.get(group.group_id, ()))
            )
    return offset_fetch_response(cls, throttle_time=NO_THROTTLE, groups=tuple(answered + refused_groups))


def _describable(scope: ProxyScope, names: list[str]) -> set[str]:
    outcome = scope.authorize(REQUIREMENTS[ApiKey.OFFSET_FETCH], {TOPIC: names})
    return {name for name in names if outcome.allows(TOPIC, name)}
