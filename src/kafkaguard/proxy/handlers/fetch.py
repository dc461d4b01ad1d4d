"""Fetch (1): READ on each topic, per topic; follower fetches are refused; fetch sessions are turned off.

As ``KafkaApis.handleFetchRequest`` (Kafka 3.9): a consumer's fetch needs READ on each topic it names, and a
denied topic's partitions get TOPIC_AUTHORIZATION_FAILED while the others are fetched; a fetch from a replica
(``replica_id >= 0``) needs CLUSTER_ACTION, which no client of the proxy has: all its partitions are refused.

Fetch sessions (KIP-227) let a consumer stop naming the partitions it fetches; Kafka then authorizes the session's
partitions on every fetch from state the broker keeps. The proxy does not see that state, so it asks for no
session: each fetch goes upstream as a full, sessionless fetch (session id 0, epoch -1, Kafka's FINAL_EPOCH), the
upstream answers session id 0, and clients (Java's ``FetchSessionHandler``, librdkafka) keep sending full fetches.
Every fetch therefore names every partition it reads, and every one is authorized. After each such answer Java asks
for a new session again (id 0, epoch 0, no forgotten topics); the proxy declines it in the client's bytes, setting
the epoch (a fixed offset in the body) to -1, instead of decoding and rebuilding the request
(``_new_session_declined``): the rebuild was a large share of the proxy's CPU per message for Java consumers.

Topics by id (v13+, KIP-516): each id is resolved to its name first (``topic_ids``, asked of the upstream when not
known) and READ is checked on the name, as Kafka resolves ids with its metadata cache before authorizing: an id no
topic has is UNKNOWN_TOPIC_ID, one the caller may not read TOPIC_AUTHORIZATION_FAILED (Kafka tells the two apart:
topic ids are not secret to it). Only the allowed ids go upstream; the upstream resolves them itself, so an id whose
topic was deleted since is the upstream's UNKNOWN_TOPIC_ID, never another topic. A v15+ follower says who it is in
``replica_state``.

Fast path: when every topic is allowed, the upstream's answer (the records) comes back unchanged, never decoded
and never held: it is spliced from the upstream's socket to the client's as it arrives.

Leader discovery (Fetch v16–v17, KIP-951): they go upstream at the client's own version, so the upstream fills what
a v16+ answer adds — each partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names its new leader's id
and epoch (``current_leader``, tagged, no address: passed on as it is), and the answer's last field, the top-level
tagged ``node_endpoints``, gives those leaders' addresses (``KafkaApis.handleFetchRequest``, 3.9: ``if (versionId
>= 16) { … case Errors.NOT_LEADER_OR_FOLLOWER | Errors.FENCED_LEADER_EPOCH => … nodeEndpoints.put(node.id(),
node)``). A client connects to them directly, so no upstream address may pass: on the fast path the answer is walked
as it streams (``fetch_walk``, driven by ``links``: its structure peeked at, its records spliced on unread as
before) and its last bytes — the top-level tagged section — are read and rewritten in place to the same length (the
frame's size went out first): the endpoints at the proxy's per-broker addresses (``addresses.rewrite_node_endpoints``,
new nodes learned as Metadata's), padded with an unknown tagged field that clients skip; when they cannot fit (a
proxy host longer than the upstream's) the field is blanked — renumbered to an unknown tag, its bytes zeroed — and
the client asks Metadata instead, as a client before KIP-951 does (``fetch_walk.tail_with``). An answer the proxy
decodes (some topics refused) has its endpoints rewritten before it is encoded. A malformed answer closes the
client's connection, as a bad frame does. Cost against an unedited relay: per answer a peek, then a peek and a
splice round per partition whose records are spliced, the last few bytes read and written (two calls), and one walk
step per partition (``links``, ``fetch_walk``). v17 differs from v16 only in the request (a follower's
``ReplicaDirectoryId``, read only for a follower's fetch, which is refused).

In passthrough (each client upstream as itself) the broker's own ACLs decide too: its refusals of topics kafkaguard
allowed are noted (``broker_refusals``) — from a v13+ answer on the fast path by the same streaming walk (v13–v15
walked only in passthrough; the partitions answered TOPIC_AUTHORIZATION_FAILED collected on the way, noted at the
tail), from a decoded answer of any version. Fetch v4–v12 answers on the fast path stream unread.

Client quotas (``proxy.quotas``), as Kafka's consumer fetch: when a ``consumer_byte_rate`` applies, the fetch's
max_bytes is capped at what the quota allows in one go (``getMaxValueInQuotaWindow``), and the response's size is
charged (a relayed answer's size is its frame size, read before its first byte is passed on). Within the quota the
answer goes through unchanged; over it, the charge is taken back, the upstream's answer is read and dropped, and the
client gets Kafka's throttled response (no partitions, ``throttle_time_ms`` = max(the upstream's, the proxy's
throttle)); the connection is then muted for the throttle. The client fetches the same offsets again after it.
Without a quota the fast path is untouched.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from uuid import UUID

from kio.schema.errors import ErrorCode

from kafkaguard.authorizer.requests import REQUIREMENTS, ApiKey, RequestAuthorization
from kafkaguard.model import ItemError, KafkaErrorCode, ResourceType
from kafkaguard.protocol.build import NO_THROTTLE
from kafkaguard.protocol.codec import encode_response, response_schema
from kafkaguard.protocol.header import decode_header
from kafkaguard.protocol.replies import NO_RESPONSE, ClientWriter, Reply
from kafkaguard.protocol.wire_errors import wire_error
from kafkaguard.proxy.broker_refusals import noted
from kafkaguard.proxy.builders import (
    FetchableTopicResponse,
    PartitionData,
    fetch_response,
    fetchable_topic_response,
    partition_data,
    rebuild_fetch_request,
    rebuild_fetch_response,
)
from kafkaguard.proxy.fetch_walk import FetchAnswerWalk, node_endpoints_in, tail_with
from kafkaguard.proxy.handlers.addresses import rewrite_node_endpoints
from kafkaguard.proxy.handlers.by_id import topic_names
from kafkaguard.proxy.messages import FETCH, FetchRequest, FetchResponse
from kafkaguard.proxy.quotas import FETCH as FETCH_QUOTA
from kafkaguard.proxy.quotas import QuotaMeter, user_of
from kafkaguard.proxy.refusals import TOPIC_DENIED, refused_topics
from kafkaguard.proxy.scope import Forwarded, ProxyScope
from kafkaguard.proxy.walks import AnswerEdit

TOPIC = ResourceType.TOPIC
#: Kafka's FetchMetadata: no session, and the epoch that asks for none.
NO_SESSION, FINAL_EPOCH = 0, -1


def _refused_partitions(
    cls: type[FetchResponse], indexes: Iterable[int], error: ItemError
) -> tuple[PartitionData, ...]:
    """Kafka's ``FetchResponse.partitionResponse(tp, error)``: watermarks -1, no records (``MemoryRecords.EMPTY``,
    never null: clients read its size)."""
    return tuple(
        partition_data(
            cls,
            partition_index=index,
            error_code=wire_error(error),
            high_watermark=-1,
            last_stable_offset=-1,
            log_start_offset=-1,
            aborted_transactions=None,
            preferred_read_replica=-1,
            records=b"",
        )
        for index in indexes
    )


def _refused_by_name(
    cls: type[FetchResponse], name: str, indexes: Iterable[int], error: ItemError
) -> FetchableTopicResponse:
    return fetchable_topic_response(cls, topic=name, partitions=_refused_partitions(cls, indexes, error))


def _refused_by_id(
    cls: type[FetchResponse], topic_id: UUID, indexes: Iterable[int], error: ItemError
) -> FetchableTopicResponse:
    return fetchable_topic_response(cls, topic_id=topic_id, partitions=_refused_partitions(cls, indexes, error))


def _refused(
    scope: ProxyScope, cls: type[FetchResponse], topics: Iterable[Any], error: ItemError
) -> tuple[FetchableTopicResponse, ...]:
    """The response's topics for the request's ``topics``: by id from v13, else by name."""
    key = _topic_key(scope)
    # The topic's key is a field of another name per version range (``topic``, ``topic_id``): read by its name.
    keyed = [(getattr(t, key), [p.partition for p in t.partitions]) for t in topics]
    if key == "topic_id":
        return refused_topics(_refused_by_id, cls, keyed, error)
    return refused_topics(_refused_by_name, cls, keyed, error)


#: Fetch names topics by id from v13 (KIP-516); its answers carry ``node_endpoints`` from v16 (KIP-951).
_BY_ID_FROM, _ENDPOINTS_FROM = 13, 16
#: From v15 a follower names itself in the tagged ``replica_state``, no longer in the body's ``replica_id``.
_REPLICA_STATE_FROM = 15
_UNKNOWN_ID = ItemError(KafkaErrorCode.UNKNOWN_TOPIC_ID)


def _edit(scope: ProxyScope, decided: _Decided) -> AnswerEdit | None:
    """How a relayed answer is walked: a v16+ answer, its ``node_endpoints`` rewritten (see the module docstring);
    in passthrough every v13+ answer, the broker's refusals in it noted when its walk is done (at its tail)."""
    version = scope.api_version
    if scope.upstream.as_client and version >= _BY_ID_FROM:
        refused: list[tuple[bytes, int]] = []
        walk = functools.partial(FetchAnswerWalk, api_version=version, refused=refused)
        return AnswerEdit(walk=walk, tail=functools.partial(_noted_tail, scope, decided, refused))
    if version < _ENDPOINTS_FROM:
        return None
    walk = functools.partial(FetchAnswerWalk, api_version=version)
    return AnswerEdit(walk=walk, tail=functools.partial(_proxied_tail, scope))


async def _proxied_tail(scope: ProxyScope, tail: bytes) -> bytes:
    """A v16+ answer's top-level tagged section with its ``node_endpoints`` at the proxy's addresses, same length
    (the walk's ``NodeEndpoint`` has the fields ``rewrite_node_endpoints`` reads and replaces)."""
    endpoints = node_endpoints_in(tail)
    if endpoints is None:
        return tail
    return tail_with(tail, await rewrite_node_endpoints(scope, endpoints))


async def _noted_tail(scope: ProxyScope, decided: _Decided, refused: list[tuple[bytes, int]], tail: bytes) -> bytes:
    """A passthrough answer's tail, once its walk has collected the partitions the broker refused (``refused``: by
    topic id's bytes): those noted, the tail as ``_proxied_tail`` makes it (v16+) or unchanged."""
    if refused:
        names = decided.names
        noted(scope, decided.outcome, TOPIC, ((names.get(UUID(bytes=topic_id)), code) for topic_id, code in refused))
    return await _proxied_tail(scope, tail) if scope.api_version >= _ENDPOINTS_FROM else tail


@dataclass(frozen=True, slots=True)
class _Decided:
    """What a fetch's topics were decided against: ``names`` of the request's topic ids (v13+; empty before), the
    outcome of READ on their names — what a broker's refusal in the answer is noted against (``broker_refusals``)."""

    outcome: RequestAuthorization
    names: dict[UUID, str]


def _note_decoded(scope: ProxyScope, decided: _Decided, answer: FetchResponse) -> None:
    """The broker's refusals in a decoded answer (some topics refused by kafkaguard), noted (in passthrough)."""
    if not scope.upstream.as_client:
        return
    key = _topic_key(scope)  # by id (v13+: named from ``decided``) or by name

    def name(topic: Any) -> str | None:
        keyed = getattr(topic, key)
        return decided.names.get(keyed) if key == "topic_id" else keyed

    answered = ((name(t), p.error_code) for t in answer.responses for p in t.partitions)
    noted(scope, decided.outcome, TOPIC, answered)


async def fetch(scope: ProxyScope, request: FetchRequest) -> Reply:
    meter = scope.meter
    charge = _Charge(scope, meter, user_of(scope.context.principal), scope.client_id or "")
    limit = meter.max_fetch_bytes(charge.user, charge.client_id)
    capped = False
    if limit is not None and request.max_bytes > limit:
        request = rebuild_fetch_request(request, max_bytes=limit, min_bytes=min(request.min_bytes, limit))
        capped = True
    by_id = scope.api_version >= _BY_ID_FROM
    if _replica_id(request) >= 0:  # a follower: CLUSTER_ACTION, never granted through the proxy
        return _answer(scope, request.topics, TOPIC_DENIED)  # Kafka: no client quota
    unknown: set[Any]  # topics by id (v13+) or by name: the request's topic key
    denied: set[Any]
    if by_id:
        unknown, denied, decided = await _denied_ids(scope, request)
    else:
        names = list(dict.fromkeys(str(getattr(topic, "topic")) for topic in request.topics))  # noqa: B009 - v4-v12
        outcome = scope.authorize(REQUIREMENTS[ApiKey.FETCH], {TOPIC: names})
        unknown, denied = set(), {name for name in names if not outcome.allows(TOPIC, name)}
        decided = _Decided(outcome, {})
    if not denied and not unknown:
        session = getattr(request, "session_id", NO_SESSION), getattr(request, "session_epoch", FINAL_EPOCH)
        body = None  # the client's bytes go up as they are: sessionless already, or made so in place
        if capped or session != (NO_SESSION, FINAL_EPOCH):
            patched = None if capped else _new_session_declined(scope, request)
            if patched is None:
                body = _sessionless(request)
            else:
                scope = charge.scope = scope.with_payload(patched)
        if limit is None:
            return await scope.relay(body, _edit(scope, decided))
        return await charge.relay(body, _edit(scope, decided))
    key = _topic_key(scope)
    refused = [topic for topic in request.topics if getattr(topic, key) in denied]
    missing = [topic for topic in request.topics if getattr(topic, key) in unknown]
    allowed = tuple(topic for topic in request.topics if getattr(topic, key) not in denied | unknown)
    cls: type[FetchResponse] = response_schema(ApiKey.FETCH, scope.api_version)
    refusals = _refused(scope, cls, missing, _UNKNOWN_ID) + _refused(scope, cls, refused, TOPIC_DENIED)
    if not allowed:
        return charge.local(_response(scope, refusals))
    # Only the allowed topics go upstream, sessionless: a rebuilt fetch names nothing the caller was not allowed,
    # and without a session (id 0, FINAL_EPOCH) the upstream adds no partition of an earlier fetch to it.
    forwarded = await scope.forward(rebuild_fetch_request(_sessionless(request), topics=allowed))
    throttled = charge.forwarded(forwarded)
    if throttled is not None:
        return throttled
    answer: FetchResponse = forwarded.body(FETCH)
    _note_decoded(scope, decided, answer)
    endpoints = getattr(answer, "node_endpoints", ())  # v16+: at the proxy's addresses before any client sees them
    if endpoints:
        answer = rebuild_fetch_response(answer, node_endpoints=await rewrite_node_endpoints(scope, endpoints))
    answer = rebuild_fetch_response(answer, responses=answer.responses + refusals)
    return answer


async def _denied_ids(scope: ProxyScope, request: Any) -> tuple[set[UUID], set[UUID], _Decided]:
    """Fetch v13+ (topics by id), as ``KafkaApis.handleFetchRequest`` (Kafka 3.9): each id resolved to its name
    (``metadataCache.topicIdsToNames``; here ``topic_ids``, asked of the upstream when not known), an id no topic has
    is UNKNOWN_TOPIC_ID, then READ is checked on each name (TOPIC_AUTHORIZATION_FAILED). Kafka tells the two apart
    (topic ids are not secret in Kafka; the proxy answers as Kafka does). An id refused on a name remembered from
    earlier is asked again, so that a topic deleted since is answered UNKNOWN_TOPIC_ID, as Kafka would.

    Returns (unknown ids, denied ids, what the others were decided on)."""
    ids = list(dict.fromkeys(topic.topic_id for topic in request.topics))
    names = await topic_names(scope, ids)
    outcome = scope.authorize(REQUIREMENTS[ApiKey.FETCH], {TOPIC: list(dict.fromkeys(names.values()))})
    denied = {i for i, name in names.items() if not outcome.allows(TOPIC, name)}
    if denied:
        confirmed = await topic_names(scope, denied, fresh=True)
        names = {i: n for i, n in names.items() if i not in denied or i in confirmed}
        denied = set(confirmed)
    return {i for i in ids if i not in names}, denied, _Decided(outcome, names)


def _sessionless(request: Any) -> Any:
    return rebuild_fetch_request(request, session_id=NO_SESSION, session_epoch=FINAL_EPOCH, forgotten_topics_data=())


#: Kafka's ``FetchMetadata.INITIAL_EPOCH``: session id 0 with epoch 0 asks the broker to create a session.
_INITIAL_EPOCH = 0
#: A Fetch body before ``session_epoch`` (v7+): replica_id (int32, v7-v14; v15+ say it in a tagged field),
#: max_wait_ms, min_bytes, max_bytes (int32 each), isolation_level (int8), session_id (int32).
_BEFORE_EPOCH = {True: 4 + 4 + 4 + 4 + 1 + 4, False: 4 + 4 + 4 + 1 + 4}
_NEW_SESSION_BYTES = bytes(4) + bytes(4)  # session_id 0, epoch 0
_FINAL_EPOCH_BYTES = b"\xff\xff\xff\xff"


def _new_session_declined(scope: ProxyScope, request: Any) -> bytes | None:
    """The client's bytes with a request for a new session (id 0, epoch 0, no forgotten topics) turned into a
    sessionless one (epoch -1) in place, or None when it asks anything else (its request is then rebuilt).

    Why: Java's ``FetchSessionHandler`` asks for a new session on every fetch after an answer that created none
    (session id 0), which is every answer through the proxy. Rebuilding each of those (decode, convert, encode) cost
    a large share of the proxy's CPU per message for Java consumers (``bench_kip848``; see
    docs/benchmarks.md, "Figures from the code"); the only byte-level difference the
    rebuild makes is the epoch, whose offset in the body is fixed."""
    if (request.session_id, request.session_epoch) != (NO_SESSION, _INITIAL_EPOCH) or request.forgotten_topics_data:
        return None
    payload = scope.payload
    _, body_at = decode_header(payload, flexible=scope.api_version >= _FLEXIBLE_FROM)
    epoch_at = body_at + _BEFORE_EPOCH[scope.api_version < _REPLICA_STATE_FROM]
    if payload[epoch_at - 4 : epoch_at + 4] != _NEW_SESSION_BYTES:  # never patch bytes the layout does not vouch for
        return None
    return payload[:epoch_at] + _FINAL_EPOCH_BYTES + payload[epoch_at + 4 :]


#: A response's size prefix; its header: correlation id, then (flexible versions, Fetch v12+) tagged fields.
_INT32 = struct.Struct(">i")
_FLEXIBLE_FROM = 12


class _Charge:
    """Charging one Fetch's answer to the client's consumer quota (see the module docstring). Kafka charges the
    response's size as ``FetchResponse.sizeOf``: 4 bytes of header plus the body (no header tagged fields)."""

    def __init__(self, scope: ProxyScope, meter: QuotaMeter, user: str, client_id: str) -> None:
        self.scope, self.meter, self.user, self.client_id = scope, meter, user, client_id
        self.header_size = 5 if scope.api_version >= _FLEXIBLE_FROM else 4

    def record(self, payload_size: int) -> int:
        size = payload_size - self.header_size + 4
        return self.meter.record(FETCH_QUOTA, self.user, self.client_id, size, refund_if_throttled=True)

    def throttled(self, throttle_ms: int, upstream_ms: int = 0) -> Reply:
        """Kafka's ``getThrottledResponse``: no partitions, the throttle, muted after it is sent."""
        cls = response_schema(ApiKey.FETCH, self.scope.api_version)
        throttle = timedelta(milliseconds=max(throttle_ms, upstream_ms))
        body = fetch_response(
            cls, throttle_time=throttle, error_code=ErrorCode.none, session_id=NO_SESSION, responses=()
        )
        return self.meter.throttled(body, throttle_ms)

    def local(self, answer: FetchResponse) -> Reply:
        """An answer the proxy makes itself (every topic refused)."""
        scope = self.scope
        size = len(encode_response(ApiKey.FETCH, scope.api_version, scope.correlation_id, answer)) - 4
        throttle_ms = self.record(size)
        return self.throttled(throttle_ms) if throttle_ms else answer

    def forwarded(self, forwarded: Forwarded) -> Reply | None:
        """The throttled answer for a decoded upstream answer, or None when within the quota."""
        throttle_ms = self.record(len(forwarded.payload))
        if not throttle_ms:
            return None
        return self.throttled(throttle_ms, _upstream_throttle(forwarded.payload, self.header_size - 4) or 0)

    async def relay(self, body: Any, edit: AnswerEdit | None) -> Reply:
        """``scope.relay`` through a writer that charges the answer's frame size before passing any of it on, and
        drops the answer instead when that throttles."""
        writers: list[_MeteringWriter] = []

        def metering(client: ClientWriter) -> _MeteringWriter:
            writers.append(_MeteringWriter(client, self.record, self.header_size - 4))
            return writers[0]

        await self.scope.relay_through(metering, body, edit)  # the answer has been charged (and passed on or dropped)
        writer = writers[0]
        if writer.throttle_ms:
            return self.throttled(writer.throttle_ms, writer.upstream_throttle_ms())
        return NO_RESPONSE


def _upstream_throttle(payload: bytes | bytearray, tag_bytes: int) -> int | None:
    """The throttle_time_ms of a Fetch response payload (after the correlation id and, when flexible, an empty tag
    section); None when it is not there to read."""
    at = 4 + tag_bytes
    if len(payload) < at + 4 or (tag_bytes and payload[4] != 0):
        return None
    return int(_INT32.unpack_from(payload, at)[0])


class _MeteringWriter:
    """Stands for the client's writer in ``UpstreamConnection.relay``: the first 4 bytes written are the frame's
    size, charged at once; within the quota everything passes on as it comes, over it nothing does (the first few
    bytes are kept to read the upstream's own throttle)."""

    def __init__(self, client: ClientWriter, record: Callable[[int], int], tag_bytes: int) -> None:
        self._client = client
        self._record = record
        self._tag_bytes = tag_bytes
        self._keep = 4 + 4 + tag_bytes + 4  # size, correlation id, tag section, throttle_time_ms
        self._head = bytearray()
        self._passing: bool | None = None
        self.throttle_ms = 0

    def write(self, data: bytes) -> None:
        if self._passing:
            self._client.write(data)
            return
        taken = data[: self._keep - len(self._head)]
        self._head += taken
        if self._passing is not None or len(self._head) < 4:
            return  # dropping (the head kept), or the size is not all there yet
        (size,) = _INT32.unpack_from(self._head)
        self.throttle_ms = self._record(size)
        self._passing = not self.throttle_ms
        if self._passing:
            self._client.write(bytes(self._head))
            self._client.write(data[len(taken) :])

    async def drain(self) -> None:
        if self._passing:
            await self._client.drain()

    def upstream_throttle_ms(self) -> int:
        return _upstream_throttle(bytes(self._head[4:]), self._tag_bytes) or 0


def _answer(scope: ProxyScope, topics: Any, error: ItemError) -> FetchResponse:
    cls: type[FetchResponse] = response_schema(ApiKey.FETCH, scope.api_version)
    return _response(scope, _refused(scope, cls, topics, error))


def _response(scope: ProxyScope, responses: tuple[Any, ...]) -> FetchResponse:
    cls = response_schema(ApiKey.FETCH, scope.api_version)
    return fetch_response(
        cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, session_id=NO_SESSION, responses=responses
    )


def _replica_id(request: Any) -> int:
    """Who fetches: a follower's broker id, or -1 for a consumer (v15+ say it in the tagged ``replica_state``)."""
    if hasattr(request, "replica_id"):
        return int(request.replica_id)
    return int(request.replica_state.replica_id)


def _topic_key(scope: ProxyScope) -> str:
    return "topic_id" if scope.api_version >= _BY_ID_FROM else "topic"
