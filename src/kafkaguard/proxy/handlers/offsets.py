"""ListOffsets (2): DESCRIBE on each topic, per topic.

As ``KafkaApis.handleListOffsetRequest`` (Kafka 3.9): a denied topic's partitions get TOPIC_AUTHORIZATION_FAILED
(timestamp and offset -1, leader epoch -1), the others are answered by the upstream.
"""

from __future__ import annotations

from kafkaguard.authorizer.requests import REQUIREMENTS, ApiKey
from kafkaguard.protocol.replies import Reply
from kafkaguard.proxy.messages import ListOffsetsRequest
from kafkaguard.proxy.refusals import PartitionRefusal
from kafkaguard.proxy.scope import ProxyScope

_REFUSAL = PartitionRefusal(
    "ListOffsetsTopicResponse",
    "ListOffsetsPartitionResponse",
    placeholders={"timestamp": -1, "offset": -1, "leader_epoch": -1},
)


async def list_offsets(scope: ProxyScope, request: ListOffsetsRequest) -> Reply:
    return await _REFUSAL.per_topic(scope, request, REQUIREMENTS[ApiKey.LIST_OFFSETS])
