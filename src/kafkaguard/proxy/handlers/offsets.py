"""ListOffsets (2): DESCRIBE on each topic, per topic.

As ``KafkaApis.handleListOffsetRequest`` (Kafka 3.9): a denied topic's partitions get TOPIC_AUTHORIZATION_FAILED
(timestamp and offset -1, leader epoch -1), the others are answered by the upstream.
"""

from __future__ import annotations

from collections.abc import Iterable

from kafkaguard.authorizer.requests import REQUIREMENTS, ApiKey
from kafkaguard.model import ItemError
from kafkaguard.protocol.build import NO_THROTTLE
from kafkaguard.protocol.codec import response_schema
from kafkaguard.protocol.replies import Reply
from kafkaguard.protocol.wire_errors import wire_error
from kafkaguard.proxy.builders import (
    ListOffsetsTopicResponse,
    list_offsets_partition_response,
    list_offsets_response,
    list_offsets_topic_response,
    rebuild_list_offsets_request,
    rebuild_list_offsets_response,
)
from kafkaguard.proxy.messages import LIST_OFFSETS, ListOffsetsRequest, ListOffsetsResponse
from kafkaguard.proxy.refusals import TOPIC_DENIED, denied_topics, named, refused_topics, with_refused
from kafkaguard.proxy.scope import ProxyScope


def _refused_topic(
    cls: type[ListOffsetsResponse], name: str, indexes: Iterable[int], error: ItemError
) -> ListOffsetsTopicResponse:
    partitions = tuple(
        list_offsets_partition_response(
            cls, partition_index=index, error_code=wire_error(error), timestamp=-1, offset=-1, leader_epoch=-1
        )
        for index in indexes
    )
    return list_offsets_topic_response(cls, name=name, partitions=partitions)


async def list_offsets(scope: ProxyScope, request: ListOffsetsRequest) -> Reply:
    denied = denied_topics(scope, REQUIREMENTS[ApiKey.LIST_OFFSETS], (t.name for t in request.topics))
    if not denied:
        return await scope.relay()
    cls: type[ListOffsetsResponse] = response_schema(ApiKey.LIST_OFFSETS, scope.api_version)
    refused = refused_topics(_refused_topic, cls, named(t for t in request.topics if t.name in denied), TOPIC_DENIED)
    allowed = tuple(t for t in request.topics if t.name not in denied)
    return await with_refused(
        scope,
        LIST_OFFSETS,
        rebuild_list_offsets_request(request, topics=allowed) if allowed else None,
        own=lambda: list_offsets_response(cls, throttle_time=NO_THROTTLE, topics=refused),
        merged=lambda answer: rebuild_list_offsets_response(answer, topics=answer.topics + refused),
    )
