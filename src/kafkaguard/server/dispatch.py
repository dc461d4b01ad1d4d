"""What ``kafkaguard serve`` answers a logged-in request with: its handler from ``HANDLERS``, given the request's
scope (who asks, and the one authorizer snapshot every check of the request reads)."""

from __future__ import annotations

from collections.abc import Awaitable

from kafkaguard.apis import STORE_HANDLERS, Handler
from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.api_versions import NO_FEATURES, Features
from kafkaguard.protocol.codec import Versions
from kafkaguard.protocol.connection import CONNECTION_APIS, Incoming, Walked
from kafkaguard.protocol.messages import CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CLUSTER, METADATA
from kafkaguard.protocol.replies import Response
from kafkaguard.protocol.routes import route, routes
from kafkaguard.protocol.scope import ListenerContext, scope_of
from kafkaguard.server.handlers.cluster import describe_cluster
from kafkaguard.server.handlers.topics import create_topics, delete_topics, metadata
from kafkaguard.server.versions import SERVER_VERSIONS

HANDLERS: dict[ApiKey, Handler] = {
    **routes(
        route(METADATA, metadata),
        route(DESCRIBE_CLUSTER, describe_cluster),
        route(CREATE_TOPICS, create_topics),
        route(DELETE_TOPICS, delete_topics),
    ),
    **STORE_HANDLERS,
}
if set(HANDLERS) | CONNECTION_APIS != set(SERVER_VERSIONS):  # dispatch is exhaustive, checked at import
    raise ImportError(f"APIs offered without a handler: {set(SERVER_VERSIONS) - set(HANDLERS) - CONNECTION_APIS}")


class ServerDispatcher:
    """A connection's dispatcher (``protocol.connection.Dispatcher``): every API from ``HANDLERS``."""

    __slots__ = ("context",)

    def __init__(self, context: ListenerContext) -> None:
        self.context = context

    @property
    def versions(self) -> Versions:
        return SERVER_VERSIONS

    @property
    def features(self) -> Features:
        return NO_FEATURES  # kafkaguard's own server runs no cluster features

    def dispatch(self, incoming: Incoming) -> Awaitable[Response]:
        request = incoming.request  # the handler's coroutine itself: no frame of this method's per request
        return HANDLERS[request.api_key](scope_of(self.context, incoming.caller, request), request.body)

    @property
    def walked(self) -> frozenset[ApiKey]:
        return frozenset()  # every request is decoded by kio

    async def dispatch_walked(self, walked: Walked) -> Response:
        raise TypeError(f"{walked.request.api_key.api_name} walked by a server connection, which walks none")

    async def close(self) -> None:
        pass

    @property
    def login_relay(self) -> None:
        return None  # the server decides every login itself
