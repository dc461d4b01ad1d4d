"""Metadata (3) and DescribeCluster (60): topics the caller may describe, auto-creation it may cause, brokers at
the proxy's addresses, and authorized-operations bitmasks computed from kafkaguard's ACLs.

As ``KafkaApis.handleTopicMetadataRequest`` (Kafka 3.9):

* a request for all topics lists only those the caller may DESCRIBE (the rest are silently left out);
* a topic named without DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED and never reaches the upstream (so it is
  never auto-created either);
* a named topic that does not exist is created when the request allows it, the upstream creates topics
  (``auto.create.topics.enable``) and the caller has AUTO_CREATE (SEMANTICS.md §16.1; Kafka: CREATE) on the cluster
  or the topic; without it the topic is answered TOPIC_AUTHORIZATION_FAILED, as Kafka answers it. The proxy asks the
  upstream without auto-creation first and again, with it, only for the topics the caller may create. The setting is
  that of the broker this connection reached (``broker_settings``); while it is unknown, auto-creation is taken as
  enabled, which grants nothing extra (only creatable topics are asked for with it, and the broker still applies its
  own setting);
* v1–v3 are forwarded as v4 and answered at the client's version (``versions.FORWARDED_FROM``): they cannot say
  "without auto-creation", which Kafka reads as "with" — forwarded as they are, the first ask would create every
  topic named, whoever asks. Forwarding below v4 only the names that exist was the other way; it leaves a race (a
  topic deleted between the check and the request is created) and costs a round trip more;
* v12 may name topics by id (``_by_id``): each id is answered NONE with its name when the caller may describe it,
  TOPIC_AUTHORIZATION_FAILED with a null name (and the id) when not, UNKNOWN_TOPIC_ID when no topic has it; v10-v11
  naming an id (or no name) are INVALID_REQUEST, as Kafka rejects them. Every upstream answer read here keeps the
  proxy's topic ids current (``topic_ids``);
* KIP-430 authorized operations are the caller's under kafkaguard's ACLs (the upstream's would be the proxy's);
* in passthrough, a named topic kafkaguard allowed and the broker answered TOPIC_AUTHORIZATION_FAILED is noted as the
  broker's refusal (``broker_refusals``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from kio.schema.errors import ErrorCode

from kafkaguard.apis.operations import OPERATIONS_NOT_REQUESTED, cluster_operations
from kafkaguard.authorizer.requests import METADATA_AUTO_CREATE, REQUIREMENTS, ApiKey, authorized_operations
from kafkaguard.model import ResourceType
from kafkaguard.protocol.build import (
    NO_THROTTLE,
    build_request,
    convert_request,
    convert_response,
    nested,
)
from kafkaguard.protocol.codec import request_schema, response_schema
from kafkaguard.protocol.replies import Reply
from kafkaguard.protocol.wire_errors import wire_error
from kafkaguard.proxy.broker_refusals import noted
from kafkaguard.proxy.builders import (
    MetadataResponseTopic,
    metadata_response,
    metadata_response_topic,
    rebuild_describe_cluster_response,
    rebuild_metadata_request,
    rebuild_metadata_response,
    rebuild_metadata_response_topic,
)
from kafkaguard.proxy.handlers.addresses import proxied_brokers
from kafkaguard.proxy.handlers.by_id import topic_names
from kafkaguard.proxy.messages import (
    DESCRIBE_CLUSTER,
    METADATA,
    DescribeClusterRequest,
    DescribeClusterResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafkaguard.proxy.refusals import TOPIC_DENIED
from kafkaguard.proxy.scope import ProxyScope
from kafkaguard.proxy.versions import forwarded_version
from kafkaguard.service.topics import INTERNAL_TOPICS
from kafkaguard.store.uuids import ZERO_UUID

TOPIC = ResourceType.TOPIC
#: Metadata names topics by id from v12 (v10-v11 carry the field, which Kafka rejects when set).
_BY_ID_FROM = 12


async def metadata(scope: ProxyScope, request: MetadataRequest) -> Reply:
    version = forwarded_version(ApiKey.METADATA, scope.api_version)
    if version == scope.api_version:
        return await _metadata(scope, request)
    upgraded = convert_request(request, request_schema(ApiKey.METADATA, version))  # absent → allow auto-creation
    answer = await _metadata(scope.forwarded_at(version), upgraded)
    cls: type[MetadataResponse] = response_schema(ApiKey.METADATA, scope.api_version)
    return convert_response(answer, cls)


async def _metadata(scope: ProxyScope, request: Any) -> Reply:
    include_ops = bool(getattr(request, "include_topic_authorized_operations", False))
    if request.topics is None:
        whole: MetadataResponse = (
            await scope.forward(rebuild_metadata_request(request, allow_auto_topic_creation=False))
        ).body(METADATA)
        scope.nodes.topic_ids.observe(whole.topics, complete=True)
        listed = [topic.name for topic in whole.topics if topic.name is not None]
        outcome = scope.authorize(REQUIREMENTS[ApiKey.METADATA], {TOPIC: listed})
        topics = tuple(t for t in whole.topics if t.name is not None and outcome.allows(TOPIC, t.name))
        return await _answer(scope, request, whole, topics, include_ops)
    if any(topic.name is None or _id_of(topic) != ZERO_UUID for topic in request.topics):
        if scope.api_version < _BY_ID_FROM:
            return _invalid(scope, request)
        return await _by_id(scope, request, include_ops)
    names = list(dict.fromkeys(topic.name for topic in request.topics if topic.name is not None))
    outcome = scope.authorize(REQUIREMENTS[ApiKey.METADATA], {TOPIC: names})
    describable = [name for name in names if outcome.allows(TOPIC, name)]
    refused = [name for name in names if not outcome.allows(TOPIC, name)]
    answer: MetadataResponse = (await scope.forward(_asking(request, describable, auto_create=False))).body(METADATA)
    scope.nodes.topic_ids.observe(answer.topics)
    # Only what was asked and may be described: an upstream answer naming more (or fewer) topics passes nothing on.
    allowed_names = set(describable)
    found = {topic.name: topic for topic in answer.topics if topic.name in allowed_names}
    missing = [
        name for name in describable if name in found and found[name].error_code == ErrorCode.unknown_topic_or_partition
    ]
    wants_creation = bool(request.allow_auto_topic_creation)  # v4+ (see ``metadata``)
    # None (not read yet, or unreadable): taken as enabled, see the module docstring
    if missing and wants_creation and scope.nodes.auto_create_topics(scope.upstream.address) is not False:
        creation = scope.authorize(METADATA_AUTO_CREATE, {TOPIC: missing})
        creatable = [name for name in missing if creation.allows(TOPIC, name)]
        refused += [name for name in missing if not creation.allows(TOPIC, name)]
        if creatable:
            created: MetadataResponse = (await scope.forward(_asking(request, creatable, auto_create=True))).body(
                METADATA
            )
            found.update({topic.name: topic for topic in created.topics if topic.name in allowed_names})
        answer = rebuild_metadata_response(answer, topics=tuple(found.values()))
    allowed = tuple(topic for name, topic in found.items() if name not in refused)
    noted(scope, outcome, TOPIC, ((topic.name, int(topic.error_code)) for topic in allowed))  # the broker's refusals
    denials = tuple(_refusal(type(answer), name) for name in refused)
    return await _answer(scope, request, answer, allowed, include_ops, denials)


def _id_of(topic: Any) -> UUID:
    topic_id: UUID | None = getattr(topic, "topic_id", None)  # v10+; null read as the zero id, as Kafka reads it
    return topic_id if topic_id is not None else ZERO_UUID


def _invalid(scope: ProxyScope, request: Any) -> MetadataResponse:
    """v10-v11 naming a topic by id, or without a name: Kafka's ``InvalidRequestException`` ("Topic name can not be
    null" / "Topic IDs are not supported"), answered as ``MetadataRequest.getErrorResponse`` answers it: each topic
    INVALID_REQUEST, a null name as "", no brokers. Nothing goes upstream."""
    cls: type[MetadataResponse] = response_schema(ApiKey.METADATA, scope.api_version)
    topics = tuple(
        metadata_response_topic(
            cls,
            error_code=ErrorCode.invalid_request,
            name=topic.name or "",
            topic_id=_id_of(topic),
            is_internal=False,
            partitions=(),
            topic_authorized_operations=OPERATIONS_NOT_REQUESTED,
        )
        for topic in request.topics
    )
    return metadata_response(
        cls,
        throttle_time=NO_THROTTLE,
        brokers=(),
        cluster_id=None,
        controller_id=-1,
        topics=topics,
        cluster_authorized_operations=OPERATIONS_NOT_REQUESTED,
    )


async def _by_id(scope: ProxyScope, request: Any, include_ops: bool) -> Reply:
    """Metadata v12 naming topics by id, as ``KafkaApis.handleTopicMetadataRequest`` (Kafka 3.9): once any topic is
    named by id, the names are ignored (``useTopicId``: only the ids' topics are described); an id no topic has is
    UNKNOWN_TOPIC_ID (null name); a topic the caller may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED with a null name
    and its id ("Topic IDs are not considered sensitive information"); the others are described. Nothing is created.

    The ids are resolved to names first (``topic_ids``, asked of the upstream when not known; a refused id is asked
    again, so that one deleted since is UNKNOWN_TOPIC_ID as Kafka says), the names authorized, and only the ids the
    caller may describe go upstream, by id, without auto-creation (the names Kafka ignores are dropped: the upstream
    cannot describe them either). With none, the list goes up empty (v12: no topic, not all) for the brokers."""
    ids = list(dict.fromkeys(_id_of(topic) for topic in request.topics if _id_of(topic) != ZERO_UUID))
    names = await topic_names(scope, ids)
    outcome = scope.authorize(REQUIREMENTS[ApiKey.METADATA], {TOPIC: list(dict.fromkeys(names.values()))})
    denied = [i for i, name in names.items() if not outcome.allows(TOPIC, name)]
    if denied:
        confirmed = await topic_names(scope, denied, fresh=True)
        names = {i: n for i, n in names.items() if i not in denied or i in confirmed}
        denied = [i for i in denied if i in confirmed]
    allowed = [i for i in ids if i in names and i not in denied]
    topic_cls = nested(type(request), "MetadataRequestTopic")
    asking = tuple(build_request(topic_cls, name=None, topic_id=i) for i in allowed)
    forwarded = rebuild_metadata_request(request, topics=asking, allow_auto_topic_creation=False)
    answer: MetadataResponse = (await scope.forward(forwarded)).body(METADATA)
    scope.nodes.topic_ids.observe(answer.topics)
    cls = type(answer)
    # Only what was asked, under the name it was authorized by: an upstream answer naming more passes nothing on.
    described = {_id_of(t): t for t in answer.topics if _id_of(t) in names and t.name == names[_id_of(t)]}

    def refusal(topic_id: UUID, error: ErrorCode) -> MetadataResponseTopic:
        return metadata_response_topic(
            cls,
            error_code=error,
            name=None,
            topic_id=topic_id,
            is_internal=False,
            partitions=(),
            topic_authorized_operations=OPERATIONS_NOT_REQUESTED,
        )

    shown = tuple(described[i] for i in allowed if i in described)
    refused = tuple(
        refusal(i, ErrorCode.unknown_topic_id) for i in ids if i not in names or (i in allowed and i not in described)
    )
    refused += tuple(refusal(i, wire_error(TOPIC_DENIED)) for i in denied)
    return await _answer(scope, request, answer, shown, include_ops, refused)


def _asking(request: Any, names: Sequence[str], *, auto_create: bool) -> Any:
    topic_cls = nested(type(request), "MetadataRequestTopic")
    topics = tuple(build_request(topic_cls, name=name, topic_id=ZERO_UUID) for name in names)
    return rebuild_metadata_request(request, topics=topics, allow_auto_topic_creation=auto_create)


def _refusal(cls: type[MetadataResponse], name: str) -> MetadataResponseTopic:
    """A refused topic, of the answer's version (the proxy may forward above the client's, see ``metadata``)."""
    return metadata_response_topic(
        cls,
        error_code=wire_error(TOPIC_DENIED),
        name=name,
        topic_id=ZERO_UUID,
        is_internal=name in INTERNAL_TOPICS,  # flagged as Kafka flags it, even in a refusal
        partitions=(),
        topic_authorized_operations=OPERATIONS_NOT_REQUESTED,
    )


async def _answer(
    scope: ProxyScope,
    request: Any,
    answer: MetadataResponse,
    topics: tuple[MetadataResponseTopic, ...],
    include_ops: bool,
    denials: tuple[MetadataResponseTopic, ...] = (),
) -> Reply:
    if include_ops:  # every topic here is named: ``_metadata`` passes on only the named ones
        topics = tuple(
            rebuild_metadata_response_topic(
                t, topic_authorized_operations=authorized_operations(scope.snapshot, scope.context, TOPIC, t.name or "")
            )
            for t in topics
        )
    wanted_cluster_ops = bool(getattr(request, "include_cluster_authorized_operations", False))
    return rebuild_metadata_response(
        answer,
        brokers=await proxied_brokers(scope, answer.brokers),
        topics=topics + denials,
        cluster_authorized_operations=cluster_operations(scope) if wanted_cluster_ops else OPERATIONS_NOT_REQUESTED,
    )


async def describe_cluster(scope: ProxyScope, request: DescribeClusterRequest) -> Reply:
    answer: DescribeClusterResponse = (await scope.forward()).body(DESCRIBE_CLUSTER)
    wanted = bool(getattr(request, "include_cluster_authorized_operations", False))
    return rebuild_describe_cluster_response(
        answer,
        brokers=await proxied_brokers(scope, answer.brokers, id_field="broker_id"),
        cluster_authorized_operations=cluster_operations(scope) if wanted else OPERATIONS_NOT_REQUESTED,
    )
