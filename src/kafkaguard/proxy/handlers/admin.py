"""The administrative topic and config APIs (CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords,
DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, OffsetForLeaderEpoch): authorized as ``KafkaApis`` /
``ControllerApis`` do (Kafka 3.9), the allowed part forwarded, the refused items merged into the upstream's answer.

* CreateTopics: CREATE on the cluster, else on each topic (refused: TOPIC_AUTHORIZATION_FAILED, "Authorization
  failed."); a name given twice is INVALID_REQUEST "Duplicate topic name." and ``__cluster_metadata`` is never
  created, neither authorized. A created topic's configs, partition count and replication factor (v5+) are shown
  only to a caller with DESCRIBE_CONFIGS on it (else topic_config_error_code TOPIC_AUTHORIZATION_FAILED, -1, -1, no
  configs), as ``server.handlers.topics``;
* DeleteTopics (by name): DELETE on the cluster, else DESCRIBE and DELETE on each topic. A topic the caller may not
  describe is TOPIC_AUTHORIZATION_FAILED whether it exists or not; one it may describe but not delete is
  UNKNOWN_TOPIC_OR_PARTITION when absent (the proxy asks the upstream's Metadata, without auto-creation) and
  TOPIC_AUTHORIZATION_FAILED otherwise; duplicates are INVALID_REQUEST (messages: the error's default text). v6 may
  name topics by id: each resolved to its name first (UNKNOWN_TOPIC_ID when none), then authorized by that name
  (``_delete_topics_v6``);
* CreatePartitions: ALTER on each topic (TOPIC_AUTHORIZATION_FAILED, no message; duplicates INVALID_REQUEST);
* DeleteRecords: DELETE on each topic (its partitions TOPIC_AUTHORIZATION_FAILED, low watermark -1);
* DescribeConfigs / AlterConfigs / IncrementalAlterConfigs: DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic of a
  TOPIC resource, on the cluster for BROKER, BROKER_LOGGER and CLIENT_METRICS (refused: TOPIC_ /
  CLUSTER_AUTHORIZATION_FAILED with the default text; no text for IncrementalAlterConfigs' BROKER_LOGGER). A
  resource type Kafka 3.9 does not know for the API (GROUP; BROKER_LOGGER for the legacy AlterConfigs) is never
  forwarded: DescribeConfigs then fails whole with INVALID_REQUEST (Kafka's ``InvalidRequestException``), the
  alter APIs answer that resource INVALID_REQUEST "Unknown resource type N" (``ConfigAdminManager.preprocess``);
* OffsetForLeaderEpoch: a consumer's (replica id -1, or none before v3) needs CLUSTER_ACTION on the cluster, else
  DESCRIBE on each topic (refused partitions: TOPIC_AUTHORIZATION_FAILED, leader epoch -1, end offset -1); a
  follower's (replica id >= 0) is refused whole with CLUSTER_AUTHORIZATION_FAILED: the proxy never serves
  replication.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol
from uuid import UUID

from kio.schema.errors import ErrorCode
from kio.static.protocol import Entity

from kafkaguard.apis.denials import CREATE_DENIED
from kafkaguard.authorizer.requests import REQUIREMENTS, ApiKey, Check, Requirement
from kafkaguard.model import (
    CLUSTER_NAME,
    AclOperation,
    AuthorizationResult,
    ItemError,
    KafkaErrorCode,
    ResourceType,
)
from kafkaguard.protocol.build import NO_THROTTLE, build_request, has_field, nested, rebuild_request
from kafkaguard.protocol.codec import request_schema, response_schema
from kafkaguard.protocol.replies import Reply
from kafkaguard.protocol.routes import route, routes
from kafkaguard.protocol.wire_errors import error_fields, wire_error
from kafkaguard.proxy.broker_refusals import noted
from kafkaguard.proxy.builders import (
    CreatableTopicResult,
    DeletableTopicResult,
    DeleteRecordsTopicResult,
    DescribeConfigsResult,
    OffsetForLeaderTopicResult,
    alter_configs_alter_configs_resource_response,
    alter_configs_response,
    creatable_topic_result,
    create_partitions_response,
    create_partitions_topic_result,
    create_topics_response,
    deletable_topic_result,
    delete_records_partition_result,
    delete_records_response,
    delete_records_topic_result,
    delete_topics_response,
    describe_configs_response,
    describe_configs_result,
    incremental_alter_configs_alter_configs_resource_response,
    incremental_alter_configs_response,
    offset_for_leader_epoch_epoch_end_offset,
    offset_for_leader_epoch_response,
    offset_for_leader_topic_result,
    rebuild_alter_configs_response,
    rebuild_creatable_topic_result,
    rebuild_create_partitions_request,
    rebuild_create_partitions_response,
    rebuild_create_topics_request,
    rebuild_create_topics_response,
    rebuild_delete_records_request,
    rebuild_delete_records_response,
    rebuild_delete_topics_request,
    rebuild_delete_topics_response,
    rebuild_describe_configs_request,
    rebuild_describe_configs_response,
    rebuild_incremental_alter_configs_response,
    rebuild_offset_for_leader_epoch_request,
    rebuild_offset_for_leader_epoch_response,
)
from kafkaguard.proxy.handlers.by_id import topic_names
from kafkaguard.proxy.messages import (
    ALTER_CONFIGS,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_RECORDS,
    DELETE_TOPICS,
    DESCRIBE_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS,
    OFFSET_FOR_LEADER_EPOCH,
    AlterConfigsRequest,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafkaguard.proxy.refusals import CLUSTER_DENIED, TOPIC_DENIED, denied_topics, named, refused_topics, with_refused
from kafkaguard.proxy.scope import ProxyHandler, ProxyScope
from kafkaguard.service.topics import CLUSTER_METADATA_PROHIBITED, CLUSTER_METADATA_TOPIC, DUPLICATE_NAME
from kafkaguard.store.uuids import ZERO_UUID

TOPIC, CLUSTER = ResourceType.TOPIC, ResourceType.CLUSTER
_DUPLICATE = ItemError(KafkaErrorCode.INVALID_REQUEST, DUPLICATE_NAME)
_UNKNOWN_TOPIC = ItemError(KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
_UNKNOWN_ID = ItemError(KafkaErrorCode.UNKNOWN_TOPIC_ID)
_NEITHER = ItemError(KafkaErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified.")
_BOTH = ItemError(KafkaErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id.")
_DUPLICATE_ID = ItemError(KafkaErrorCode.INVALID_REQUEST, "Duplicate topic id.")
#: DeleteTopics names topics by id from v6 (KIP-516).
_DELETE_BY_ID_FROM = 6
#: The Metadata version the proxy asks the upstream which topics exist (every Kafka from 1.0 to 4.x serves it).
_METADATA_VERSION = 4


def _unique(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _split_duplicates(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """(names given once, names given more than once), each in request order (Kafka answers the latter
    INVALID_REQUEST without authorizing them)."""
    counts = Counter(names)
    return [n for n in counts if counts[n] == 1], [n for n in counts if counts[n] > 1]


def _allowed(scope: ProxyScope, requirement: Requirement, resource_type: ResourceType, names: list[str]) -> set[str]:
    """The ``names`` this request's ``requirement`` allows (one audited decision per check)."""
    outcome = scope.authorize(requirement, {resource_type: names})
    return {name for name in names if outcome.allows(resource_type, name)}


# -------------------------------------------------------------------------------------------------- CreateTopics


async def create_topics(scope: ProxyScope, request: CreateTopicsRequest) -> Reply:
    cls: type[CreateTopicsResponse] = response_schema(ApiKey.CREATE_TOPICS, scope.api_version)
    once, duplicates = _split_duplicates([topic.name for topic in request.topics])
    candidates = [name for name in once if name != CLUSTER_METADATA_TOPIC]
    outcome = scope.authorize(REQUIREMENTS[ApiKey.CREATE_TOPICS], {TOPIC: candidates})
    creatable = {name for name in candidates if outcome.allows(TOPIC, name)}

    def refusal(name: str, error: ItemError) -> CreatableTopicResult:
        return creatable_topic_result(
            cls,
            name=name,
            topic_id=ZERO_UUID,
            **error_fields(error),
            topic_config_error_code=ErrorCode.none.value,
            num_partitions=-1,
            replication_factor=-1,
            configs=(),
        )

    refused = [refusal(name, _DUPLICATE) for name in duplicates]
    for name in once:
        if name == CLUSTER_METADATA_TOPIC:
            refused.append(refusal(name, ItemError(KafkaErrorCode.INVALID_REQUEST, CLUSTER_METADATA_PROHIBITED)))
        elif name not in creatable:
            refused.append(refusal(name, CREATE_DENIED))
    shows_configs = has_field(nested(cls, "CreatableTopicResult"), "configs")
    # in passthrough the answer is read for the broker's own refusals (``broker_refusals``): CreateTopics is rare
    if not refused and not shows_configs and not scope.upstream.as_client:
        return await scope.relay()
    allowed = tuple(topic for topic in request.topics if topic.name in creatable)
    if not allowed:
        return create_topics_response(cls, throttle_time=NO_THROTTLE, topics=tuple(refused))
    forwarded = await scope.forward(rebuild_create_topics_request(request, topics=allowed) if refused else None)
    answer: CreateTopicsResponse = forwarded.body(CREATE_TOPICS)
    results: Sequence[CreatableTopicResult] = answer.topics
    noted(scope, outcome, TOPIC, ((result.name, int(result.error_code)) for result in results))
    if shows_configs:
        results = _hide_configs(scope, results)
    return rebuild_create_topics_response(answer, topics=tuple(results) + tuple(refused))


def _hide_configs(scope: ProxyScope, results: Sequence[CreatableTopicResult]) -> tuple[CreatableTopicResult, ...]:
    """The upstream's v5+ results, a created topic's configs shown only to a caller with DESCRIBE_CONFIGS on it.

    The upstream computed them for the proxy's own principal; Kafka (``ReplicationControlManager.createTopic``)
    answers a caller who may not describe the configs topic_config_error_code TOPIC_AUTHORIZATION_FAILED, -1
    partitions and replication factor, and no configs."""
    created = _unique(result.name for result in results if result.error_code == ErrorCode.none)
    describable = _allowed(scope, REQUIREMENTS[ApiKey.DESCRIBE_CONFIGS], TOPIC, created) if created else set()
    return tuple(
        result
        if result.error_code != ErrorCode.none or result.name in describable
        else rebuild_creatable_topic_result(
            result,
            topic_config_error_code=wire_error(TOPIC_DENIED).value,
            num_partitions=-1,
            replication_factor=-1,
            configs=(),
        )
        for result in results
    )


# -------------------------------------------------------------------------------------------------- DeleteTopics


async def delete_topics(scope: ProxyScope, request: DeleteTopicsRequest) -> Reply:
    if scope.api_version >= _DELETE_BY_ID_FROM:
        return await _delete_topics_v6(scope, request)
    cls: type[DeleteTopicsResponse] = response_schema(ApiKey.DELETE_TOPICS, scope.api_version)
    once, duplicates = _split_duplicates(list(getattr(request, "topic_names")))  # noqa: B009 - v1-v5
    outcome = scope.authorize(REQUIREMENTS[ApiKey.DELETE_TOPICS], {TOPIC: once})
    deletable = [name for name in once if outcome.allows(TOPIC, name)]
    describable = _describable(outcome)
    described_only = [name for name in once if name not in deletable and name in describable]
    existing = await _existing_topics(scope, described_only) if described_only else set()

    def result(name: str, error: ItemError) -> DeletableTopicResult:  # v1-v5 results have no topic_id
        return deletable_topic_result(cls, name=name, **error_fields(error, default_text=True))

    refused = [result(name, _DUPLICATE) for name in duplicates]
    for name in once:
        if name in deletable:
            continue
        absent = name in described_only and name not in existing
        refused.append(result(name, _UNKNOWN_TOPIC if absent else TOPIC_DENIED))
    if not refused:
        return await scope.relay()
    asking = rebuild_delete_topics_request(request, topic_names=tuple(deletable)) if deletable else None
    return await _deleted(scope, cls, asking, tuple(refused))


async def _deleted(
    scope: ProxyScope,
    cls: type[DeleteTopicsResponse],
    asking: DeleteTopicsRequest | None,
    refused: tuple[DeletableTopicResult, ...],
) -> Reply:
    """The answer to a DeleteTopics of which ``asking`` goes upstream: its results, then the ``refused``."""
    return await with_refused(
        scope,
        DELETE_TOPICS,
        asking,
        own=lambda: delete_topics_response(cls, throttle_time=NO_THROTTLE, responses=refused),
        merged=lambda answer: rebuild_delete_topics_response(answer, responses=answer.responses + refused),
    )


def _describable(outcome: Any) -> set[str]:
    """The topics the DeleteTopics check found describable. Kafka (``ControllerApis.deleteTopics``) checks DESCRIBE,
    then existence, then DELETE: a missing topic the caller may describe is UNKNOWN_TOPIC_OR_PARTITION even without
    DELETE. The DESCRIBE results are the request's own."""
    return {
        action.resource_pattern.name
        for action, result in outcome.decisive
        if action.operation is AclOperation.DESCRIBE
        and action.resource_pattern.resource_type is TOPIC
        and result is AuthorizationResult.ALLOWED
    }


async def _delete_topics_v6(scope: ProxyScope, request: Any) -> Reply:
    """DeleteTopics v6 (topics by name or by id), as ``ControllerApis.deleteTopics`` (Kafka 3.9):

    * neither name nor id: INVALID_REQUEST "Neither topic name nor id were specified."; both: INVALID_REQUEST "You
      may not specify both topic name and topic id."; a name or an id given twice: "Duplicate topic name." / "Duplicate
      topic id." (names as v1-v5);
    * each id is resolved to its name (``controller.findTopicNames``; here ``topic_ids``, asked of the upstream afresh:
      a deletion is rare and must not act on a stale name): none is UNKNOWN_TOPIC_ID (null name); then the names are
      authorized as by-name deletions are: not deletable is TOPIC_AUTHORIZATION_FAILED, with the name when the caller
      may describe the topic, with a null name when not (Kafka "refrains from commenting", so the id's name is not
      revealed); a name is answered as in v1-v5.

    Only the deletable entries go upstream, each as the client gave it (by id or by name): the rebuilt request names
    nothing more, and an id the upstream no longer knows is its own UNKNOWN_TOPIC_ID."""
    cls: type[DeleteTopicsResponse] = response_schema(ApiKey.DELETE_TOPICS, scope.api_version)

    def result(name: str | None, topic_id: UUID, error: ItemError) -> DeletableTopicResult:
        return deletable_topic_result(cls, name=name, topic_id=topic_id, **error_fields(error, default_text=True))

    refused: list[DeletableTopicResult] = []
    by_name: list[Any] = []
    by_id: list[Any] = []
    for topic in request.topics:
        topic_id = topic.topic_id if topic.topic_id is not None else ZERO_UUID
        if topic.name is None and topic_id == ZERO_UUID:
            refused.append(result(None, ZERO_UUID, _NEITHER))
        elif topic.name is not None and topic_id != ZERO_UUID:
            refused.append(result(topic.name, topic_id, _BOTH))
        else:
            (by_id if topic.name is None else by_name).append(topic)
    names_once, names_twice = _split_duplicates([str(t.name) for t in by_name])
    ids_once = [i for i, n in Counter(t.topic_id for t in by_id).items() if n == 1]
    ids_twice = [i for i, n in Counter(t.topic_id for t in by_id).items() if n > 1]
    refused += [result(name, ZERO_UUID, _DUPLICATE) for name in names_twice]
    refused += [result(None, i, _DUPLICATE_ID) for i in ids_twice]
    named = await topic_names(scope, ids_once, fresh=True) if ids_once else {}
    refused += [result(None, i, _UNKNOWN_ID) for i in ids_once if i not in named]
    checked = list(dict.fromkeys([*names_once, *named.values()]))
    outcome = scope.authorize(REQUIREMENTS[ApiKey.DELETE_TOPICS], {TOPIC: checked})
    describable = _describable(outcome)
    deletable = {name for name in checked if outcome.allows(TOPIC, name)}
    for i, name in named.items():
        if name not in deletable:
            refused.append(result(name if name in describable else None, i, TOPIC_DENIED))
    described_only = [name for name in names_once if name not in deletable and name in describable]
    existing = await _existing_topics(scope, described_only) if described_only else set()
    for name in names_once:
        if name not in deletable:
            absent = name in described_only and name not in existing
            refused.append(result(name, ZERO_UUID, _UNKNOWN_TOPIC if absent else TOPIC_DENIED))
    if not refused:
        return await scope.relay()
    allowed = tuple(
        t
        for t in request.topics
        if (t.name is None and t.topic_id in named and named[t.topic_id] in deletable)
        or (t.name is not None and t.name in names_once and t.name in deletable)
    )
    return await _deleted(
        scope, cls, rebuild_delete_topics_request(request, topics=allowed) if allowed else None, tuple(refused)
    )


async def _existing_topics(scope: ProxyScope, names: list[str]) -> set[str]:
    """Which of ``names`` exist upstream: the proxy's own Metadata request, never creating a topic."""
    schema = request_schema(ApiKey.METADATA, _METADATA_VERSION)
    topic_cls = nested(schema, "MetadataRequestTopic")
    topics = tuple(build_request(topic_cls, name=name) for name in names)
    body = build_request(schema, topics=topics, allow_auto_topic_creation=False)
    await scope.outbox.flushed()  # the proxy's own request waits for the answers relayed before it (in order)
    answer = await scope.upstream.call(ApiKey.METADATA, _METADATA_VERSION, body)
    return {t.name for t in answer.topics if t.error_code != ErrorCode.unknown_topic_or_partition}


# ---------------------------------------------------------------------------------------------- CreatePartitions


async def create_partitions(scope: ProxyScope, request: CreatePartitionsRequest) -> Reply:
    cls: type[CreatePartitionsResponse] = response_schema(ApiKey.CREATE_PARTITIONS, scope.api_version)
    once, duplicates = _split_duplicates([topic.name for topic in request.topics])
    alterable = _allowed(scope, REQUIREMENTS[ApiKey.CREATE_PARTITIONS], TOPIC, once)
    refused = tuple(
        create_partitions_topic_result(cls, name=name, **error_fields(_DUPLICATE)) for name in duplicates
    ) + tuple(
        create_partitions_topic_result(cls, name=name, **error_fields(TOPIC_DENIED))
        for name in once
        if name not in alterable
    )
    if not refused:
        return await scope.relay()
    allowed = tuple(topic for topic in request.topics if topic.name in alterable)
    return await with_refused(
        scope,
        CREATE_PARTITIONS,
        rebuild_create_partitions_request(request, topics=allowed) if allowed else None,
        own=lambda: create_partitions_response(cls, throttle_time=NO_THROTTLE, results=refused),
        # Kafka lists its refusals first
        merged=lambda answer: rebuild_create_partitions_response(answer, results=refused + answer.results),
    )


# ------------------------------------------------------------------------------------------------- DeleteRecords


def _refused_records(
    cls: type[DeleteRecordsResponse], name: str, indexes: Iterable[int], error: ItemError
) -> DeleteRecordsTopicResult:
    partitions = tuple(
        delete_records_partition_result(cls, partition_index=index, low_watermark=-1, error_code=wire_error(error))
        for index in indexes
    )
    return delete_records_topic_result(cls, name=name, partitions=partitions)


async def delete_records(scope: ProxyScope, request: DeleteRecordsRequest) -> Reply:
    denied = denied_topics(scope, REQUIREMENTS[ApiKey.DELETE_RECORDS], (t.name for t in request.topics))
    if not denied:
        return await scope.relay()
    cls: type[DeleteRecordsResponse] = response_schema(ApiKey.DELETE_RECORDS, scope.api_version)
    refused = refused_topics(_refused_records, cls, named(t for t in request.topics if t.name in denied), TOPIC_DENIED)
    allowed = tuple(t for t in request.topics if t.name not in denied)
    return await with_refused(
        scope,
        DELETE_RECORDS,
        rebuild_delete_records_request(request, topics=allowed) if allowed else None,
        own=lambda: delete_records_response(cls, throttle_time=NO_THROTTLE, topics=refused),
        merged=lambda answer: rebuild_delete_records_response(answer, topics=answer.topics + refused),
    )


# ------------------------------------------------------------------------------- DescribeConfigs, AlterConfigs …

_TOPIC_TYPE, _BROKER_TYPE, _BROKER_LOGGER_TYPE, _CLIENT_METRICS_TYPE = 2, 4, 8, 16
#: Kafka 3.9's ConfigResource.Type ids each config API knows → the resource it authorizes (a cluster-wide type: the
#: cluster). Measured on Kafka 3.9: the legacy AlterConfigs answers BROKER_LOGGER as an unknown type, and GROUP (32)
#: is unknown to all three.
_DESCRIBABLE_TYPES = {
    _TOPIC_TYPE: TOPIC,
    _BROKER_TYPE: CLUSTER,
    _BROKER_LOGGER_TYPE: CLUSTER,
    _CLIENT_METRICS_TYPE: CLUSTER,
}
_ALTERABLE_TYPES = {
    ApiKey.ALTER_CONFIGS: {_TOPIC_TYPE: TOPIC, _BROKER_TYPE: CLUSTER, _CLIENT_METRICS_TYPE: CLUSTER},
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _DESCRIBABLE_TYPES,
}
_CONFIG_DENIED = {TOPIC: TOPIC_DENIED, CLUSTER: CLUSTER_DENIED}


def _config_requirement(name: str, operation: AclOperation) -> Requirement:
    checks = (Check(operation, TOPIC), Check(operation, CLUSTER))
    return Requirement(name, per_resource=checks, denial_error="TOPIC_AUTHORIZATION_FAILED")


_CONFIG_REQUIREMENTS = {
    ApiKey.DESCRIBE_CONFIGS: _config_requirement("DescribeConfigs", AclOperation.DESCRIBE_CONFIGS),
    ApiKey.ALTER_CONFIGS: _config_requirement("AlterConfigs", AclOperation.ALTER_CONFIGS),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _config_requirement("IncrementalAlterConfigs", AclOperation.ALTER_CONFIGS),
}


def _config_decisions(scope: ProxyScope, types: Mapping[int, ResourceType], resources: Sequence[Any]) -> list[bool]:
    """Per config resource: whether this API's check allows it (on the topic, or on the cluster for a cluster-wide
    type; never for a type missing from ``types``). One audited decision per topic, one for the cluster."""
    targets: list[tuple[ResourceType, str] | None] = []
    for resource in resources:
        rtype = types.get(int(resource.resource_type))
        targets.append(None if rtype is None else (rtype, CLUSTER_NAME if rtype is CLUSTER else resource.resource_name))
    named: dict[ResourceType, list[str]] = {}
    for target in targets:
        if target is not None:
            named.setdefault(target[0], []).append(target[1])
    outcome = scope.authorize(_CONFIG_REQUIREMENTS[scope.api_key], {t: _unique(n) for t, n in named.items()})
    return [target is not None and outcome.allows(*target) for target in targets]


async def describe_configs(scope: ProxyScope, request: DescribeConfigsRequest) -> Reply:
    cls: type[DescribeConfigsResponse] = response_schema(ApiKey.DESCRIBE_CONFIGS, scope.api_version)

    def result(resource: Any, error: ItemError) -> DescribeConfigsResult:
        return describe_configs_result(
            cls,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
            configs=(),
            **error_fields(error, default_text=True),
        )

    resources: Sequence[Any] = request.resources
    if any(int(r.resource_type) not in _DESCRIBABLE_TYPES for r in resources):  # ConfigHelper: InvalidRequestException
        invalid = ItemError(KafkaErrorCode.INVALID_REQUEST)
        return describe_configs_response(
            cls, throttle_time=NO_THROTTLE, results=tuple(result(r, invalid) for r in resources)
        )
    allows = _config_decisions(scope, _DESCRIBABLE_TYPES, resources)
    if all(allows):
        return await scope.relay()
    refused = tuple(
        result(resource, _CONFIG_DENIED[_DESCRIBABLE_TYPES[int(resource.resource_type)]])
        for resource, ok in zip(resources, allows, strict=True)
        if not ok
    )
    allowed = tuple(resource for resource, ok in zip(resources, allows, strict=True) if ok)
    return await with_refused(
        scope,
        DESCRIBE_CONFIGS,
        rebuild_describe_configs_request(request, resources=allowed) if allowed else None,
        own=lambda: describe_configs_response(cls, throttle_time=NO_THROTTLE, results=refused),
        merged=lambda answer: rebuild_describe_configs_response(answer, results=answer.results + refused),
    )


async def alter_configs(scope: ProxyScope, request: AlterConfigsRequest) -> Reply:
    return await _alter_configs(scope, request)


async def incremental_alter_configs(scope: ProxyScope, request: IncrementalAlterConfigsRequest) -> Reply:
    return await _alter_configs(scope, request)


async def _alter_configs(scope: ProxyScope, request: Any) -> Reply:
    cls = response_schema(scope.api_key, scope.api_version)
    types = _ALTERABLE_TYPES[scope.api_key]
    # the two APIs' results have the same fields; each is built by its API's own builder
    builder = (
        alter_configs_alter_configs_resource_response
        if scope.api_key is ApiKey.ALTER_CONFIGS
        else incremental_alter_configs_alter_configs_resource_response
    )

    def result(resource: Any, error: ItemError, *, default_text: bool = True) -> Entity:
        return builder(
            cls,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
            **error_fields(error, default_text=default_text),
        )

    resources: Sequence[Any] = request.resources
    refused: list[Any] = []
    allowed: list[Any] = []
    for resource, ok in zip(resources, _config_decisions(scope, types, resources), strict=True):
        type_id = int(resource.resource_type)
        if type_id not in types:  # the broker's ConfigAdminManager.preprocess answers it; the others proceed
            refused.append(
                result(resource, ItemError(KafkaErrorCode.INVALID_REQUEST, f"Unknown resource type {type_id}"))
            )
        elif ok:
            allowed.append(resource)
        else:
            # BROKER_LOGGER is refused by the broker itself (a ClusterAuthorizationException through
            # ApiError.fromThrowable: no message); the others by the controller (ApiError(error): its default text).
            refused.append(
                result(resource, _CONFIG_DENIED[types[type_id]], default_text=type_id != _BROKER_LOGGER_TYPE)
            )
    if not refused:
        return await scope.relay()
    # the two APIs' requests have the same fields: ``request`` is one of either (typed ``Any``), changed as itself
    asking = rebuild_request(request, resources=tuple(allowed)) if allowed else None
    refusals = tuple(refused)
    # Kafka lists its refusals first; the two APIs' answers have the same fields, each read as its own API's
    if scope.api_key is ApiKey.ALTER_CONFIGS:
        return await with_refused(
            scope,
            ALTER_CONFIGS,
            asking,
            own=lambda: alter_configs_response(cls, throttle_time=NO_THROTTLE, responses=refusals),
            merged=lambda answer: rebuild_alter_configs_response(answer, responses=refusals + answer.responses),
        )
    return await with_refused(
        scope,
        INCREMENTAL_ALTER_CONFIGS,
        asking,
        own=lambda: incremental_alter_configs_response(cls, throttle_time=NO_THROTTLE, responses=refusals),
        merged=lambda answer: rebuild_incremental_alter_configs_response(answer, responses=refusals + answer.responses),
    )


# ------------------------------------------------------------------------------------------ OffsetForLeaderEpoch

#: KafkaApis.handleOffsetForLeaderEpochRequest: CLUSTER_ACTION on the cluster (a broker) answers every topic;
#: otherwise DESCRIBE on each topic (KIP-320's consumers).
_OFFSET_FOR_LEADER_EPOCH = Requirement(
    "OffsetForLeaderEpoch",
    cluster_override=Check(AclOperation.CLUSTER_ACTION, CLUSTER),
    per_resource=(Check(AclOperation.DESCRIBE, TOPIC),),
    denial_error="TOPIC_AUTHORIZATION_FAILED",
)


class _EpochPartition(Protocol):
    @property
    def partition(self) -> int: ...


class _EpochTopic(Protocol):
    """An OffsetForLeaderEpoch request's topic, in every version offered."""

    @property
    def topic(self) -> str: ...

    @property
    def partitions(self) -> Sequence[_EpochPartition]: ...


def _refused_epochs(
    cls: type[OffsetForLeaderEpochResponse], topics: Iterable[_EpochTopic], error: ItemError
) -> tuple[OffsetForLeaderTopicResult, ...]:
    def topic(
        cls: type[OffsetForLeaderEpochResponse], name: str, indexes: Iterable[int], error: ItemError
    ) -> OffsetForLeaderTopicResult:
        partitions = tuple(
            offset_for_leader_epoch_epoch_end_offset(
                cls, partition=index, error_code=wire_error(error), leader_epoch=-1, end_offset=-1
            )
            for index in indexes
        )
        return offset_for_leader_topic_result(cls, topic=name, partitions=partitions)

    return refused_topics(topic, cls, ((t.topic, [p.partition for p in t.partitions]) for t in topics), error)


async def offset_for_leader_epoch(scope: ProxyScope, request: OffsetForLeaderEpochRequest) -> Reply:
    cls: type[OffsetForLeaderEpochResponse] = response_schema(ApiKey.OFFSET_FOR_LEADER_EPOCH, scope.api_version)
    replica_id = int(getattr(request, "replica_id", -1))
    if replica_id >= 0:  # a follower: the proxy never serves replication
        every = _refused_epochs(cls, request.topics, CLUSTER_DENIED)
        return offset_for_leader_epoch_response(cls, throttle_time=NO_THROTTLE, topics=every)
    denied = denied_topics(scope, _OFFSET_FOR_LEADER_EPOCH, (t.topic for t in request.topics))
    if not denied:
        return await scope.relay()
    refused = _refused_epochs(cls, [t for t in request.topics if t.topic in denied], TOPIC_DENIED)
    allowed = tuple(t for t in request.topics if t.topic not in denied)
    return await with_refused(
        scope,
        OFFSET_FOR_LEADER_EPOCH,
        rebuild_offset_for_leader_epoch_request(request, topics=allowed) if allowed else None,
        own=lambda: offset_for_leader_epoch_response(cls, throttle_time=NO_THROTTLE, topics=refused),
        merged=lambda answer: rebuild_offset_for_leader_epoch_response(answer, topics=answer.topics + refused),
    )


#: API → handler (each checked against its API's request union); merged into ``proxy.dispatch.HANDLERS``.
HANDLERS: dict[ApiKey, ProxyHandler] = routes(
    route(CREATE_TOPICS, create_topics),
    route(DELETE_TOPICS, delete_topics),
    route(CREATE_PARTITIONS, create_partitions),
    route(DELETE_RECORDS, delete_records),
    route(DESCRIBE_CONFIGS, describe_configs),
    route(ALTER_CONFIGS, alter_configs),
    route(INCREMENTAL_ALTER_CONFIGS, incremental_alter_configs),
    route(OFFSET_FOR_LEADER_EPOCH, offset_for_leader_epoch),
)
