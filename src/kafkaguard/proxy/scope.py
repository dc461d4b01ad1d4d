"""What a proxy handler sees of one request: everything a server handler sees (``protocol.scope.RequestScope``: who
asks, the one authorizer snapshot, auditing), plus the way upstream for this client connection."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TypeVar

from kio.static.protocol import Entity

from kafkaguard.config import Listener
from kafkaguard.protocol.outbox import Outbox
from kafkaguard.protocol.replies import Relayed, Reply
from kafkaguard.protocol.routes import Api, Routed
from kafkaguard.protocol.scope import RequestScope
from kafkaguard.proxy.nodes import NodeDirectory
from kafkaguard.proxy.quotas import QuotaMeter
from kafkaguard.proxy.relay import AnswerRelay, Through
from kafkaguard.proxy.upstream import Upstream
from kafkaguard.proxy.walks import AnswerEdit
from kafkaguard.proxy.wire import decode_response, encode_request, request_correlation_id

ResponseT = TypeVar("ResponseT")


@dataclass(frozen=True, slots=True)
class Forwarded:
    """The upstream's answer to a forwarded request: its payload, decoded only on demand."""

    scope: ProxyScope
    payload: bytes

    def body(self, api: Api[object, ResponseT]) -> ResponseT:
        """The decoded kio response as ``api``'s response union (``forwarded.body(PRODUCE)``: a ``ProduceResponse``,
        ``proxy.messages``), lengths checked first; ``UpstreamProtocolError`` if unreadable. From there mypy checks
        every field a handler reads (a field some versions lack is narrowed with ``isinstance`` first).

        :raises TypeError: ``api`` is not the scope's API (a bug of the handler, never upstream input): the answer is
            decoded with the scope's schema, so only that API's union describes it."""
        scope = self.scope
        if api.key is not scope.api_key:
            raise TypeError(f"a {scope.api_key.api_name} answer read as {api.key.api_name}'s")
        return api.response(self.entity())

    def entity(self) -> Entity:
        """The decoded kio response as an entity of no API in particular: for code shared by every API
        (``refusals.with_refused``), which reads it only through the API's own descriptor."""
        return decode_response(self.scope.api_key, self.scope.api_version, self.payload)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyScope(RequestScope):
    """``payload`` is the client's request as received (no length prefix), ``correlation_id`` its id;
    ``listener`` the client listener it came in on (addresses are rewritten for it); ``nodes`` the upstream's
    brokers as the proxy knows them."""

    payload: bytes
    correlation_id: int
    listener: Listener
    #: This client connection's way upstream (``UpstreamConnection``; in unit tests an in-memory one).
    upstream: Upstream
    nodes: NodeDirectory
    #: The client connection's one writer: a relayed answer goes out through it in its turn.
    outbox: Outbox
    #: The proxy's one quota meter (``ProxyServer.meter``).
    meter: QuotaMeter

    async def forward(self, body: Entity | None = None) -> Forwarded:
        """Send the request upstream — as received when ``body`` is None, else ``body`` with the client's header
        values — and wait for the answer (after the relayed answers before it: the upstream answers in order)."""
        await self.outbox.flushed()
        return Forwarded(self, await self.upstream.exchange(self._payload_for(body)))

    async def relay(self, body: Entity | None = None, edit: AnswerEdit | None = None) -> Relayed:
        """Send the request upstream (as ``forward``); its answer goes to the client unchanged, as it arrives, after
        the answers before it: the fast path of a request whose every resource is allowed. Returns once the request
        is sent; the connection's outbox passes the answer on (``relay.AnswerRelay``; with ``edit``, walked and its
        last bytes rewritten on the way)."""
        return Relayed(await self._sent(body, edit))

    async def relay_through(self, through: Through, body: Entity | None = None, edit: AnswerEdit | None = None) -> None:
        """``relay``, its answer passed on through the writer ``through`` makes of the client's (a quota's metering
        writer), and waited for: the caller then knows what passed."""
        self.outbox.relay(await self._sent(body, edit, through))
        await self.outbox.flushed()

    async def _sent(self, body: Entity | None, edit: AnswerEdit | None, through: Through | None = None) -> AnswerRelay:
        """Send the request upstream (as ``forward``, without waiting for the answers before it): its answer's way
        back."""
        payload = self._payload_for(body)
        await self.upstream.send(payload)
        return AnswerRelay(self.upstream, request_correlation_id(payload), edit, through)

    async def forward_without_response(self, body: Entity | None = None) -> None:
        """Send a request the upstream does not answer (Produce with acks=0)."""
        await self.outbox.flushed()
        await self.upstream.send(self._payload_for(body))

    def forwarded_at(self, api_version: int) -> ProxyScope:
        """This request's scope as the proxy forwards it at ``api_version`` instead of the client's
        (``versions.FORWARDED_FROM``): what goes upstream is encoded, and the answer decoded, at that version. The
        client's own bytes are of another version: every forward through it names its body."""
        return dataclasses.replace(self, api_version=api_version, payload=b"")

    def with_payload(self, payload: bytes) -> ProxyScope:
        """This request's scope with ``payload`` as the bytes a forward without a body sends: the client's own,
        changed in place by the handler at a field of fixed offset (Fetch's session epoch), never re-encoded."""
        return dataclasses.replace(self, payload=payload)

    def _payload_for(self, body: Entity | None) -> bytes:
        if body is None:
            if not self.payload:  # a scope of ``forwarded_at``: a bug of the handler, never client input
                raise TypeError(f"{self.api_key.api_name} v{self.api_version}: forwarded without a body")
            return self.payload
        return encode_request(self.api_key, self.api_version, self.correlation_id, self.client_id, body)


#: A proxy handler as a dispatch table holds it (``protocol.routes.route`` checks its body against its API's).
ProxyHandler = Routed[ProxyScope, Reply]
