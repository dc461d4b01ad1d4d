"""Fetch (1): READ on each topic, per topic; follower fetches are refused; fetch sessions are turned off.

As ``KafkaApis.handleFetchRequest`` (Kafka 3.9): a consumer's fetch needs READ on each topic it names, and a
denied topic's partitions get TOPIC_AUTHORIZATION_FAILED while the others are fetched; a fetch from a replica
(``replica_id >= 0``) needs CLUSTER_ACTION, which no client of the proxy has: all its partitions are refused.

Fetch sessions (KIP-227) let a consumer stop naming the partitions it fetches; Kafka then authorizes the session's
partitions on every fetch from state the broker keeps. The proxy does not see that state, so it asks for no
session: each fetch goes upstream as a full, sessionless fetch (session id 0, epoch -1, Kafka's FINAL_EPOCH), the
upstream answers session id 0, and clients (Java's ``FetchSessionHandler``, librdkafka) keep sending full fetches.
Every fetch therefore names every partition it reads, and every one is authorized.

Fast path: when every topic is allowed, the upstream's answer (the records) comes back unchanged, never decoded.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkaguard.authorizer.requests import REQUIREMENTS, ApiKey
from kafkaguard.model import ResourceType
from kafkaguard.proxy.messages import FetchRequest
from kafkaguard.proxy.scope import ProxyScope, Reply
from kafkaguard.server.build import NO_THROTTLE, build, nested, rebuild
from kafkaguard.server.codec import response_schema

TOPIC = ResourceType.TOPIC
#: Kafka's FetchMetadata: no session, and the epoch that asks for none.
NO_SESSION, FINAL_EPOCH = 0, -1


async def fetch(scope: ProxyScope, request: FetchRequest) -> Reply:
    sessionless = rebuild(request, session_id=NO_SESSION, session_epoch=FINAL_EPOCH, forgotten_topics_data=())
    if int(request.replica_id) >= 0:  # a follower: CLUSTER_ACTION, never granted through the proxy
        return _answer(scope, request.topics, ErrorCode.topic_authorization_failed)
    names = list(dict.fromkeys(topic.topic for topic in request.topics))
    outcome = scope.authorize(REQUIREMENTS[ApiKey.FETCH], {TOPIC: names})
    denied = {name for name in names if not outcome.allows(TOPIC, name)}
    if not denied:
        session = getattr(request, "session_id", NO_SESSION), getattr(request, "session_epoch", FINAL_EPOCH)
        unchanged = session == (NO_SESSION, FINAL_EPOCH)
        return await scope.relay(None if unchanged else sessionless)
    refused = [topic for topic in request.topics if topic.topic in denied]
    allowed = tuple(topic for topic in request.topics if topic.topic not in denied)
    if not allowed:
        return _answer(scope, refused, ErrorCode.topic_authorization_failed)
    answer = (await scope.forward(rebuild(sessionless, topics=allowed))).body()
    return rebuild(
        answer, responses=answer.responses + _responses(scope, refused, ErrorCode.topic_authorization_failed)
    )


def _answer(scope: ProxyScope, topics: Any, error: ErrorCode) -> Reply:
    cls = response_schema(ApiKey.FETCH, scope.api_version)
    return build(
        cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, session_id=NO_SESSION,
        responses=_responses(scope, topics, error),
    )  # fmt: skip


def _responses(scope: ProxyScope, topics: Any, error: ErrorCode) -> tuple[Any, ...]:
    """Kafka's ``FetchResponse.partitionResponse(tp, error)``: watermarks -1, no records."""
    cls = response_schema(ApiKey.FETCH, scope.api_version)
    topic_cls, partition_cls = nested(cls, "FetchableTopicResponse"), nested(cls, "PartitionData")
    return tuple(
        build(
            topic_cls,
            topic=topic.topic,
            partitions=tuple(
                build(
                    partition_cls,
                    partition_index=partition.partition,
                    error_code=error,
                    high_watermark=-1,
                    last_stable_offset=-1,
                    log_start_offset=-1,
                    aborted_transactions=None,
                    preferred_read_replica=-1,
                    records=b"",  # MemoryRecords.EMPTY, never null: clients read its size
                )
                for partition in topic.partitions
            ),
        )
        for topic in topics
    )
