"""How the proxy answers what it refuses: every refusal is a ``model.ItemError``, put on the wire by
``protocol.wire_errors`` (``error_fields``, or ``wire_error`` for an entity with a code and no message).

Kafka answers a refused topic the same way in every per-partition API: each partition the request named gets the
error and the API's placeholder values (offsets -1, no records …), and the refused topics are merged with the
answer for the allowed ones. The APIs differ only in the names of their entities and fields, so each says those
once (a ``RefusedTopic``: a typed function of the generated builders) and the rest is shared here: every refused
topic is built the same way (``refused_topics``), decided by one check (``denied_topics``), and merged with the
upstream's answer to the allowed part the same way (``with_refused``), read as the API's own response union.

Nothing here decides: the handlers authorize, and say what is refused with which error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from kio.static.protocol import Entity

from kafkaguard.authorizer.requests import Requirement
from kafkaguard.model import ItemError, KafkaErrorCode, ResourceType
from kafkaguard.protocol.build import NO_THROTTLE, build
from kafkaguard.protocol.codec import response_schema
from kafkaguard.protocol.replies import Reply
from kafkaguard.protocol.routes import Api
from kafkaguard.protocol.wire_errors import error_fields, wire_error
from kafkaguard.proxy.scope import ProxyScope

#: The denials of ``KafkaApis``' checks (Kafka's default text, which ``error_fields`` sends as null or as the text,
#: as the API's rule says).
TOPIC_DENIED = ItemError(KafkaErrorCode.TOPIC_AUTHORIZATION_FAILED)
GROUP_DENIED = ItemError(KafkaErrorCode.GROUP_AUTHORIZATION_FAILED)
CLUSTER_DENIED = ItemError(KafkaErrorCode.CLUSTER_AUTHORIZATION_FAILED)
TRANSACTIONAL_ID_DENIED = ItemError(KafkaErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
#: A batch that failed as a whole: the items not at fault (AddPartitionsToTxn).
NOT_ATTEMPTED = ItemError(KafkaErrorCode.OPERATION_NOT_ATTEMPTED)

ResponseT = TypeVar("ResponseT")
KeyT = TypeVar("KeyT")
AnsweredT = TypeVar("AnsweredT")


def code_and_message(
    error: ItemError, *, code: str = "error_code", message: str | None = None, default_text: bool = False
) -> dict[str, Any]:
    """An entity's error fields named ``code`` and (when it has one) ``message``, from ``error_fields``."""
    fields = error_fields(error, default_text=default_text)
    values: dict[str, Any] = {code: fields["error_code"]}
    if message is not None:
        values[message] = fields["error_message"]
    return values


def error_response(scope: ProxyScope, error: ItemError, **fields: Any) -> Entity:
    """The whole response refused: this API's response with ``error`` (a code, no message) and Kafka's
    placeholder ``fields`` (JoinGroup, Heartbeat, EndTxn, InitProducerId …)."""
    cls = response_schema(scope.api_key, scope.api_version)
    response: Entity = build(cls, throttle_time=NO_THROTTLE, error_code=wire_error(error), **fields)
    return response


class IndexedPartition(Protocol):
    """A request's partition named by ``partition_index`` (ListOffsets, OffsetCommit, DeleteRecords …)."""

    @property
    def partition_index(self) -> int: ...


class NamedTopic(Protocol):
    """A request's topic: its name and its partitions (ListOffsets, OffsetCommit, TxnOffsetCommit, DeleteRecords,
    OffsetDelete). mypy checks each version's kio class against it where a handler passes one."""

    @property
    def name(self) -> str: ...

    @property
    def partitions(self) -> Sequence[IndexedPartition]: ...


class IndexedTopic(Protocol):
    """A request's topic whose partitions are bare indexes (OffsetFetch, DescribeProducers)."""

    @property
    def name(self) -> str: ...

    @property
    def partition_indexes(self) -> Sequence[int]: ...


def named(topics: Iterable[NamedTopic]) -> Iterable[tuple[str, list[int]]]:
    """``refused_topics``' pairs of ``NamedTopic``s."""
    return ((topic.name, [p.partition_index for p in topic.partitions]) for topic in topics)


def indexed(topics: Iterable[IndexedTopic]) -> Iterable[tuple[str, Sequence[int]]]:
    """``refused_topics``' pairs of ``IndexedTopic``s."""
    return ((topic.name, topic.partition_indexes) for topic in topics)


#: One refused topic of an API's response ``cls``: ``error`` for each partition of ``indexes`` that the request
#: named under ``key`` (the topic's name; Fetch v13+ its id), and Kafka's placeholder values for the partition's
#: other fields (offsets -1, no records …). One typed function per API, written with the generated builders
#: (``proxy.builders``), so mypy checks every entity and field it names.
RefusedTopic = Callable[[type[ResponseT], KeyT, Iterable[int], ItemError], AnsweredT]


def refused_topics(
    topic: RefusedTopic[ResponseT, KeyT, AnsweredT],
    cls: type[ResponseT],
    topics: Iterable[tuple[KeyT, Iterable[int]]],
    error: ItemError,
) -> tuple[AnsweredT, ...]:
    """The response's topics for the request's ``topics`` (each its key and the partitions it names): ``error`` for
    every partition, as ``topic`` answers one."""
    return tuple(topic(cls, key, indexes, error) for key, indexes in topics)


def denied_topics(scope: ProxyScope, requirement: Requirement, names: Iterable[str]) -> set[str]:
    """Kafka's per-topic check: ``requirement`` on each topic of ``names`` (one audited decision); the denied."""
    unique = list(dict.fromkeys(names))
    outcome = scope.authorize(requirement, {ResourceType.TOPIC: unique})
    return {name for name in unique if not outcome.allows(ResourceType.TOPIC, name)}


async def with_refused(
    scope: ProxyScope,
    api: Api[object, ResponseT],
    asking: Entity | None,
    own: Callable[[], Reply],
    merged: Callable[[ResponseT], Reply],
) -> Reply:
    """The answer to a request of which a part may go upstream — ``asking``, the request with that part only; None
    when nothing may — and the rest is refused here: ``own()`` (the proxy's own response, the refusals alone) when
    nothing may go, else ``merged`` of the upstream's answer to ``asking`` (the refusals merged in, in the order
    Kafka lists them for the API)."""
    if asking is None:
        return own()
    return merged((await scope.forward(asking)).body(api))
