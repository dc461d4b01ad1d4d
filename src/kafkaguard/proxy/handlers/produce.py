"""Produce (0): WRITE on each topic, per topic; WRITE on the transactional id for transactional records.

As ``KafkaApis.handleProduceRequest`` (Kafka 3.9):

1. a request carrying transactional records needs WRITE on its transactional id, else every partition gets
   TRANSACTIONAL_ID_AUTHORIZATION_FAILED (nothing is written);
2. each topic needs WRITE: a denied topic's partitions get TOPIC_AUTHORIZATION_FAILED, the others are written;
3. with acks=0 the broker answers nothing; if any partition failed it closes the connection instead, so the
   producer learns of it (the proxy does the same after forwarding the allowed part).

Fast path: when every topic is allowed, the client's bytes go upstream unchanged and the upstream's answer comes
back unchanged — the request is walked, not decoded (``produce_request``: names, partitions, the first batches'
attributes for step 1; the records are never decoded or copied). Only a request with a refused topic is decoded
whole, to be rebuilt without it.

Leader discovery (KIP-951, Produce v10+): a partition answered NOT_LEADER_OR_FOLLOWER carries its new leader's id
and epoch (``current_leader``, no address: passed on as it is), and the answer lists those leaders' addresses in
the top-level tagged field ``node_endpoints`` — only then (``KafkaApis.handleProduceRequest``, 3.9:
``case Errors.NOT_LEADER_OR_FOLLOWER => … nodeEndpoints.put(node.id(), node)`` for ``request.header.apiVersion >=
10``). A client connects to them directly, so they are rewritten to the proxy's per-broker addresses
(``addresses.rewrite_node_endpoints``, as Metadata's brokers) before any client sees them. On the fast path a v10+
answer is edited as Fetch's is (``walks.AnswerEdit``, driven by ``links``), by an edit that holds it whole (a
Produce answer is a few dozen bytes per partition, never records): walked once up to its top-level tagged fields
(``produce_walk``: one Python step per element, nothing decoded); only when that section is not empty — an answer
with leader changes — is it decoded, rewritten and re-encoded (unknown tags dropped). Cost against v9's relay: the
walk, O(partitions) small steps, and the answer passed on in one write instead of as it arrives; no extra round
trip and no change to pipelining (the request goes upstream at once).

Both must allow (passthrough, ``upstream_authentication: passthrough``): the client's requests reach the broker as
the client, so the broker's ACLs decide too. An answer that may hold its refusal of a topic or transactional id
kafkaguard allowed (``produce_walk.PassthroughProduceAnswerWalk``: its bytes hold code 29 or 53) is decoded and the
refusals noted (``proxy.broker_refusals``: counted, and audited bounded), then passed on unchanged; the others pass
as they came, held whole (a few dozen bytes a partition) instead of spliced.

Client quotas (``proxy.quotas``): as Kafka, the request's size (header and body, ``request.sizeInBytes``) is charged
to the client's ``producer_byte_rate`` meter once the transactional check passed, denied topics or not. Within the
quota the fast path above is untouched; over it, the upstream's answer is decoded and re-encoded with
``throttle_time_ms`` = max(the upstream's, the proxy's throttle), and the connection is muted for the throttle
(with acks=0 too: no answer, but muted).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable
from datetime import timedelta
from typing import NamedTuple

from kafkaguard.authorizer.requests import REQUIREMENTS, ApiKey, RequestAuthorization
from kafkaguard.model import ItemError, ResourceType
from kafkaguard.protocol.build import NO_THROTTLE
from kafkaguard.protocol.codec import encode_response, response_schema
from kafkaguard.protocol.replies import NO_RESPONSE, Close, Reply
from kafkaguard.protocol.wire_errors import error_fields
from kafkaguard.proxy.broker_refusals import noted
from kafkaguard.proxy.builders import (
    TopicProduceResponse,
    partition_produce_response,
    produce_response,
    rebuild_produce_request,
    rebuild_produce_response,
    topic_produce_response,
)
from kafkaguard.proxy.handlers.addresses import rewrite_node_endpoints
from kafkaguard.proxy.messages import PRODUCE, ProduceRequest, ProduceResponse
from kafkaguard.proxy.produce_request import ProducedTopic, ProduceRequestView
from kafkaguard.proxy.produce_walk import ENDPOINTS_FROM, PassthroughProduceAnswerWalk, ProduceAnswerWalk
from kafkaguard.proxy.quotas import PRODUCE as PRODUCE_QUOTA
from kafkaguard.proxy.quotas import user_of
from kafkaguard.proxy.refusals import TOPIC_DENIED, TRANSACTIONAL_ID_DENIED, refused_topics
from kafkaguard.proxy.scope import ProxyScope
from kafkaguard.proxy.walks import AnswerEdit
from kafkaguard.proxy.wire import decode_response

TOPIC, TRANSACTIONAL_ID = ResourceType.TOPIC, ResourceType.TRANSACTIONAL_ID
_CORRELATION = struct.Struct(">i")
_TRANSACTIONAL_ID_REFUSED = TRANSACTIONAL_ID_DENIED.code.value


class _Decided(NamedTuple):
    """What kafkaguard allowed of one request: its topics and, for transactional records, its transactional id.
    The broker's refusals of them are noted from its answer (``_note_refusals``)."""

    topics: RequestAuthorization
    transaction: RequestAuthorization | None = None
    transactional_id: str | None = None


def _refused_topic(
    cls: type[ProduceResponse], name: str, indexes: Iterable[int], error: ItemError
) -> TopicProduceResponse:
    """Kafka's ``PartitionResponse(error)`` for each partition: offsets -1, no append time."""
    errors = error_fields(error)
    partitions = tuple(
        partition_produce_response(
            cls, index=index, **errors, base_offset=-1, log_append_time=None, log_start_offset=-1, record_errors=()
        )
        for index in indexes
    )
    return topic_produce_response(cls, name=name, partition_responses=partitions)


def _refused(
    cls: type[ProduceResponse], topics: Iterable[ProducedTopic], error: ItemError
) -> tuple[TopicProduceResponse, ...]:
    return refused_topics(_refused_topic, cls, ((t.name, t.partitions) for t in topics), error)


async def produce(scope: ProxyScope, request: ProduceRequestView) -> Reply:
    """``request`` as walked from the client's bytes (``produce_request``): decoded whole only to be rebuilt
    without a refused topic."""
    requirement = REQUIREMENTS[ApiKey.PRODUCE]
    transactional_id = request.transactional_id
    txn = None
    if request.transactional:
        txn = scope.authorize(requirement, {TRANSACTIONAL_ID: [transactional_id]} if transactional_id else {})
        if transactional_id is None or not txn.allows(TRANSACTIONAL_ID, transactional_id):
            return _every_partition(scope, request, TRANSACTIONAL_ID_DENIED)
    names = list(dict.fromkeys(topic.name for topic in request.topics))
    outcome = scope.authorize(requirement, {TOPIC: names})
    decided = _Decided(outcome, txn, transactional_id)
    denied = {name for name in names if not outcome.allows(TOPIC, name)}
    fire_and_forget = request.acks == 0
    user, client_id = user_of(scope.context.principal), scope.client_id or ""
    throttle_ms = scope.meter.record(PRODUCE_QUOTA, user, client_id, len(scope.payload))
    if not denied:
        if fire_and_forget:
            await scope.forward_without_response()
            return scope.meter.throttled(NO_RESPONSE, throttle_ms)
        if not throttle_ms:
            return await _relay(scope, decided)
        whole: ProduceResponse = (await scope.forward()).body(PRODUCE)
        _note_refusals(scope, decided, whole)
        whole = await _proxied(scope, whole)
        return scope.meter.throttled(_with_throttle(whole, throttle_ms), throttle_ms)
    allowed_any = any(topic.name not in denied for topic in request.topics)
    if fire_and_forget:
        if allowed_any:
            await scope.forward_without_response(await _without(request, denied))
        return Close(f"Produce with acks=0 to topics it may not write: {sorted(denied)}")
    cls = response_schema(ApiKey.PRODUCE, scope.api_version)
    refused = _refused(cls, [t for t in request.topics if t.name in denied], TOPIC_DENIED)
    throttle = timedelta(milliseconds=throttle_ms)
    if not allowed_any:
        return scope.meter.throttled(produce_response(cls, responses=refused, throttle_time=throttle), throttle_ms)
    answer: ProduceResponse = (await scope.forward(await _without(request, denied))).body(PRODUCE)
    _note_refusals(scope, decided, answer)
    merged = rebuild_produce_response(await _proxied(scope, answer), responses=answer.responses + refused)
    return scope.meter.throttled(_with_throttle(merged, throttle_ms), throttle_ms)


async def _without(request: ProduceRequestView, denied: set[str]) -> ProduceRequest:
    """The request decoded whole and rebuilt without the topics in ``denied``."""
    whole = await request.decoded()
    return rebuild_produce_request(whole, topic_data=tuple(t for t in whole.topic_data if t.name not in denied))


async def _relay(scope: ProxyScope, decided: _Decided) -> Reply:
    """The fast path: the client's bytes go upstream at once; the answer comes back unchanged, unless (v10+) it
    names brokers (see the module docstring)."""
    return await scope.relay(edit=_edit(scope, decided))


def _edit(scope: ProxyScope, decided: _Decided) -> AnswerEdit | None:
    """How a relayed answer is walked: in passthrough, every answer, for the broker's refusals; else a v10+ answer,
    rewritten when it names brokers (see the module docstring)."""
    version = scope.api_version
    if scope.upstream.as_client:
        noting = functools.partial(PassthroughProduceAnswerWalk, api_version=version)
        return AnswerEdit(walk=noting, tail=functools.partial(_proxied_answer, scope, decided), held=True)
    if version < ENDPOINTS_FROM:
        return None
    walk = functools.partial(ProduceAnswerWalk, api_version=version)
    return AnswerEdit(walk=walk, tail=functools.partial(_proxied_answer, scope, None), held=True)


async def _proxied_answer(scope: ProxyScope, decided: _Decided | None, body: bytes) -> bytes:
    """An answer the walk gave the handler — ``body``, every byte after its correlation id (``produce_walk``'s
    tail) — decoded: the broker's refusals in it noted (``decided``: in passthrough), ``node_endpoints`` (v10+)
    rewritten and re-encoded, else ``body`` itself."""
    version = scope.api_version
    payload = _CORRELATION.pack(scope.correlation_id) + body  # the upstream's: ``pass_answer_on`` checked it is this
    answer = PRODUCE.response(decode_response(ApiKey.PRODUCE, version, payload))
    if decided is not None:
        _note_refusals(scope, decided, answer)
    proxied = await _proxied(scope, answer)
    if proxied is answer:
        return body
    framed = encode_response(ApiKey.PRODUCE, version, scope.correlation_id, proxied)
    return framed[8:]  # after the frame's size and the correlation id


def _note_refusals(scope: ProxyScope, decided: _Decided, answer: ProduceResponse) -> None:
    """The broker's refusals in ``answer`` of what kafkaguard allowed (``decided``), noted: a topic's partitions
    answered TOPIC_AUTHORIZATION_FAILED, the transactional id's TRANSACTIONAL_ID_AUTHORIZATION_FAILED (each
    partition of the request carries it). Nothing with the service account (``noted``)."""
    codes = [(str(t.name), int(p.error_code)) for t in answer.responses for p in t.partition_responses]
    noted(scope, decided.topics, TOPIC, ((name, code) for name, code in codes if code != _TRANSACTIONAL_ID_REFUSED))
    if decided.transaction is not None and decided.transactional_id is not None:
        refused = [(decided.transactional_id, code) for _, code in codes if code == _TRANSACTIONAL_ID_REFUSED]
        noted(scope, decided.transaction, TRANSACTIONAL_ID, refused)


async def _proxied(scope: ProxyScope, answer: ProduceResponse) -> ProduceResponse:
    """``answer`` with its ``node_endpoints`` (v10+) at the proxy's addresses."""
    endpoints = getattr(answer, "node_endpoints", ())
    if not endpoints:
        return answer
    return rebuild_produce_response(answer, node_endpoints=await rewrite_node_endpoints(scope, endpoints))


def _with_throttle(answer: ProduceResponse, throttle_ms: int) -> ProduceResponse:
    """``answer`` with Kafka's throttle: the larger of the upstream's and the proxy's."""
    if not throttle_ms:
        return answer
    return rebuild_produce_response(
        answer, throttle_time=max(answer.throttle_time, timedelta(milliseconds=throttle_ms))
    )


def _every_partition(scope: ProxyScope, request: ProduceRequestView, error: ItemError) -> Reply:
    if request.acks == 0:
        return Close(f"Produce with acks=0 refused: {error.code.name}")
    cls: type[ProduceResponse] = response_schema(ApiKey.PRODUCE, scope.api_version)
    return produce_response(cls, throttle_time=NO_THROTTLE, responses=_refused(cls, request.topics, error))
