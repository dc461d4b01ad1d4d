"""What a proxy handler sees of one request: everything a server handler sees (``server.scope.RequestScope``: who
asks, the one authorizer snapshot, auditing), plus the way upstream for this client connection."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Final

from kafkaguard.config import Listener
from kafkaguard.proxy.links import ClientWriter
from kafkaguard.proxy.nodes import NodeDirectory
from kafkaguard.proxy.quotas import QuotaMeter
from kafkaguard.proxy.upstream import UpstreamConnection
from kafkaguard.proxy.wire import decode_response, encode_request
from kafkaguard.server.scope import RequestScope


class _NoResponse:
    def __repr__(self) -> str:
        return "NO_RESPONSE"


#: A request that gets no response (Produce with acks=0), forwarded or not — or whose response ``relay`` already
#: streamed to the client.
NO_RESPONSE: Final = _NoResponse()

#: What a proxy handler returns: a kio response entity (encoded with the client's header), or NO_RESPONSE (nothing
#: to send, or ``relay`` sent it).
Reply = Any


@dataclass(frozen=True, slots=True)
class Forwarded:
    """The upstream's answer to a forwarded request: its payload, decoded only on demand."""

    scope: ProxyScope
    payload: bytes

    def body(self) -> Any:
        """The decoded kio response (lengths checked first; ``UpstreamProtocolError`` if unreadable)."""
        return decode_response(self.scope.api_key, self.scope.api_version, self.payload)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyScope(RequestScope):
    """``payload`` is the client's request as received (no length prefix), ``correlation_id`` its id;
    ``listener`` the client listener it came in on (addresses are rewritten for it); ``nodes`` the upstream's
    brokers as the proxy knows them."""

    payload: bytes
    correlation_id: int
    listener: Listener
    upstream: UpstreamConnection
    nodes: NodeDirectory
    client: ClientWriter
    #: The proxy's one quota meter (``ProxyServer.meter``).
    meter: QuotaMeter

    async def forward(self, body: Any = None) -> Forwarded:
        """Send the request upstream — as received when ``body`` is None, else ``body`` with the client's header
        values — and wait for the answer."""
        response = await self.upstream.exchange(self._payload_for(body))
        assert response is not None  # noqa: S101 - expect_response defaults to True
        return Forwarded(self, response)

    async def relay(self, body: Any = None) -> Reply:
        """Send the request upstream (as ``forward``); its answer goes to the client unchanged, as it arrives, after
        the answers before it (``UpstreamConnection.relay``): the fast path of a request whose every resource is
        allowed. Returns NO_RESPONSE (nothing more to send) once the request is sent."""
        await self.upstream.relay(self._payload_for(body), self.client)
        return NO_RESPONSE

    async def forward_without_response(self, body: Any = None) -> None:
        """Send a request the upstream does not answer (Produce with acks=0)."""
        await self.upstream.exchange(self._payload_for(body), expect_response=False)

    def forwarded_at(self, api_version: int) -> ProxyScope:
        """This request's scope as the proxy forwards it at ``api_version`` instead of the client's
        (``versions.FORWARDED_FROM``): what goes upstream is encoded, and the answer decoded, at that version. The
        client's own bytes are of another version: every forward through it names its body."""
        return dataclasses.replace(self, api_version=api_version, payload=b"")

    def _payload_for(self, body: Any) -> bytes:
        if body is None:
            if not self.payload:  # a scope of ``forwarded_at``: a bug of the handler, never client input
                raise TypeError(f"{self.api_key.api_name} v{self.api_version}: forwarded without a body")
            return self.payload
        return encode_request(self.api_key, self.api_version, self.correlation_id, self.client_id, body)
