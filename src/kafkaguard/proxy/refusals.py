"""How the proxy answers what it refuses: every refusal is a ``model.ItemError``, put on the wire by
``protocol.wire_errors`` (``error_fields``, or ``wire_error`` for an entity with a code and no message).

Kafka answers a refused topic the same way in every per-partition API: each partition the request named gets the
error and the API's placeholder values (offsets -1, no records …), and the refused topics are merged with the
answer for the allowed ones. The APIs differ only in the names of their entities and fields, so each says those
once (a ``PartitionRefusal``) and the building and merging are done here, in one place for every handler: a
refusal then cannot drift from the others (the error text of one API, the placeholder of another).

Nothing here decides: the handlers authorize, and say what is refused with which error.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.static.protocol import Entity

from kafkaguard.authorizer.requests import Requirement
from kafkaguard.model import ItemError, KafkaErrorCode, ResourceType
from kafkaguard.protocol.build import NO_THROTTLE, build, nested, rebuild, rebuild_request
from kafkaguard.protocol.codec import response_schema
from kafkaguard.protocol.replies import Reply
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


@dataclass(frozen=True, slots=True)
class PartitionRefusal:
    """How one API answers the partitions of a refused topic: its entity and field names, request and response,
    and Kafka's placeholder values for a partition it did not serve."""

    topic_entity: str
    partition_entity: str
    #: the topic's name field (the same in the request and the response)
    topic: str = "name"
    #: the request's list of a topic's partitions, and a partition's index in it (None: the list holds the indexes)
    partitions: str = "partitions"
    index: str | None = "partition_index"
    #: the response's list of a topic's partitions, and a partition's index in it
    answer_partitions: str = "partitions"
    answer_index: str = "partition_index"
    #: the partition's error fields: its code, its message when it has one, and which message rule the API follows
    code: str = "error_code"
    message: str | None = None
    default_text: bool = False
    #: Kafka's values for the partition's other fields (offsets -1, no records …)
    placeholders: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def topic_answer(self, cls: type[Any], name: str, indexes: Iterable[Any], error: ItemError) -> Any:
        """One topic of the response: ``error`` for each of ``indexes``."""
        partition_cls = nested(cls, self.partition_entity)
        errors = code_and_message(error, code=self.code, message=self.message, default_text=self.default_text)
        partitions = tuple(
            build(partition_cls, **{self.answer_index: index}, **errors, **self.placeholders) for index in indexes
        )
        return build(nested(cls, self.topic_entity), **{self.topic: name, self.answer_partitions: partitions})

    def refused(self, cls: type[Any], topics: Iterable[Any], error: ItemError) -> tuple[Any, ...]:
        """The response's topics for the request's ``topics``: ``error`` for every partition each names."""
        return tuple(self.topic_answer(cls, getattr(t, self.topic), self._indexes(t), error) for t in topics)

    def every_topic(
        self, scope: ProxyScope, topics: Iterable[Any], error: ItemError, field: str = "topics", **fields: Any
    ) -> Entity:
        """The whole request refused: this API's response with ``error`` for every partition of ``topics`` (its
        ``field``) and the response's other ``fields``."""
        cls = response_schema(scope.api_key, scope.api_version)
        response: Entity = build(cls, throttle_time=NO_THROTTLE, **{field: self.refused(cls, topics, error)}, **fields)
        return response

    async def per_topic(self, scope: ProxyScope, request: Any, requirement: Requirement) -> Reply:
        """Kafka's per-topic check of ``request``'s ``topics``: ``requirement`` on each topic named (one audited
        decision). All allowed, the request goes upstream unchanged; else the denied topics' partitions get
        TOPIC_AUTHORIZATION_FAILED and the others are forwarded (``forward_allowed``)."""
        names = list(dict.fromkeys(getattr(topic, self.topic) for topic in request.topics))
        outcome = scope.authorize(requirement, {ResourceType.TOPIC: names})
        denied = {name for name in names if not outcome.allows(ResourceType.TOPIC, name)}
        if not denied:
            return await scope.relay()
        return await self.forward_allowed(scope, request, denied, TOPIC_DENIED)

    async def forward_allowed(
        self, scope: ProxyScope, request: Any, denied: Collection[str], error: ItemError, **empty: Any
    ) -> Reply:
        """The answer to ``request`` (its ``topics``) when the topics ``denied`` get ``error``: the others are
        forwarded, and ``with_refused`` merges the two."""
        topics = request.topics
        refused = [topic for topic in topics if getattr(topic, self.topic) in denied]
        allowed = tuple(topic for topic in topics if getattr(topic, self.topic) not in denied)
        cls = response_schema(scope.api_key, scope.api_version)
        return await with_refused(scope, request, self.refused(cls, refused, error), allowed, field="topics", **empty)

    def _indexes(self, topic: Any) -> list[Any]:
        partitions = getattr(topic, self.partitions)
        return list(partitions) if self.index is None else [getattr(p, self.index) for p in partitions]


async def with_refused(
    scope: ProxyScope,
    request: Any,
    refused: tuple[Any, ...],
    allowed: tuple[Any, ...],
    *,
    field: str,
    answer_field: str | None = None,
    refused_first: bool = False,
    **empty: Any,
) -> Reply:
    """The answer to a request of which ``allowed`` (its ``field``) may go upstream and ``refused`` (the response's
    ``answer_field``, by default ``field``) is answered here: the proxy's own response when nothing is allowed (with
    ``empty``'s other fields), else the upstream's answer to the allowed part with the refusals merged in, after its
    own items or (``refused_first``, as Kafka lists them for that API) before them."""
    answer_field = answer_field or field
    reply: Reply
    if not allowed:
        cls = response_schema(scope.api_key, scope.api_version)
        reply = build(cls, throttle_time=NO_THROTTLE, **{answer_field: refused}, **empty)
        return reply
    answer = (await scope.forward(rebuild_request(request, **{field: allowed}))).entity()
    answered = tuple(getattr(answer, answer_field))
    reply = rebuild(answer, **{answer_field: refused + answered if refused_first else answered + refused})
    return reply
