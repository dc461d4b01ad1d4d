"""An in-memory upstream for the proxy's unit tests, and a harness that runs one request through a proxy handler.

``MemoryUpstream`` stands for ``proxy.upstream.UpstreamConnection`` (it is a ``proxy.upstream.Upstream``), as httpx's
``MockTransport`` stands for a network transport: it is built from a function ``answer(api_key, api_version,
request) -> response entity`` (None: no answer, as for a Produce with acks=0; raising ``UpstreamUnavailable``: the
upstream failed). It decodes every request the proxy sends as a broker would (``protocol.codec.decode_request``),
records the request and its bytes, and answers encoded bytes in request order: ``exchange`` returns the response
payload, ``pass_answer_on`` writes the framed answer to the writer it is given, after checking the correlation id
as the real connection does. So a handler's decisions — what goes upstream, what the client is answered — are
tested without sockets, threads or a broker, in milliseconds.

``handle`` runs one client request through the proxy's handler for its API (``proxy.dispatch.HANDLERS``) with a
``ProxyScope`` made as ``ProxyDispatcher.dispatch`` makes it — real ``Services`` (ACLs from a store in a temporary
directory), a real ``Outbox`` over a collecting writer, a ``NodeDirectory``, a ``QuotaMeter`` — and answers the
reply as ``protocol.connection`` does (a relayed answer passed on through the outbox, a response encoded and sent).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkaguard.audit.trail.writer import AuditLog
from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.bootstrap import Services, build_services
from kafkaguard.config import Listener, load_settings
from kafkaguard.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    RequestContext,
    ResourcePattern,
    ResourceType,
)
from kafkaguard.protocol.codec import (
    DecodedRequest,
    decode_request,
    decode_request_head,
    encode_response,
    response_schema,
)
from kafkaguard.protocol.connection import MAX_QUEUED_ANSWERS
from kafkaguard.protocol.outbox import Outbox
from kafkaguard.protocol.passthrough import LoginUnavailable, RelayedAnswer
from kafkaguard.protocol.replies import ClientWriter, Close, NoResponse, Relayed, Reply, Throttled
from kafkaguard.protocol.scope import BrokerInfo, ListenerContext, scope_fields
from kafkaguard.proxy.dispatch import HANDLERS, WALKED
from kafkaguard.proxy.handlers.produce import produce
from kafkaguard.proxy.links import pass_on_edited
from kafkaguard.proxy.nodes import NodeDirectory
from kafkaguard.proxy.produce_request import walk_produce_request
from kafkaguard.proxy.quotas import QuotaMeter
from kafkaguard.proxy.scope import ProxyScope
from kafkaguard.proxy.upstream import CLIENT_ID, Address, Upstream, UpstreamUnavailable
from kafkaguard.proxy.versions import CAPS
from kafkaguard.proxy.walks import AnswerEdit
from kafkaguard.proxy.wire import (
    UpstreamProtocolError,
    correlation_id_of,
    decode_response,
    encode_request,
    request_correlation_id,
)
from tests.actors import ACTOR
from tests.proxy.fake_kafka import zero
from tests.proxy.fetch_answers import readable

#: What the upstream decodes: every API the proxy forwards, from v0 to the proxy's cap (a forwarded request may be of
#: another version than the client's: ``versions.FORWARDED_FROM``), and ApiVersions, which the proxy asks itself.
VERSIONS = {key: (0, high) for key, (_low, high) in CAPS.items()} | {ApiKey.API_VERSIONS: (0, 3)}
UPSTREAM = Address("kafka-1.internal", 9092)
LISTENER = Listener.parse("SASL_PLAINTEXT://127.0.0.1:19092")
PROXY_HOST = "proxy.example"
CLIENT_HOST = "10.0.0.7"
#: An edited answer is read in pieces of this many bytes (odd: its pieces end inside fields).
EDIT_PIECE = 7
#: Fetch answers name brokers (``node_endpoints``) from this version.
FETCH_ENDPOINTS_FROM = 16

#: ``(api_key, api_version, decoded request body) -> response entity``, None for no answer.
Answer = Callable[[ApiKey, int, Any], Any]


def empty_answer(api_key: ApiKey, api_version: int, _request: Any) -> Any:
    """The response of that version with every field its default or zero, empty or null (no error)."""
    return zero(response_schema(api_key, api_version))


def answer_of(api_key: ApiKey, api_version: int, **fields: Any) -> Any:
    """A response entity of that version: ``fields`` given, every other field zero."""
    return entity(response_schema(api_key, api_version), **fields)


def entity(cls: type[Any], **fields: Any) -> Any:
    """A kio entity (request or response, or one nested in it): ``fields`` given, every other field zero."""
    return dataclasses.replace(zero(cls), **fields)


def unavailable(_api_key: ApiKey, _api_version: int, _request: Any) -> Any:
    """An upstream that is not there: every request fails as a refused connection does."""
    raise UpstreamUnavailable(f"upstream {UPSTREAM} unreachable: ConnectionRefusedError")


@dataclass
class Sent:
    """One request as the upstream received it: its bytes and what a broker decodes of them."""

    payload: bytes
    request: DecodedRequest

    @property
    def api_key(self) -> ApiKey:
        return self.request.api_key

    @property
    def body(self) -> Any:
        return self.request.body


class MemoryUpstream:
    """See the module docstring. ``sent`` holds every request received, in order; ``answered`` every answer given;
    ``passed_on`` the correlation ids of the answers passed on to a client writer."""

    def __init__(self, answer: Answer = empty_answer, *, address: Address = UPSTREAM, as_client: bool = False) -> None:
        self._answer = answer
        #: As ``UpstreamConnection.as_client``: logged in as the client (passthrough), not the service account.
        self.as_client = as_client
        self.address = address
        self.sent: list[Sent] = []
        self.passed_on: list[int] = []
        #: Every answer given (framed), in order.
        self.answered: list[bytes] = []
        #: (correlation id, framed answer), in request order, as a broker answers a connection's requests.
        self._answers: deque[tuple[int, bytes]] = deque()
        self._correlation = itertools.count(1)
        self._failure: UpstreamUnavailable | None = None
        self.closed = False
        #: What becomes of an edited answer's framed bytes on the way (a test corrupts them).
        self.corrupt: Callable[[bytes], bytes] = lambda framed: framed
        #: How the broker answers a passed-through login's tokens, (mechanism, token, first) -> its answer (None: it
        #: cannot be reached); ``relayed`` keeps each (mechanism, token, first) received.
        self.login: Callable[[str, bytes, bool], RelayedAnswer] | None = None
        self.relayed: list[tuple[str, bytes, bool]] = []

    def close(self) -> None:
        """As ``UpstreamConnection.close`` (the client connection ended; ``ProxyDispatcher.close``)."""
        self.closed = True

    def bodies(self, api_key: ApiKey) -> list[Any]:
        return [sent.body for sent in self.sent if sent.api_key is api_key]

    async def send(self, payload: bytes) -> None:
        if self._failure is not None:
            raise self._failure
        request = decode_request(payload, VERSIONS)  # what the proxy sends must be a request a broker can read
        self.sent.append(Sent(payload, request))
        api_key, version = request.api_key, request.header.api_version
        try:
            body = self._answer(api_key, version, request.body)
        except UpstreamUnavailable as e:
            self._failure = e  # as the real connection: every later call fails alike
            raise
        if body is not None:
            framed = encode_response(api_key, version, request.header.correlation_id, body)
            self._answers.append((request.header.correlation_id, framed))
            self.answered.append(framed)

    async def exchange(self, payload: bytes) -> bytes:
        await self.send(payload)
        return self._next_answer(request_correlation_id(payload))[4:]

    async def pass_answer_on(self, correlation_id: int, client: ClientWriter, edit: AnswerEdit | None = None) -> None:
        """With ``edit``, the answer is walked as the real connection's copy path walks it (``links.pass_on_edited``),
        read in pieces of ``EDIT_PIECE`` bytes so that the walk asks for more on the way."""
        framed = self._next_answer(correlation_id)
        self.passed_on.append(correlation_id)
        if edit is not None:
            framed = self.corrupt(framed)
        if edit is None:
            client.write(framed)
            await client.drain()
            return
        position = [8]  # the frame's size and correlation id go first

        async def read(size: int) -> bytes:
            at = position[0]
            position[0] = min(len(framed), at + min(size, EDIT_PIECE))
            return framed[at : position[0]]

        try:
            await pass_on_edited(read, framed[:8], len(framed) - 8, client, edit)
        except UpstreamProtocolError as e:  # as the real connection: the client's connection must close
            self._failure = UpstreamUnavailable(str(e))
            raise self._failure from e

    async def relay_login(self, mechanism: str, token: bytes, *, first: bool) -> RelayedAnswer:
        """As ``UpstreamConnection.relay_login``: the answer ``login`` gives (none: the broker is unreachable)."""
        if self.login is None:
            raise LoginUnavailable(f"upstream {self.address} could not be asked about a login: ConnectionRefusedError")
        self.relayed.append((mechanism, token, first))
        return self.login(mechanism, token, first)

    async def call(self, api_key: ApiKey, api_version: int, body: Any) -> Any:
        payload = encode_request(api_key, api_version, next(self._correlation), CLIENT_ID, body)
        return decode_response(api_key, api_version, await self.exchange(payload))

    def _next_answer(self, correlation_id: int) -> bytes:
        """The framed answer next in line, which must answer ``correlation_id`` (as the real connection checks)."""
        if self._failure is not None:
            raise self._failure
        if not self._answers:  # the real connection would time out waiting
            raise UpstreamUnavailable(f"upstream {self.address} failed: TimeoutError: no answer to {correlation_id}")
        answered, framed = self._answers.popleft()
        if answered != correlation_id:
            raise UpstreamUnavailable(
                f"upstream {self.address} answered correlation id {answered}, not {correlation_id}"
            )
        return framed


def _is_upstream(upstream: MemoryUpstream) -> Upstream:
    """Never called: mypy checks here that the fake is an ``Upstream``, as the real connection is."""
    return upstream


# ------------------------------------------------------------------------------------------------- the harness


class CollectingWriter:
    """The client's socket as the outbox sees it: what is written is kept."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        return None

    def frames(self) -> list[bytes]:
        """The payloads written (no length prefix)."""
        raw, out, offset = bytes(self.data), [], 0
        while offset < len(raw):
            size = int.from_bytes(raw[offset : offset + 4], "big")
            out.append(raw[offset + 4 : offset + 4 + size])
            offset += 4 + size
        return out


def memory_services(data_dir: Path) -> Services:
    """Real services over a store in ``data_dir`` (``User:admin`` a super user); close them after."""
    return build_services(load_settings(None, data_dir=data_dir, super_users="User:admin"))


def allow(
    services: Services,
    principal: str,
    resource_type: ResourceType,
    name: str,
    *operations: AclOperation,
    pattern: PatternType = PatternType.PREFIXED,
) -> None:
    """ACLs allowing ``principal`` ``operations`` on ``name`` (a prefix unless ``pattern`` says otherwise)."""
    resource = ResourcePattern(resource_type, name, pattern)
    bindings = [
        AclBinding(resource, AccessControlEntry(principal, "*", op, AclPermissionType.ALLOW)) for op in operations
    ]
    assert all(result.succeeded for result in services.acls.create_acls(bindings, actor=ACTOR))


@dataclass
class Handled:
    """One request through a proxy handler: the client's bytes, the handler's reply, what reached the client."""

    payload: bytes
    reply: Reply
    client: list[bytes] = field(default_factory=list)
    closed: bool = False

    def answer(self) -> Any:
        """The one answer the client got, decoded at the request's version (its correlation id checked)."""
        assert len(self.client) == 1, f"{len(self.client)} answers"
        (frame,) = self.client
        header = decode_request(self.payload, VERSIONS).header
        assert correlation_id_of(frame) == header.correlation_id
        if header.api_key == ApiKey.FETCH and header.api_version >= FETCH_ENDPOINTS_FROM:
            frame = readable(frame, header.api_version)  # the proxy's filler tags, which kio refuses
        return decode_response(ApiKey(header.api_key), header.api_version, frame)


def assert_relayed(handled: Handled, upstream: MemoryUpstream) -> None:
    """The fast path: the client's bytes went upstream unchanged, and the upstream's answer came back unchanged."""
    assert [sent.payload for sent in upstream.sent] == [handled.payload]
    assert handled.client == [framed[4:] for framed in upstream.answered]
    assert upstream.passed_on == [correlation_id_of(handled.client[0])]


def make_scope(
    services: Services,
    upstream: Upstream,
    outbox: Outbox,
    payload: bytes,
    *,
    principal: str,
    nodes: NodeDirectory | None = None,
    meter: QuotaMeter | None = None,
    audit: AuditLog | None = None,
) -> ProxyScope:
    """A ``ProxyScope`` for ``payload`` (a client's request), as ``ProxyDispatcher.dispatch`` makes one."""
    broker = BrokerInfo(0, PROXY_HOST, LISTENER.port, "proxy-cluster")
    context = ListenerContext(services, LISTENER, broker, audit)
    request = decode_request(payload, VERSIONS)
    return ProxyScope(
        **scope_fields(context, RequestContext(principal, CLIENT_HOST), request),
        permissive=services.rollout.permissive,
        payload=payload,
        correlation_id=request.header.correlation_id,
        listener=LISTENER,
        upstream=upstream,
        nodes=nodes if nodes is not None else NodeDirectory([UPSTREAM], PROXY_HOST),
        outbox=outbox,
        meter=meter if meter is not None else QuotaMeter(services.quotas),
    )


def client_request(body: Any, *, correlation_id: int = 7, client_id: str | None = "test-client") -> bytes:
    """A client's request payload (no length prefix) for the kio request entity ``body``."""
    return encode_request(ApiKey(type(body).__api_key__), type(body).__version__, correlation_id, client_id, body)


def handle(
    services: Services,
    upstream: Upstream,
    body: Any,
    *,
    principal: str = "User:alice",
    nodes: NodeDirectory | None = None,
    meter: QuotaMeter | None = None,
    audit: AuditLog | None = None,
) -> Handled:
    """``body`` (a kio request entity), sent by ``principal``, through its proxy handler; answered as
    ``protocol.connection`` answers a reply. ``UpstreamUnavailable`` propagates, as it does to the connection.
    With ``audit``, the request's records are written to it before this returns."""
    payload = client_request(body)

    async def go() -> Handled:
        writer = CollectingWriter()
        closed: list[bool] = []
        outbox = Outbox(writer, limit=MAX_QUEUED_ANSWERS, close=lambda: closed.append(True), peer=CLIENT_HOST)
        scope = make_scope(services, upstream, outbox, payload, principal=principal, nodes=nodes, meter=meter,
                           audit=audit)  # fmt: skip
        reply = await handler_reply(scope, payload)
        handled = Handled(payload, reply)
        answered = reply.reply if isinstance(reply, Throttled) else reply
        if isinstance(answered, Relayed):
            outbox.relay(answered.answer)
        elif not isinstance(answered, NoResponse | Close):
            await outbox.send(encode_response(scope.api_key, scope.api_version, scope.correlation_id, answered))
        await outbox.flushed()
        await outbox.stop()
        handled.client = writer.frames()
        handled.closed = bool(closed)
        if audit is not None:
            await audit.flush()
        return handled

    return asyncio.run(go())


async def handler_reply(scope: ProxyScope, payload: bytes) -> Reply:
    """What the proxy's handler for ``payload``'s API answers, its body as ``ProxyDispatcher`` hands it over:
    decoded by kio, or walked (``WALKED``: Produce)."""
    if scope.api_key in WALKED:
        head = decode_request_head(payload, VERSIONS)
        return await produce(scope, walk_produce_request(payload, head.body_at, scope.api_version, max_items=10_000))
    return await HANDLERS[scope.api_key](scope, scope_body(payload))


def scope_body(payload: bytes) -> Any:
    """The request body as the connection hands it to the handler: decoded from the client's bytes."""
    return decode_request(payload, VERSIONS).body
