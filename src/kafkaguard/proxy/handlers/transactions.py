"""The transaction APIs (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeProducers,
DescribeTransactions, ListTransactions): authorized as ``KafkaApis`` does.

As ``KafkaApis`` (Kafka 3.9), for the client versions the proxy offers (``versions.CAPS``):

* AddPartitionsToTxn v0-3 (``handleAddPartitionsToTxnRequest``): WRITE on the transactional id, else every
  partition gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED; then WRITE on each topic, internal topics never being
  authorized (``filterNot(Topic.isInternal)``). Any denied topic fails the whole request: its partitions get
  TOPIC_AUTHORIZATION_FAILED, every other partition OPERATION_NOT_ATTEMPTED, and nothing is added (not forwarded);
* AddOffsetsToTxn: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group
  (GROUP_AUTHORIZATION_FAILED);
* EndTxn: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
* TxnOffsetCommit: WRITE on the transactional id, then READ on the group (either refusal: every partition gets that
  error), then READ on each topic: a denied topic's partitions get TOPIC_AUTHORIZATION_FAILED, the rest are
  committed;
* DescribeProducers: READ on each (valid) topic, else its partitions get TOPIC_AUTHORIZATION_FAILED with the
  error's default text; an invalid topic name is not authorized (the upstream answers INVALID_TOPIC_EXCEPTION);
* DescribeTransactions: DESCRIBE on each transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED (other
  fields zero); a described transaction lists only the partitions of topics the caller may DESCRIBE;
* ListTransactions: only the transactional ids the caller may DESCRIBE are listed (no error for the others).

Each check is asked in Kafka's order and only when Kafka would ask it (a refused transactional id stops there), so
the audit log records what Kafka's authorizer log would.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from kio.schema.describe_transactions.v0 import response as describe_transactions_v0
from kio.static.primitive import i16, i64
from kio.static.protocol import Entity

from kafkaguard.authorizer.requests import REQUIREMENTS, ApiKey, Check, Requirement
from kafkaguard.model import AclOperation, ItemError, ResourceType
from kafkaguard.protocol.build import NO_THROTTLE
from kafkaguard.protocol.codec import DECODE_ERRORS, reader_for, response_schema
from kafkaguard.protocol.errors import ProtocolError
from kafkaguard.protocol.lengths import check_body
from kafkaguard.protocol.replies import Reply
from kafkaguard.protocol.routes import route, routes
from kafkaguard.protocol.wire_errors import error_fields, wire_error
from kafkaguard.proxy.builders import (
    AddPartitionsToTxnTopicResult,
    TopicResponse,
    TxnOffsetCommitResponseTopic,
    add_partitions_to_txn_partition_result,
    add_partitions_to_txn_response,
    add_partitions_to_txn_topic_result,
    describe_producers_response,
    partition_response,
    rebuild_describe_producers_request,
    rebuild_describe_producers_response,
    rebuild_describe_transactions_request,
    rebuild_list_transactions_response,
    rebuild_txn_offset_commit_request,
    rebuild_txn_offset_commit_response,
    topic_response,
    txn_offset_commit_response,
    txn_offset_commit_response_partition,
    txn_offset_commit_response_topic,
)
from kafkaguard.proxy.messages import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    DESCRIBE_PRODUCERS,
    DESCRIBE_TRANSACTIONS,
    END_TXN,
    LIST_TRANSACTIONS,
    TXN_OFFSET_COMMIT,
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    EndTxnRequest,
    ListTransactionsRequest,
    ListTransactionsResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from kafkaguard.proxy.refusals import (
    GROUP_DENIED,
    NOT_ATTEMPTED,
    TOPIC_DENIED,
    TRANSACTIONAL_ID_DENIED,
    code_and_message,
    denied_topics,
    error_response,
    indexed,
    named,
    refused_topics,
    with_refused,
)
from kafkaguard.proxy.scope import ProxyHandler, ProxyScope
from kafkaguard.proxy.wire import UpstreamProtocolError, response_header_size
from kafkaguard.service.topics import INTERNAL_TOPICS, topic_name_error

TOPIC, GROUP, TRANSACTIONAL_ID = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID


def _refused_partitions(
    cls: type[AddPartitionsToTxnResponse], name: str, indexes: Iterable[int], error: ItemError
) -> AddPartitionsToTxnTopicResult:
    results = tuple(
        add_partitions_to_txn_partition_result(cls, partition_index=index, partition_error_code=wire_error(error))
        for index in indexes
    )
    return add_partitions_to_txn_topic_result(cls, name=name, results_by_partition=results)


def _refused_commit(
    cls: type[TxnOffsetCommitResponse], name: str, indexes: Iterable[int], error: ItemError
) -> TxnOffsetCommitResponseTopic:
    """Kafka's ``TxnOffsetCommitRequest.getErrorResponseTopics``."""
    partitions = tuple(
        txn_offset_commit_response_partition(cls, partition_index=index, error_code=wire_error(error))
        for index in indexes
    )
    return txn_offset_commit_response_topic(cls, name=name, partitions=partitions)


def _refused_producers(
    cls: type[DescribeProducersResponse], name: str, indexes: Iterable[int], error: ItemError
) -> TopicResponse:
    """``ApiError(error)``: the error's default text."""
    errors = error_fields(error, default_text=True)
    partitions = tuple(
        partition_response(cls, partition_index=index, **errors, active_producers=()) for index in indexes
    )
    return topic_response(cls, name=name, partitions=partitions)


#: DescribeTransactions lists a transaction's partitions only for the topics the caller may describe.
DESCRIBE_TRANSACTION_TOPICS = Requirement(
    "DescribeTransactions(topics)", per_resource=(Check(AclOperation.DESCRIBE, TOPIC),), denial_error=""
)


def _allows(scope: ProxyScope, resource_type: ResourceType, name: str) -> bool:
    """One check of this API's requirement on one resource (audited)."""
    return scope.authorize(REQUIREMENTS[scope.api_key], {resource_type: [name]}).allows(resource_type, name)


# ------------------------------------------------------------------------------------------- AddPartitionsToTxn


async def add_partitions_to_txn(scope: ProxyScope, request: AddPartitionsToTxnRequest) -> Reply:
    cls: type[AddPartitionsToTxnResponse] = response_schema(ApiKey.ADD_PARTITIONS_TO_TXN, scope.api_version)
    partitions: dict[str, dict[int, None]] = {}  # Kafka works on the set of TopicPartitions
    for topic in request.v3_and_below_topics:
        partitions.setdefault(topic.name, {}).update(dict.fromkeys(int(p) for p in topic.partitions))
    if not _allows(scope, TRANSACTIONAL_ID, request.v3_and_below_transactional_id):
        return _add_partitions_results(cls, partitions, lambda _topic: TRANSACTIONAL_ID_DENIED)
    candidates = [name for name in partitions if name not in INTERNAL_TOPICS]
    outcome = scope.authorize(REQUIREMENTS[ApiKey.ADD_PARTITIONS_TO_TXN], {TOPIC: candidates})
    denied = {name for name in partitions if name in INTERNAL_TOPICS or not outcome.allows(TOPIC, name)}
    if not denied:
        return await scope.relay()
    return _add_partitions_results(cls, partitions, lambda topic: TOPIC_DENIED if topic in denied else NOT_ATTEMPTED)


def _add_partitions_results(
    cls: type[AddPartitionsToTxnResponse], partitions: dict[str, dict[int, None]], error_of: Callable[[str], ItemError]
) -> AddPartitionsToTxnResponse:
    results = tuple(_refused_partitions(cls, name, indexes, error_of(name)) for name, indexes in partitions.items())
    return add_partitions_to_txn_response(cls, throttle_time=NO_THROTTLE, results_by_topic_v3_and_below=results)


# ----------------------------------------------------------------------------------- AddOffsetsToTxn, EndTxn


async def add_offsets_to_txn(scope: ProxyScope, request: AddOffsetsToTxnRequest) -> Reply:
    if not _allows(scope, TRANSACTIONAL_ID, request.transactional_id):
        return error_response(scope, TRANSACTIONAL_ID_DENIED)
    if not _allows(scope, GROUP, request.group_id):
        return error_response(scope, GROUP_DENIED)
    return await scope.relay()


async def end_txn(scope: ProxyScope, request: EndTxnRequest) -> Reply:
    if not _allows(scope, TRANSACTIONAL_ID, request.transactional_id):
        return error_response(scope, TRANSACTIONAL_ID_DENIED)
    return await scope.relay()


# ---------------------------------------------------------------------------------------------- TxnOffsetCommit


async def txn_offset_commit(scope: ProxyScope, request: TxnOffsetCommitRequest) -> Reply:
    cls: type[TxnOffsetCommitResponse] = response_schema(ApiKey.TXN_OFFSET_COMMIT, scope.api_version)
    for resource_type, name, error in (
        (TRANSACTIONAL_ID, request.transactional_id, TRANSACTIONAL_ID_DENIED),
        (GROUP, request.group_id, GROUP_DENIED),
    ):
        if not _allows(scope, resource_type, name):
            every = refused_topics(_refused_commit, cls, named(request.topics), error)
            return txn_offset_commit_response(cls, throttle_time=NO_THROTTLE, topics=every)
    denied = denied_topics(scope, REQUIREMENTS[ApiKey.TXN_OFFSET_COMMIT], (t.name for t in request.topics))
    if not denied:
        return await scope.relay()
    refused = refused_topics(_refused_commit, cls, named(t for t in request.topics if t.name in denied), TOPIC_DENIED)
    allowed = tuple(t for t in request.topics if t.name not in denied)
    return await with_refused(
        scope,
        TXN_OFFSET_COMMIT,
        rebuild_txn_offset_commit_request(request, topics=allowed) if allowed else None,
        own=lambda: txn_offset_commit_response(cls, throttle_time=NO_THROTTLE, topics=refused),
        merged=lambda answer: rebuild_txn_offset_commit_response(answer, topics=answer.topics + refused),
    )


# -------------------------------------------------------------------------------------------- DescribeProducers


async def describe_producers(scope: ProxyScope, request: DescribeProducersRequest) -> Reply:
    # An invalid name gets INVALID_TOPIC_EXCEPTION before any check (``checkValidTopic``): the upstream answers it.
    names = list(dict.fromkeys(topic.name for topic in request.topics if topic_name_error(topic.name) is None))
    outcome = scope.authorize(REQUIREMENTS[ApiKey.DESCRIBE_PRODUCERS], {TOPIC: names})
    denied = {name for name in names if not outcome.allows(TOPIC, name)}
    if not denied:
        return await scope.relay()
    cls: type[DescribeProducersResponse] = response_schema(ApiKey.DESCRIBE_PRODUCERS, scope.api_version)
    refused = refused_topics(
        _refused_producers, cls, indexed(t for t in request.topics if t.name in denied), TOPIC_DENIED
    )
    allowed = tuple(t for t in request.topics if t.name not in denied)
    return await with_refused(
        scope,
        DESCRIBE_PRODUCERS,
        rebuild_describe_producers_request(request, topics=allowed) if allowed else None,
        own=lambda: describe_producers_response(cls, throttle_time=NO_THROTTLE, topics=refused),
        merged=lambda answer: rebuild_describe_producers_response(answer, topics=answer.topics + refused),
    )


# ----------------------------------------------------------------------------------------- DescribeTransactions


def _int64_start_time(cls: type[Any], states: type[Any] | None = None) -> type[Any]:
    """``cls`` (a DescribeTransactions v0 entity) with ``transaction_start_time`` a plain int64 and its
    ``transaction_states`` of the class ``states``.

    Kafka answers -1 for the start time of a transaction that has none (state Empty after InitProducerId); kio reads
    the field as a datetime and refuses negative values ("Cannot parse negative timestamp"), so the upstream's
    answer is read, and sent back, with these twins instead (same fields, same bytes on the wire)."""
    specs: list[tuple[str, Any, Any]] = []
    for field in dataclasses.fields(cls):
        kind: Any = field.type
        metadata = dict(field.metadata)
        if field.name == "transaction_start_time":
            kind, metadata["kafka_type"] = i64, "int64"
        elif field.name == "transaction_states" and states is not None:
            # states is a class chosen at run time; mypy accepts only static classes as type arguments
            kind = tuple[states, ...]  # type: ignore[valid-type]
        spec = dataclasses.field(metadata=metadata, default=field.default, default_factory=field.default_factory)
        specs.append((field.name, kind, spec))
    class_vars = ("__type__", "__version__", "__flexible__", "__api_key__", "__header_schema__")
    namespace = {name: getattr(cls, name) for name in class_vars if hasattr(cls, name)}
    twin = dataclasses.make_dataclass(cls.__name__, specs, namespace=namespace, frozen=True, slots=True, kw_only=True)
    twin.__module__ = __name__
    return twin


_TransactionState = _int64_start_time(describe_transactions_v0.TransactionState)
_DescribeTransactionsResponse = _int64_start_time(
    describe_transactions_v0.DescribeTransactionsResponse, _TransactionState
)


def decode_describe_transactions(payload: bytes) -> Any:
    """The upstream's DescribeTransactions v0 answer (as ``proxy.wire.decode_response``, with the int64 twin)."""
    api = ApiKey.DESCRIBE_TRANSACTIONS
    offset = response_header_size(api, 0, payload)
    try:
        check_body(_DescribeTransactionsResponse, payload, offset, max_items=None)
        return reader_for(_DescribeTransactionsResponse)(payload, offset)[0]
    except (ProtocolError, *DECODE_ERRORS) as e:
        raise UpstreamProtocolError(f"malformed {api.api_name} v0 response: {e}") from e


async def describe_transactions(scope: ProxyScope, request: DescribeTransactionsRequest) -> Reply:
    ids = list(dict.fromkeys(request.transactional_ids))
    outcome = scope.authorize(REQUIREMENTS[ApiKey.DESCRIBE_TRANSACTIONS], {TRANSACTIONAL_ID: ids})
    allowed = tuple(tid for tid in request.transactional_ids if outcome.allows(TRANSACTIONAL_ID, tid))
    refused = tuple(
        _TransactionState(
            **code_and_message(TRANSACTIONAL_ID_DENIED),
            transactional_id=tid,
            transaction_state="",
            transaction_timeout=timedelta(0),
            transaction_start_time=i64(0),
            producer_id=i64(0),
            producer_epoch=i16(0),
            topics=(),
        )
        for tid in request.transactional_ids
        if not outcome.allows(TRANSACTIONAL_ID, tid)
    )
    # the int64 twins are made at run time (typed Any): the response is a kio entity all the same
    whole: Entity
    if not allowed:
        whole = _DescribeTransactionsResponse(throttle_time=NO_THROTTLE, transaction_states=refused)
        return whole
    forwarded = await scope.forward(
        None if not refused else rebuild_describe_transactions_request(request, transactional_ids=allowed)
    )
    answer = decode_describe_transactions(forwarded.payload)
    names = list(dict.fromkeys(topic.topic for state in answer.transaction_states for topic in state.topics))
    topics = scope.authorize(DESCRIBE_TRANSACTION_TOPICS, {TOPIC: names})
    states = tuple(
        dataclasses.replace(state, topics=tuple(t for t in state.topics if topics.allows(TOPIC, t.topic)))
        for state in answer.transaction_states
    )
    whole = dataclasses.replace(answer, transaction_states=states + refused)
    return whole


# --------------------------------------------------------------------------------------------- ListTransactions


async def list_transactions(scope: ProxyScope, request: ListTransactionsRequest) -> Reply:
    answer: ListTransactionsResponse = (await scope.forward()).body(LIST_TRANSACTIONS)
    ids = list(dict.fromkeys(state.transactional_id for state in answer.transaction_states))
    outcome = scope.authorize(REQUIREMENTS[ApiKey.LIST_TRANSACTIONS], {TRANSACTIONAL_ID: ids})
    visible = tuple(s for s in answer.transaction_states if outcome.allows(TRANSACTIONAL_ID, s.transactional_id))
    return rebuild_list_transactions_response(answer, transaction_states=visible)


#: API → handler (each checked against its API's request union); merged into ``proxy.dispatch.HANDLERS``.
HANDLERS: dict[ApiKey, ProxyHandler] = routes(
    route(ADD_PARTITIONS_TO_TXN, add_partitions_to_txn),
    route(ADD_OFFSETS_TO_TXN, add_offsets_to_txn),
    route(END_TXN, end_txn),
    route(TXN_OFFSET_COMMIT, txn_offset_commit),
    route(DESCRIBE_PRODUCERS, describe_producers),
    route(DESCRIBE_TRANSACTIONS, describe_transactions),
    route(LIST_TRANSACTIONS, list_transactions),
)
