"""Metadata (3), CreateTopics (19) and DeleteTopics (20) over the topic catalog (SEMANTICS.md §13, §16.1).

kafkaguard is the only broker and leads every partition; it stores no message data. Metadata needs DESCRIBE per
topic (explicitly named unauthorized topics get TOPIC_AUTHORIZATION_FAILED, unauthorized topics are silently left
out of "all topics"); auto-creation of a missing topic needs AUTO_CREATE (KIP-755) on the cluster or the topic and
``auto_create_topics`` on; CreateTopics needs CREATE on the cluster or the topic; DeleteTopics DELETE on the
cluster, or DESCRIBE and DELETE on the topic.

A topic CreateTopics or DeleteTopics refuses for authorization is recorded in the management history
(``service.refused``): one ``topic.created``/``topic.deleted`` event per refused topic with the error answered for it
(a deletion by id names the topic and its id), bounded per request and per principal; the answer is the same.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from kafkaguard.apis.denials import CREATE_DENIED
from kafkaguard.apis.operations import OPERATIONS_NOT_REQUESTED, cluster_operations
from kafkaguard.authorizer.requests import METADATA_AUTO_CREATE, REQUIREMENTS, ApiKey, authorized_operations
from kafkaguard.model import AclOperation, AuthorizationResult, ItemError, KafkaErrorCode, ResourceType
from kafkaguard.protocol.build import NO_THROTTLE, has_field, nested
from kafkaguard.protocol.builders import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    DeletableTopicResult,
    MetadataResponseTopic,
    creatable_topic_configs,
    creatable_topic_result,
    create_topics_response,
    deletable_topic_result,
    delete_topics_response,
    metadata_response,
    metadata_response_broker,
    metadata_response_partition,
    metadata_response_topic,
)
from kafkaguard.protocol.codec import response_schema
from kafkaguard.protocol.messages import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafkaguard.protocol.scope import RequestScope
from kafkaguard.protocol.wire_errors import ErrorFields, error_fields, wire_error
from kafkaguard.service import NewTopic, TopicDescription
from kafkaguard.service.events import topic_event
from kafkaguard.store import TopicRecord
from kafkaguard.store.uuids import ZERO_UUID

TOPIC = ResourceType.TOPIC
#: The first Metadata version that looks topics up by id (and whose response may carry a null topic name).
TOPIC_IDS_SINCE = 12
#: Kafka's DYNAMIC_TOPIC_CONFIG config source.
DYNAMIC_TOPIC_CONFIG = 1


def _is_missing(description: TopicDescription) -> bool:
    return description.error is not None and description.error.code is KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _unique(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


# --------------------------------------------------------------------------------------------------- Metadata


async def metadata(scope: RequestScope, request: MetadataRequest) -> MetadataResponse:
    cls: type[MetadataResponse] = response_schema(ApiKey.METADATA, scope.api_version)
    topics_service = scope.services.topics
    include_ops = bool(getattr(request, "include_topic_authorized_operations", False))

    def topic_entry(record: TopicRecord, error: ErrorCode = ErrorCode.none) -> MetadataResponseTopic:
        partitions = tuple(
            metadata_response_partition(
                cls,
                error_code=ErrorCode.none,
                partition_index=index,
                leader_id=scope.broker.node_id,
                leader_epoch=0,
                replica_nodes=(scope.broker.node_id,),
                isr_nodes=(scope.broker.node_id,),
                offline_replicas=(),
            )
            for index in range(record.num_partitions)
        )
        operations = (
            authorized_operations(scope.snapshot, scope.context, TOPIC, record.name)
            if include_ops
            else OPERATIONS_NOT_REQUESTED
        )
        return metadata_response_topic(
            cls,
            error_code=error,
            name=record.name,
            topic_id=record.topic_id,
            is_internal=False,
            partitions=partitions,
            topic_authorized_operations=operations,
        )

    def error_entry(
        name: str | None, error: ErrorCode, topic_id: uuid.UUID = ZERO_UUID, operations: int = OPERATIONS_NOT_REQUESTED
    ) -> MetadataResponseTopic:
        return metadata_response_topic(
            cls,
            error_code=error,
            name=name,
            topic_id=topic_id,
            is_internal=False,
            partitions=(),
            topic_authorized_operations=operations,
        )

    entries: list[MetadataResponseTopic] = []
    if request.topics is None:
        records = [d.record for d in topics_service.describe(None) if d.record is not None]
        outcome = scope.authorize(REQUIREMENTS[ApiKey.METADATA], {TOPIC: [r.name for r in records]})
        entries = [topic_entry(r) for r in records if outcome.allows(TOPIC, r.name)]
    elif scope.api_version < TOPIC_IDS_SINCE and any(
        t.name is None or getattr(t, "topic_id", None) not in (None, ZERO_UUID) for t in request.topics
    ):
        # Kafka: "Topic name can not be null" / "Topic IDs are not supported in requests for version N" before
        # v12; the request fails with INVALID_REQUEST on every topic, a null name answered as "" (the response's
        # name is not nullable before v12, so it could not even be encoded).
        entries = [
            error_entry(t.name or "", ErrorCode.invalid_request, getattr(t, "topic_id", None) or ZERO_UUID)
            for t in request.topics
        ]
    else:
        ids = [i for t in request.topics if (i := _topic_id(t)) is not None]
        names = _unique(t.name for t in request.topics if t.name is not None)
        by_id = topics_service.describe_by_id(ids) if ids else []
        by_name = {d.name: d for d in topics_service.describe(names)} if names else {}
        described = [d.record.name for d in by_id if d.record is not None]
        outcome = scope.authorize(REQUIREMENTS[ApiKey.METADATA], {TOPIC: _unique([*names, *described])})
        for found in by_id:
            if found.record is None:
                entries.append(error_entry(None, ErrorCode.unknown_topic_id, found.topic_id))
            elif not outcome.allows(TOPIC, found.record.name):
                entries.append(error_entry(None, ErrorCode.topic_authorization_failed, found.topic_id))
            else:
                entries.append(topic_entry(found.record))
        missing = [n for n in names if _is_missing(by_name[n])]
        created = await _auto_create(scope, request, [n for n in missing if outcome.allows(TOPIC, n)])
        for name in names:
            description = by_name[name]
            if not outcome.allows(TOPIC, name):
                entries.append(error_entry(name, ErrorCode.topic_authorization_failed))
            elif description.record is not None:
                entries.append(topic_entry(description.record))
            elif name in created:
                made = created[name]
                entries.append(topic_entry(made) if isinstance(made, TopicRecord) else error_entry(name, made))
            else:
                # Kafka reports the operations on an absent topic the caller may describe.
                operations = (
                    authorized_operations(scope.snapshot, scope.context, TOPIC, name)
                    if include_ops
                    else OPERATIONS_NOT_REQUESTED
                )
                entries.append(error_entry(name, wire_error(description.error), operations=operations))
    wanted_cluster_ops = bool(getattr(request, "include_cluster_authorized_operations", False))
    return metadata_response(
        cls,
        throttle_time=NO_THROTTLE,
        brokers=(
            metadata_response_broker(
                cls,
                node_id=scope.broker.node_id,
                host=scope.broker.host,
                port=scope.broker.port,
                rack=None,
            ),
        ),
        cluster_id=scope.broker.cluster_id,
        controller_id=scope.broker.node_id,
        topics=tuple(entries),
        cluster_authorized_operations=cluster_operations(scope) if wanted_cluster_ops else OPERATIONS_NOT_REQUESTED,
    )


async def _auto_create(scope: RequestScope, request: Any, missing: list[str]) -> dict[str, TopicRecord | ErrorCode]:
    """Create describable missing topics when the broker and the request allow it and AUTO_CREATE is granted.
    Returns, per name, the created TopicRecord or the ErrorCode to answer with."""
    allowed_by_request = bool(getattr(request, "allow_auto_topic_creation", True))
    if not missing or not allowed_by_request or not scope.services.sections.topics.auto_create_topics:
        return {}
    outcome = scope.authorize(METADATA_AUTO_CREATE, {TOPIC: missing})
    results: dict[str, TopicRecord | ErrorCode] = {}
    for name in missing:
        if not outcome.allows(TOPIC, name):
            results[name] = ErrorCode.topic_authorization_failed
            continue
        created = await asyncio.to_thread(scope.services.topics.auto_create, name, actor=scope.actor())
        if created.succeeded:
            results[name] = TopicRecord(
                name=name,
                topic_id=created.topic_id,
                num_partitions=created.num_partitions,
                replication_factor=created.replication_factor,
                configs=created.configs,
            )
        else:
            results[name] = wire_error(created.error)
    return results


# ----------------------------------------------------------------------------------------------- CreateTopics


async def create_topics(scope: RequestScope, request: CreateTopicsRequest) -> CreateTopicsResponse:
    cls: type[CreateTopicsResponse] = response_schema(ApiKey.CREATE_TOPICS, scope.api_version)
    lists_configs = has_field(nested(cls, "CreatableTopicResult"), "configs")  # v5+
    names = _unique(t.name for t in request.topics)
    outcome = scope.authorize(REQUIREMENTS[ApiKey.CREATE_TOPICS], {TOPIC: names})
    allowed = [t for t in request.topics if outcome.allows(TOPIC, t.name)]
    new_topics = [
        NewTopic(
            name=t.name,
            num_partitions=int(t.num_partitions),
            replication_factor=int(t.replication_factor),
            assignments=tuple((int(a.partition_index), tuple(int(b) for b in a.broker_ids)) for a in t.assignments),
            configs={c.name: c.value for c in t.configs},
        )
        for t in allowed
    ]
    validate_only = bool(getattr(request, "validate_only", False))
    actor = scope.actor()
    await scope.refuse(
        [name for name in names if not outcome.allows(TOPIC, name)],
        lambda name: topic_event("topic.created", actor, name, None, CREATE_DENIED),
    )
    created = (
        {
            r.name: r
            for r in await asyncio.to_thread(
                scope.services.topics.create_topics, new_topics, actor=actor, validate_only=validate_only
            )
        }
        if new_topics
        else {}
    )
    results: list[CreatableTopicResult] = []
    for name in names:
        if not outcome.allows(TOPIC, name):
            results.append(
                creatable_topic_result(
                    cls,
                    name=name,
                    topic_id=ZERO_UUID,
                    **error_fields(CREATE_DENIED),
                    topic_config_error_code=ErrorCode.none.value,  # as Kafka 3.9 answers (measured)
                    num_partitions=-1,
                    replication_factor=-1,
                    configs=() if lists_configs else None,
                )
            )
            continue
        result = created[name]
        # Kafka 3.9 (measured): an empty config list, not null, wherever it lists none; and a caller that may not
        # DESCRIBE_CONFIGS the new topic sees neither its configs nor its partition count and replication factor.
        configs: tuple[CreatableTopicConfigs, ...] | None = () if lists_configs else None
        config_error = ErrorCode.none.value
        num_partitions, replication_factor = result.num_partitions, result.replication_factor
        if result.succeeded and lists_configs:
            # Kafka returns the topic's configs only to a caller allowed to DESCRIBE_CONFIGS the topic.
            may_see = REQUIREMENTS[ApiKey.DESCRIBE_CONFIGS]
            if scope.authorize(may_see, {TOPIC: [name]}).allows(TOPIC, name):
                configs = tuple(
                    creatable_topic_configs(
                        cls,
                        name=key,
                        value=value,
                        read_only=False,
                        config_source=DYNAMIC_TOPIC_CONFIG,
                        is_sensitive=False,
                    )
                    for key, value in result.configs.items()
                )
            else:
                config_error = ErrorCode.topic_authorization_failed.value
                num_partitions = replication_factor = -1
        results.append(
            creatable_topic_result(
                cls,
                name=name,
                topic_id=result.topic_id,
                **error_fields(result.error),
                topic_config_error_code=config_error,
                num_partitions=num_partitions,
                replication_factor=replication_factor,
                configs=configs,
            )
        )
    return create_topics_response(cls, throttle_time=NO_THROTTLE, topics=tuple(results))


# ----------------------------------------------------------------------------------------------- DeleteTopics

NEITHER_NAME_NOR_ID = "Neither topic name nor id were specified."
_NAMELESS = ItemError(KafkaErrorCode.INVALID_REQUEST, NEITHER_NAME_NOR_ID)
_UNKNOWN_TOPIC = ItemError(KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
_DELETE_DENIED = ItemError(KafkaErrorCode.TOPIC_AUTHORIZATION_FAILED)


def deletion_error(error: ItemError | None) -> ErrorFields:
    """DeleteTopics sends the error's default text rather than null (Kafka 3.9, measured): its rule for every item."""
    return error_fields(error, default_text=True)


def _topic_id(topic: Any) -> uuid.UUID | None:
    """The id a request's topic entry names, or None (no id field in this version, null, or the all-zero Uuid)."""
    topic_id = getattr(topic, "topic_id", None)
    return topic_id if isinstance(topic_id, uuid.UUID) and topic_id != ZERO_UUID else None


async def delete_topics(scope: RequestScope, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    cls: type[DeleteTopicsResponse] = response_schema(ApiKey.DELETE_TOPICS, scope.api_version)
    service = scope.services.topics
    nameless = 0
    if hasattr(request, "topic_names"):
        names, ids = _unique(request.topic_names), []
    else:
        names = _unique(t.name for t in request.topics if t.name is not None)
        ids = list(dict.fromkeys(i for t in request.topics if t.name is None and (i := _topic_id(t)) is not None))
        # Kafka (ControllerApis.deleteTopics): an entry with neither a name nor an id is an INVALID_REQUEST.
        nameless = sum(1 for t in request.topics if t.name is None and _topic_id(t) is None)
    id_names = {d.topic_id: d.record.name for d in service.describe_by_id(ids) if d.record is not None} if ids else {}
    outcome = scope.authorize(REQUIREMENTS[ApiKey.DELETE_TOPICS], {TOPIC: _unique([*names, *id_names.values()])})
    results: list[DeletableTopicResult] = []
    deletable_names = [n for n in names if outcome.allows(TOPIC, n)]
    deletable_ids = [i for i in ids if i not in id_names or outcome.allows(TOPIC, id_names[i])]
    # Kafka (ControllerApis.deleteTopics) checks DESCRIBE, then existence, then DELETE: a missing topic the caller
    # may describe is UNKNOWN_TOPIC_OR_PARTITION even without DELETE (measured on Kafka 3.9).
    # The DESCRIBE results are the request's own (one snapshot, already audited).
    describable = {
        action.resource_pattern.name
        for action, result in outcome.decisive
        if action.operation is AclOperation.DESCRIBE
        and action.resource_pattern.resource_type is TOPIC
        and result is AuthorizationResult.ALLOWED
    }
    denied_describable = [n for n in names if n not in deletable_names and n in describable]
    absent = (
        {d.name for d in service.describe(denied_describable) if d.record is None}
        if denied_describable and outcome.request_allowed
        else set()
    )
    for name in names:
        if name in absent:
            results.append(deletable_topic_result(cls, name=name, topic_id=ZERO_UUID, **deletion_error(_UNKNOWN_TOPIC)))
        elif name not in deletable_names:
            results.append(deletable_topic_result(cls, name=name, topic_id=ZERO_UUID, **deletion_error(_DELETE_DENIED)))
    for topic_id in ids:
        if topic_id not in deletable_ids:
            # The name is withheld from a caller who may not describe the topic.
            results.append(deletable_topic_result(cls, name=None, topic_id=topic_id, **deletion_error(_DELETE_DENIED)))
    results.extend(
        deletable_topic_result(cls, name=None, topic_id=ZERO_UUID, **deletion_error(_NAMELESS)) for _ in range(nameless)
    )
    actor = scope.actor()
    # (name, id, the error answered): a topic denied by name (absent ones answered as missing), or by id
    refused: list[tuple[str, uuid.UUID | None, ItemError]] = [
        (name, None, _UNKNOWN_TOPIC if name in absent else _DELETE_DENIED)
        for name in names
        if name not in deletable_names
    ] + [(id_names[i], i, _DELETE_DENIED) for i in ids if i not in deletable_ids]
    await scope.refuse(
        refused,
        lambda item: topic_event(
            "topic.deleted", actor, item[0], None, item[2], topic_id=None if item[1] is None else str(item[1])
        ),
    )
    deleted = []
    if deletable_names:
        deleted += await asyncio.to_thread(service.delete_topics, deletable_names, actor=actor)
    if deletable_ids:
        deleted += await asyncio.to_thread(service.delete_topics_by_id, deletable_ids, actor=actor)
    for result in deleted:
        results.append(
            deletable_topic_result(cls, name=result.name, topic_id=result.topic_id, **deletion_error(result.error))
        )
    return delete_topics_response(cls, throttle_time=NO_THROTTLE, responses=tuple(results))
