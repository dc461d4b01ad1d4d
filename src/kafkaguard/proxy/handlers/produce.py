"""Produce (0): WRITE on each topic, per topic; WRITE on the transactional id for transactional records.

As ``KafkaApis.handleProduceRequest`` (Kafka 3.9):

1. a request carrying transactional records needs WRITE on its transactional id, else every partition gets
   TRANSACTIONAL_ID_AUTHORIZATION_FAILED (nothing is written);
2. each topic needs WRITE: a denied topic's partitions get TOPIC_AUTHORIZATION_FAILED, the others are written;
3. with acks=0 the broker answers nothing; if any partition failed it closes the connection instead, so the
   producer learns of it (the proxy does the same after forwarding the allowed part).

Fast path: when every topic is allowed, the client's bytes go upstream unchanged and the upstream's answer comes
back unchanged — the records are never decoded, only the batch header's attributes are read (step 1).
"""

from __future__ import annotations

import struct
from typing import Any

from kio.schema.errors import ErrorCode

from kafkaguard.authorizer.requests import REQUIREMENTS, ApiKey
from kafkaguard.model import ResourceType
from kafkaguard.proxy.messages import ProduceRequest
from kafkaguard.proxy.scope import NO_RESPONSE, ProxyScope, Reply
from kafkaguard.server.build import NO_THROTTLE, build, nested, rebuild
from kafkaguard.server.codec import response_schema
from kafkaguard.server.connection import CloseConnection

TOPIC, TRANSACTIONAL_ID = ResourceType.TOPIC, ResourceType.TRANSACTIONAL_ID
#: A v2 record batch: baseOffset (8) batchLength (4) partitionLeaderEpoch (4) magic (1) crc (4), then attributes.
_MAGIC_AT, _ATTRIBUTES_AT = 16, 21
_ATTRIBUTES = struct.Struct(">h")
_TRANSACTIONAL = 0x10


def has_transactional_records(request: Any) -> bool:
    """Kafka's ``RequestUtils.hasTransactionalRecords``: the first batch of any partition is transactional."""
    for topic in request.topic_data:
        for partition in topic.partition_data:
            records = partition.records
            if records and len(records) > _ATTRIBUTES_AT + 1 and records[_MAGIC_AT] >= 2:
                (attributes,) = _ATTRIBUTES.unpack_from(records, _ATTRIBUTES_AT)
                if attributes & _TRANSACTIONAL:
                    return True
    return False


async def produce(scope: ProxyScope, request: ProduceRequest) -> Reply:
    requirement = REQUIREMENTS[ApiKey.PRODUCE]
    transactional_id = request.transactional_id
    if has_transactional_records(request):
        txn = scope.authorize(requirement, {TRANSACTIONAL_ID: [transactional_id]} if transactional_id else {})
        if transactional_id is None or not txn.allows(TRANSACTIONAL_ID, transactional_id):
            return _every_partition(scope, request, ErrorCode.transactional_id_authorization_failed)
    names = list(dict.fromkeys(topic.name for topic in request.topic_data))
    outcome = scope.authorize(requirement, {TOPIC: names})
    denied = {name for name in names if not outcome.allows(TOPIC, name)}
    fire_and_forget = request.acks == 0
    if not denied:
        if fire_and_forget:
            await scope.forward_without_response()
            return NO_RESPONSE
        return await scope.relay()
    allowed = tuple(topic for topic in request.topic_data if topic.name not in denied)
    if fire_and_forget:
        if allowed:
            await scope.forward_without_response(rebuild(request, topic_data=allowed))
        raise CloseConnection(f"Produce with acks=0 to topics it may not write: {sorted(denied)}")
    refused = _responses(scope, [t for t in request.topic_data if t.name in denied],
                         ErrorCode.topic_authorization_failed)  # fmt: skip
    if not allowed:
        return build(response_schema(ApiKey.PRODUCE, scope.api_version), responses=refused, throttle_time=NO_THROTTLE)
    answer = (await scope.forward(rebuild(request, topic_data=allowed))).body()
    return rebuild(answer, responses=answer.responses + refused)


def _every_partition(scope: ProxyScope, request: Any, error: ErrorCode) -> Reply:
    cls = response_schema(ApiKey.PRODUCE, scope.api_version)
    if request.acks == 0:
        raise CloseConnection(f"Produce with acks=0 refused: {error.name}")
    return build(cls, responses=_responses(scope, request.topic_data, error), throttle_time=NO_THROTTLE)


def _responses(scope: ProxyScope, topics: Any, error: ErrorCode) -> tuple[Any, ...]:
    """Kafka's ``PartitionResponse(error)`` for every partition of ``topics``: offsets -1, no append time."""
    cls = response_schema(ApiKey.PRODUCE, scope.api_version)
    topic_cls, partition_cls = nested(cls, "TopicProduceResponse"), nested(cls, "PartitionProduceResponse")
    return tuple(
        build(
            topic_cls,
            name=topic.name,
            partition_responses=tuple(
                build(
                    partition_cls,
                    index=partition.index,
                    error_code=error,
                    base_offset=-1,
                    log_append_time=None,
                    log_start_offset=-1,
                    record_errors=(),
                    error_message=None,
                )
                for partition in topic.partition_data
            ),
        )
        for topic in topics
    )
