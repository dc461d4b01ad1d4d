"""ListOffsets (2): DESCRIBE on each topic, per topic.

As ``KafkaApis.handleListOffsetRequest`` (Kafka 3.9): a denied topic's partitions get TOPIC_AUTHORIZATION_FAILED
(timestamp and offset -1, leader epoch -1), the others are answered by the upstream.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkaguard.authorizer.requests import REQUIREMENTS, ApiKey
from kafkaguard.model import ResourceType
from kafkaguard.protocol.build import NO_THROTTLE, build, nested, rebuild, rebuild_request
from kafkaguard.protocol.codec import response_schema
from kafkaguard.protocol.replies import Reply
from kafkaguard.proxy.messages import ListOffsetsRequest
from kafkaguard.proxy.scope import ProxyScope

TOPIC = ResourceType.TOPIC


async def list_offsets(scope: ProxyScope, request: ListOffsetsRequest) -> Reply:
    cls = response_schema(ApiKey.LIST_OFFSETS, scope.api_version)
    names = list(dict.fromkeys(topic.name for topic in request.topics))
    outcome = scope.authorize(REQUIREMENTS[ApiKey.LIST_OFFSETS], {TOPIC: names})
    denied = {name for name in names if not outcome.allows(TOPIC, name)}
    if not denied:
        return await scope.relay()
    refused = _errors(cls, [topic for topic in request.topics if topic.name in denied])
    allowed = tuple(topic for topic in request.topics if topic.name not in denied)
    if not allowed:
        return build(cls, throttle_time=NO_THROTTLE, topics=refused)
    answer = (await scope.forward(rebuild_request(request, topics=allowed))).body()
    return rebuild(answer, topics=answer.topics + refused)


def _errors(cls: type[Any], topics: Any) -> tuple[Any, ...]:
    topic_cls, partition_cls = nested(cls, "ListOffsetsTopicResponse"), nested(cls, "ListOffsetsPartitionResponse")
    return tuple(
        build(
            topic_cls,
            name=topic.name,
            partitions=tuple(
                build(
                    partition_cls,
                    partition_index=p.partition_index,
                    error_code=ErrorCode.topic_authorization_failed,
                    timestamp=-1,
                    offset=-1,
                    leader_epoch=-1,
                )
                for p in topic.partitions
            ),
        )
        for topic in topics
    )
