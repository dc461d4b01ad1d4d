"""DescribeTopicPartitions (75, KIP-966; what the Java AdminClient's ``describeTopics`` uses since 3.8): DESCRIBE on
each topic, pages cut as Kafka cuts them for the caller, authorized operations from kafkaguard's ACLs.

As ``DescribeTopicPartitionsRequestHandler`` (Kafka 3.9, called by ``KafkaApis.handleDescribeTopicPartitionsRequest``):

* the request names topics, or none for every topic; only names at or after the cursor's topic count, and a cursor
  naming a topic the list lacks (or a negative partition) is INVALID_REQUEST for every topic named
  (``getErrorResponse``), never forwarded;
* named topics the caller may not DESCRIBE are TOPIC_AUTHORIZATION_FAILED, with the name, zero id, no partitions;
  for all topics they are silently left out;
* the described topics (sorted by name) are paged: at most ``response_partition_limit`` partitions, starting at the
  cursor's partition of the cursor's topic, and ``next_cursor`` names where the next page starts;
* each described topic carries the caller's authorized operations.

The upstream answers the proxy's principal, who may describe everything: asked for all topics it would page over
topics the caller cannot see (pages of another size, and a ``next_cursor`` that names a hidden topic). So the proxy
never forwards "all topics": it lists the topics (Metadata, which also refreshes ``topic_ids``), keeps those the caller
may describe at or after the cursor, and asks the upstream for exactly those, by name; the upstream then pages them
as Kafka pages the caller's. An empty list is never forwarded (to the upstream it means every topic): the proxy
answers it itself. The answer names brokers by id only (leader, replicas, ISR, ELR): nothing to rewrite.
"""

from __future__ import annotations

from collections.abc import Sequence

from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest

from kafkaguard.authorizer.requests import REQUIREMENTS, ApiKey, authorized_operations
from kafkaguard.model import ResourceType
from kafkaguard.protocol.build import NO_THROTTLE, build_request, nested
from kafkaguard.protocol.codec import response_schema
from kafkaguard.protocol.replies import Reply
from kafkaguard.protocol.wire_errors import wire_error
from kafkaguard.proxy.broker_refusals import noted
from kafkaguard.proxy.builders import (
    DescribeTopicPartitionsResponseTopic,
    describe_topic_partitions_response,
    describe_topic_partitions_response_topic,
    rebuild_describe_topic_partitions_request,
    rebuild_describe_topic_partitions_response,
    rebuild_describe_topic_partitions_response_topic,
)
from kafkaguard.proxy.messages import (
    DESCRIBE_TOPIC_PARTITIONS,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from kafkaguard.proxy.refusals import TOPIC_DENIED
from kafkaguard.proxy.scope import ProxyScope
from kafkaguard.proxy.topic_ids import BY_ID_VERSION
from kafkaguard.store.uuids import ZERO_UUID

TOPIC = ResourceType.TOPIC


async def describe_topic_partitions(scope: ProxyScope, request: DescribeTopicPartitionsRequest) -> Reply:
    cls: type[DescribeTopicPartitionsResponse] = response_schema(ApiKey.DESCRIBE_TOPIC_PARTITIONS, scope.api_version)
    cursor = request.cursor
    after = cursor.topic_name if cursor is not None else ""
    every = not request.topics
    if every:
        listed = await _all_topics(scope)
    else:
        listed = [str(topic.name) for topic in request.topics]
        if cursor is not None and cursor.topic_name not in listed:
            return _invalid(cls, listed)  # Kafka: "topic list should contain the cursor topic"
    if cursor is not None and cursor.partition_index < 0:
        return _invalid(cls, [] if every else listed)  # Kafka: "cursor partition must be valid"
    names = sorted({name for name in listed if name >= after})
    outcome = scope.authorize(REQUIREMENTS[ApiKey.DESCRIBE_TOPIC_PARTITIONS], {TOPIC: names})
    allowed = [name for name in names if outcome.allows(TOPIC, name)]
    refused = () if every else tuple(_refusal(cls, name) for name in names if not outcome.allows(TOPIC, name))
    if not allowed:  # never an empty list upstream: it would describe every topic
        return describe_topic_partitions_response(cls, throttle_time=NO_THROTTLE, topics=refused, next_cursor=None)
    # What goes upstream: the names the caller may describe, at or after the cursor; the cursor only when its topic
    # is one of them (else Kafka starts that page at partition 0 of the first name, as the upstream does without it).
    topic_cls = nested(type(request), "TopicRequest")
    asked = rebuild_describe_topic_partitions_request(
        request,
        topics=tuple(build_request(topic_cls, name=name) for name in allowed),
        cursor=cursor if cursor is not None and cursor.topic_name in allowed else None,
    )
    answer: DescribeTopicPartitionsResponse = (await scope.forward(asked)).body(DESCRIBE_TOPIC_PARTITIONS)
    wanted = set(allowed)
    noted(scope, outcome, TOPIC, ((str(t.name), int(t.error_code)) for t in answer.topics if t.name in wanted))
    described = tuple(
        rebuild_describe_topic_partitions_response_topic(
            topic,
            topic_authorized_operations=authorized_operations(scope.snapshot, scope.context, TOPIC, str(topic.name)),
        )
        for topic in answer.topics
        if topic.name in wanted and not (every and topic.error_code == ErrorCode.unknown_topic_or_partition)
    )  # for all topics, one deleted since the listing is left out, as Kafka's own listing would
    return rebuild_describe_topic_partitions_response(answer, topics=described + refused)


async def _all_topics(scope: ProxyScope) -> list[str]:
    """Every topic the upstream has (Metadata for all topics, which refreshes the proxy's topic ids too)."""
    await scope.outbox.flushed()  # the proxy's own request waits for the answers relayed before it
    body = MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    answer = await scope.upstream.call(ApiKey.METADATA, BY_ID_VERSION, body)
    scope.nodes.topic_ids.observe(answer.topics, complete=True)
    return [str(topic.name) for topic in answer.topics if topic.name is not None]


def _refusal(cls: type[DescribeTopicPartitionsResponse], name: str) -> DescribeTopicPartitionsResponseTopic:
    """Kafka: "We should not return topicId when on unauthorized error, so we return zero uuid"."""
    return describe_topic_partitions_response_topic(
        cls, error_code=wire_error(TOPIC_DENIED), name=name, topic_id=ZERO_UUID, is_internal=False, partitions=()
    )


def _invalid(cls: type[DescribeTopicPartitionsResponse], names: Sequence[str]) -> DescribeTopicPartitionsResponse:
    """Kafka's ``InvalidRequestException``, answered as ``DescribeTopicPartitionsRequest.getErrorResponse``: each
    topic named INVALID_REQUEST, nothing else."""
    topics = tuple(
        describe_topic_partitions_response_topic(
            cls, error_code=ErrorCode.invalid_request, name=name, topic_id=ZERO_UUID, is_internal=False, partitions=()
        )
        for name in names
    )
    return describe_topic_partitions_response(cls, throttle_time=NO_THROTTLE, topics=topics, next_cursor=None)
