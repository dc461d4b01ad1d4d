"""What the proxy answers a logged-in request with (``protocol.connection`` does everything before: framing with
sizes checked before buffering, the pre-login gate, SASL/SCRAM against kafkaguard's credentials, the length pre-pass,
and ApiVersions with the versions negotiated with the upstream, ``versions.negotiate``, so that a client only uses
what the proxy can authorize and the upstream serves; any other API or version closes the connection):

* the ACL, SCRAM and client-quota APIs are answered by kafkaguard's own handlers from its store (``apis``; never
  forwarded);
* every other API goes to its proxy handler (``HANDLERS``), which authorizes the request from the request's one
  authorizer snapshot, forwards what is allowed on this connection's upstream connection, and answers: a response,
  a relayed answer passed on as it arrives, or a ``Throttled`` reply (Produce and Fetch over a client quota,
  ``proxy.quotas``) after which the connection is muted (KIP-219).

Requests are handled in order and answered in order, as a Kafka broker handles a connection's requests: the
connection's one writer (``protocol.outbox``) passes a relayed answer on while the next request is read and
authorized, and every answer the proxy makes itself goes out after the relayed answers before it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkaguard.apis import STORE_HANDLERS
from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.model import RequestContext
from kafkaguard.protocol.api_versions import NO_FEATURES, Features
from kafkaguard.protocol.codec import DecodedRequest, RequestHead, Versions
from kafkaguard.protocol.connection import CONNECTION_APIS, Incoming, Walked
from kafkaguard.protocol.outbox import Outbox
from kafkaguard.protocol.passthrough import LoginRelay
from kafkaguard.protocol.replies import Reply
from kafkaguard.protocol.routes import route, routes
from kafkaguard.protocol.scope import ListenerContext, scope_fields, scope_of
from kafkaguard.proxy.handlers import admin, group_admin, transactions
from kafkaguard.proxy.handlers.coordinator import find_coordinator
from kafkaguard.proxy.handlers.fetch import fetch
from kafkaguard.proxy.handlers.groups import (
    consumer_group_heartbeat,
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
from kafkaguard.proxy.handlers.topic_partitions import describe_topic_partitions
from kafkaguard.proxy.messages import (
    CONSUMER_GROUP_HEARTBEAT,
    DESCRIBE_CLUSTER,
    DESCRIBE_TOPIC_PARTITIONS,
    FETCH,
    FIND_COORDINATOR,
    HEARTBEAT,
    INIT_PRODUCER_ID,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_OFFSETS,
    METADATA,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    SYNC_GROUP,
)
from kafkaguard.proxy.nodes import NodeDirectory
from kafkaguard.proxy.produce_request import walk_produce_request
from kafkaguard.proxy.quotas import QuotaMeter
from kafkaguard.proxy.scope import ProxyHandler, ProxyScope
from kafkaguard.proxy.upstream import Dial
from kafkaguard.proxy.versions import CAPS, LOCAL

#: Each API the proxy forwards → its handler (``route``: checked against the API's request union).
HANDLERS: dict[ApiKey, ProxyHandler] = {
    **routes(
        route(FETCH, fetch),
        route(LIST_OFFSETS, list_offsets),
        route(METADATA, metadata),
        route(OFFSET_COMMIT, offset_commit),
        route(OFFSET_FETCH, offset_fetch),
        route(FIND_COORDINATOR, find_coordinator),
        route(JOIN_GROUP, join_group),
        route(HEARTBEAT, heartbeat),
        route(LEAVE_GROUP, leave_group),
        route(SYNC_GROUP, sync_group),
        route(INIT_PRODUCER_ID, init_producer_id),
        route(DESCRIBE_CLUSTER, describe_cluster),
        route(DESCRIBE_TOPIC_PARTITIONS, describe_topic_partitions),
        route(CONSUMER_GROUP_HEARTBEAT, consumer_group_heartbeat),
    ),
    **transactions.HANDLERS,
    **admin.HANDLERS,
    **group_admin.HANDLERS,
}
#: APIs whose requests the proxy walks from the client's bytes instead of having kio decode them (``walked``):
#: Produce, whose records are relayed as they came, never decoded or copied (``produce_request``).
WALKED = frozenset({ApiKey.PRODUCE})
#: Every API the proxy forwards (to its handler in ``HANDLERS``, or walked).
FORWARDED = frozenset(HANDLERS) | WALKED
if not set(CAPS) >= FORWARDED:  # a handler for an API without a cap would be offered at any version
    raise ImportError(f"proxy handlers for APIs without a version cap: {FORWARDED - set(CAPS)}")


if set(STORE_HANDLERS) | CONNECTION_APIS != set(LOCAL):  # the store's APIs are answered here, never forwarded
    raise ImportError(f"local APIs without a handler: {set(LOCAL) - set(STORE_HANDLERS) - CONNECTION_APIS}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyRoute:
    """Where a proxy connection goes: ``node_id`` None is a bootstrap connection (any bootstrap server); ``versions``
    are the negotiated ApiVersions; ``dial`` makes the connection's way upstream."""

    node_id: int | None
    nodes: NodeDirectory
    versions: Versions
    meter: QuotaMeter
    dial: Dial
    #: The upstream's features as the proxy answers them (``versions.negotiate_features``).
    features: Features = NO_FEATURES
    #: ``upstream_authentication: passthrough``: the connection's logins go to its broker (``protocol.passthrough``).
    passthrough: bool = False


class ProxyDispatcher:
    """A proxy connection's dispatcher (``protocol.connection.Dispatcher``), with its own upstream connection."""

    def __init__(self, context: ListenerContext, route: ProxyRoute) -> None:
        self.context = context
        self.route = route
        nodes = route.nodes
        if route.node_id is None:
            addresses = list(nodes.bootstrap)
        else:
            known = nodes.address_of(route.node_id)
            addresses = [known] if known is not None else []
        self.upstream = route.dial(addresses)

    @property
    def versions(self) -> Versions:
        return self.route.versions

    @property
    def features(self) -> Features:
        return self.route.features

    @property
    def walked(self) -> frozenset[ApiKey]:
        return WALKED

    async def dispatch(self, incoming: Incoming) -> Reply:
        request, context = incoming.request, self.context
        local = STORE_HANDLERS.get(request.api_key)
        if local is not None:  # kafkaguard's own handlers, from its store
            return await local(scope_of(context, incoming.caller, request), request.body)
        scope = self._scope(request, incoming.frame, incoming.caller, incoming.outbox)
        return await HANDLERS[request.api_key](scope, request.body)

    async def dispatch_walked(self, walked: Walked) -> Reply:
        """A Produce request (the one ``WALKED`` API), walked from its bytes and authorized from the walk."""
        head = walked.request
        limit = self.context.services.sections.listening.max_request_items
        view = walk_produce_request(walked.frame, head.body_at, head.header.api_version, max_items=limit)
        return await produce(self._scope(head, walked.frame, walked.caller, walked.outbox), view)

    def _scope(
        self, request: DecodedRequest | RequestHead, frame: bytes, caller: RequestContext, outbox: Outbox
    ) -> ProxyScope:
        context = self.context
        return ProxyScope(
            **scope_fields(context, caller, request),
            permissive=context.services.rollout.permissive,
            payload=frame,
            correlation_id=request.header.correlation_id,
            listener=context.listener,
            upstream=self.upstream,
            nodes=self.route.nodes,
            outbox=outbox,
            meter=self.route.meter,
        )

    @property
    def login_relay(self) -> LoginRelay | None:
        """In passthrough, this connection's own upstream connection: the broker decides its logins."""
        return self.upstream if self.route.passthrough else None

    async def close(self) -> None:
        self.upstream.close()
