"""One client connection of the proxy: the server's connection up to authentication, then authorize and forward.

Everything before a request reaches its handler is the server's, unchanged (``server.connection.Connection``):
framing with sizes checked before buffering, the pre-login gate (only ApiVersions and SASL before login), SASL/SCRAM
against kafkaguard's credentials, the length pre-pass before kio decodes a body. Then:

* ApiVersions is answered with the negotiated versions (``versions.negotiate``), so a client only uses what the
  proxy can authorize and the upstream serves; any other API or version closes the connection (fail closed);
* the ACL, SCRAM and client-quota APIs are answered by kafkaguard's own handlers from its store (never forwarded);
* every other API goes to its proxy handler (``HANDLERS``), which authorizes the request from the request's one
  authorizer snapshot, forwards what is allowed on this connection's upstream connection, and answers;
* a handler's ``Throttled`` reply (Produce and Fetch over a client quota, ``proxy.quotas``) is sent at once, then
  the connection is muted: its next request is not read until the throttle time has passed (KIP-219).

Requests are handled in order and answered in order, as a Kafka broker handles a connection's requests; a relayed
answer is passed on while the next request is read and authorized (``upstream``: at most ``MAX_IN_FLIGHT``
outstanding), and every answer the proxy sends itself waits for the relayed answers before it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.proxy.handlers import admin, group_admin, transactions
from kafkaguard.proxy.handlers.coordinator import find_coordinator
from kafkaguard.proxy.handlers.fetch import fetch
from kafkaguard.proxy.handlers.groups import (
    heartbeat,
    join_group,
    leave_group,
    offset_commit,
    offset_fetch,
    sync_group,
)
from kafkaguard.proxy.handlers.metadata import describe_cluster, metadata
from kafkaguard.proxy.handlers.offsets import list_offsets
from kafkaguard.proxy.handlers.produce import produce
from kafkaguard.proxy.handlers.producers import init_producer_id
from kafkaguard.proxy.nodes import NodeDirectory
from kafkaguard.proxy.quotas import QuotaMeter, Throttled
from kafkaguard.proxy.scope import NO_RESPONSE, ProxyScope, Reply
from kafkaguard.proxy.upstream import UpstreamConnection, UpstreamSecurity, UpstreamUnavailable
from kafkaguard.proxy.versions import CAPS, LOCAL
from kafkaguard.server.codec import DecodedRequest, Versions, encode_response
from kafkaguard.server.connection import Connection, ListenerContext
from kafkaguard.server.handlers.cluster import api_versions_response
from kafkaguard.server.slices import encode_response_in_slices, sliced_array

log = logging.getLogger(__name__)

ProxyHandler = Callable[[ProxyScope, Any], Awaitable[Reply]]

HANDLERS: dict[ApiKey, ProxyHandler] = {
    ApiKey.PRODUCE: produce,
    ApiKey.FETCH: fetch,
    ApiKey.LIST_OFFSETS: list_offsets,
    ApiKey.METADATA: metadata,
    ApiKey.OFFSET_COMMIT: offset_commit,
    ApiKey.OFFSET_FETCH: offset_fetch,
    ApiKey.FIND_COORDINATOR: find_coordinator,
    ApiKey.JOIN_GROUP: join_group,
    ApiKey.HEARTBEAT: heartbeat,
    ApiKey.LEAVE_GROUP: leave_group,
    ApiKey.SYNC_GROUP: sync_group,
    ApiKey.INIT_PRODUCER_ID: init_producer_id,
    ApiKey.DESCRIBE_CLUSTER: describe_cluster,
    **transactions.HANDLERS,
    **admin.HANDLERS,
    **group_admin.HANDLERS,
}
if not set(HANDLERS) <= set(CAPS):  # a handler for an API without a cap would be offered at any version
    raise ImportError(f"proxy handlers for APIs without a version cap: {set(HANDLERS) - set(CAPS)}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyListenerContext(ListenerContext):
    """A proxy connection's context: the server's, plus where upstream it goes. ``node_id`` None is a bootstrap
    connection (any bootstrap server); ``versions`` are the negotiated ApiVersions."""

    node_id: int | None
    nodes: NodeDirectory
    security: UpstreamSecurity
    versions: Versions
    timeout: float
    meter: QuotaMeter


class ProxyConnection(Connection):
    def __init__(
        self, context: ProxyListenerContext, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        super().__init__(context, reader, writer)
        self.proxy = context
        nodes = context.nodes
        if context.node_id is None:
            addresses = list(nodes.bootstrap)
        else:
            known = nodes.address_of(context.node_id)
            addresses = [known] if known is not None else []
        self.upstream = UpstreamConnection(
            addresses, context.security, timeout=context.timeout, on_failure=self._upstream_failed
        )

    def versions(self) -> Versions:
        return self.proxy.versions

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            self.upstream.close()

    async def send(self, data: bytes) -> None:
        await self.upstream.idle()  # the answers relayed before this one go first
        await super().send(data)

    def _upstream_failed(self, failure: UpstreamUnavailable) -> None:
        """Passing a relayed answer on failed while this connection may be reading its client's next request: end
        the connection (the client may hold part of an answer; it reconnects and retries)."""
        log.warning("closing connection from %s: request failed: %s", self.host, failure)
        self.writer.close()

    async def dispatch(self, request: DecodedRequest, frame: bytes) -> None:
        api_key, header = request.api_key, request.header
        if api_key is ApiKey.API_VERSIONS:
            body = api_versions_response(header.api_version, versions=self.proxy.versions)
            await self.send(encode_response(api_key, header.api_version, header.correlation_id, body))
            return
        if api_key in LOCAL:
            await super().dispatch(request, frame)  # kafkaguard's own handlers, from its store
            return
        scope = ProxyScope(
            **self.scope_fields(request),
            payload=frame,
            correlation_id=header.correlation_id,
            listener=self.listener,
            upstream=self.upstream,
            nodes=self.proxy.nodes,
            client=self.writer,
            meter=self.proxy.meter,
        )
        reply = await HANDLERS[api_key](scope, request.body)
        if isinstance(reply, Throttled):
            await self._answer(api_key, header.api_version, header.correlation_id, reply.reply)
            # KIP-219: the answer went out at once; now the client is muted (its next request is not read) until the
            # throttle ends, as Kafka's broker mutes a throttled channel.
            delay_ms = self.proxy.meter.mute_left_ms(reply)
            if delay_ms > 0:
                await asyncio.sleep(delay_ms / 1000)
            return
        await self._answer(api_key, header.api_version, header.correlation_id, reply)

    async def _answer(self, api_key: ApiKey, version: int, correlation_id: int, reply: Reply) -> None:
        if reply is NO_RESPONSE:
            return
        name = sliced_array(reply)
        if name is not None:
            await self.send(await encode_response_in_slices(api_key, version, correlation_id, reply, name))
        else:
            await self.send(encode_response(api_key, version, correlation_id, reply))
