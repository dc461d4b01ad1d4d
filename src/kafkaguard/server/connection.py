"""One client connection: read a frame, decode it, check the SASL state, run the handler, write the response.

Requests on a connection are answered one at a time and in order (as Kafka clients expect). Every way a
connection can end is logged with its reason; nothing a peer sends can take down the server or another
connection: framing, decoding and handler errors close this connection only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.bootstrap import Services
from kafkaguard.config import Listener
from kafkaguard.errors import KafkaguardError
from kafkaguard.model import ANONYMOUS_PRINCIPAL, RequestContext, java_host
from kafkaguard.server.audit_log import AuditLog
from kafkaguard.server.codec import (
    SUPPORTED_VERSIONS,
    DecodedRequest,
    UnsupportedRequest,
    Versions,
    decode_request,
    encode_response,
)
from kafkaguard.server.errors import ProtocolError
from kafkaguard.server.framing import encode_frame, read_frame
from kafkaguard.server.handlers.acls import create_acls, delete_acls, describe_acls
from kafkaguard.server.handlers.cluster import api_versions, api_versions_response, describe_cluster
from kafkaguard.server.handlers.quotas import alter_client_quotas, describe_client_quotas
from kafkaguard.server.handlers.scram import alter_user_scram_credentials, describe_user_scram_credentials
from kafkaguard.server.handlers.topics import create_topics, delete_topics, metadata
from kafkaguard.server.header import peek_header
from kafkaguard.server.sasl import SaslOutcome, SaslState, record_login
from kafkaguard.server.scope import BrokerInfo, RequestScope
from kafkaguard.server.slices import encode_response_in_slices

log = logging.getLogger(__name__)

Handler = Callable[[RequestScope, Any], Awaitable[Any]]

HANDLERS: dict[ApiKey, Handler] = {
    ApiKey.API_VERSIONS: api_versions,
    ApiKey.METADATA: metadata,
    ApiKey.DESCRIBE_CLUSTER: describe_cluster,
    ApiKey.CREATE_TOPICS: create_topics,
    ApiKey.DELETE_TOPICS: delete_topics,
    ApiKey.DESCRIBE_ACLS: describe_acls,
    ApiKey.CREATE_ACLS: create_acls,
    ApiKey.DELETE_ACLS: delete_acls,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: alter_user_scram_credentials,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: alter_client_quotas,
}
#: APIs the connection answers itself (SASL moves the connection's state; it is no handler's business).
CONNECTION_APIS = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
if set(HANDLERS) | CONNECTION_APIS != set(SUPPORTED_VERSIONS):  # dispatch is exhaustive, checked at import
    raise ImportError(f"APIs offered without a handler: {set(SUPPORTED_VERSIONS) - set(HANDLERS) - CONNECTION_APIS}")
#: What a SASL listener answers before authentication completes; anything else closes the connection.
BEFORE_AUTHENTICATION = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
#: Frames above this size are decoded on a worker thread (the length check walks every element in Python).
LARGE_FRAME = 256 * 1024


class CloseConnection(Exception):
    """Raised to end the connection loop with a reason."""


@dataclass(frozen=True, slots=True)
class ListenerContext:
    """What a connection needs of the server it came in through, and nothing more: the services, this broker as
    advertised on the connection's listener, and the audit log (None when off)."""

    services: Services
    listener: Listener
    broker: BrokerInfo
    audit: AuditLog | None = None


class Connection:
    """A client connection of ``kafkaguard serve``: every API is answered by ``HANDLERS``. The proxy's connection
    shares everything up to ``dispatch`` (framing, the pre-login gate, SASL, decoding) and overrides the rest."""

    def __init__(self, context: ListenerContext, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.context = context
        self.services = context.services
        self.listener = context.listener
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.host = java_host(peer[0]) if peer else "unknown"
        settings = self.services.settings
        self.sasl = (
            SaslState(settings.sasl_mechanisms, self.services.credentials, self.services.server_secret)
            if self.listener.protocol.uses_sasl
            else None
        )

    @property
    def principal(self) -> str:
        if self.sasl is None:
            return ANONYMOUS_PRINCIPAL
        return f"User:{self.sasl.user}"

    @property
    def authenticated(self) -> bool:
        return self.sasl is None or self.sasl.authenticated

    async def run(self) -> None:
        settings = self.services.settings
        reason = "client closed the connection"
        try:
            while True:
                limit = settings.max_request_bytes if self.authenticated else settings.max_unauthenticated_request_bytes
                try:
                    # asyncio.timeout, not wait_for: no extra task per request on this hot path
                    async with asyncio.timeout(settings.idle_timeout_seconds):
                        frame = await read_frame(self.reader, limit)
                except TimeoutError:
                    reason = f"idle for {settings.idle_timeout_seconds:g} s"
                    break
                if frame is None:
                    break
                await self._handle(frame)
        except CloseConnection as e:
            reason = str(e)
        except ProtocolError as e:
            reason = f"protocol error: {e}"
        except (ConnectionError, asyncio.IncompleteReadError) as e:
            reason = f"connection lost: {e.__class__.__name__}"
        except KafkaguardError as e:
            reason = f"request failed: {e}"
            log.warning("closing connection from %s: %s", self.host, reason)
        finally:
            log.debug("connection from %s (%s) closed: %s", self.host, self.principal, reason)
            self.writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await self.writer.wait_closed()

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def _handle(self, frame: bytes) -> None:
        if self.sasl is not None and self.sasl.raw_tokens and not self.sasl.authenticated:
            await self._raw_token(self.sasl, frame)
            return
        if not self.authenticated:
            # Kafka reads only the header before authentication: no other body is decoded until SASL completes.
            api_key_code = peek_header(frame)[0]
            if api_key_code not in BEFORE_AUTHENTICATION:  # ApiKey is an IntEnum: a raw code finds its member
                raise CloseConnection(f"API key {api_key_code} before SASL authentication completed")
        versions = self.versions()
        try:
            limit = self.services.settings.max_request_items
            if len(frame) > LARGE_FRAME:  # checked and decoded on a worker thread: the loop keeps serving others
                request = await asyncio.to_thread(decode_request, frame, versions, max_items=limit)
            else:
                request = decode_request(frame, versions, max_items=limit)
        except UnsupportedRequest as e:
            if e.api_key == ApiKey.API_VERSIONS:
                # A newer client: answer v0 with our versions so it can pick one (Kafka's rule).
                body = api_versions_response(0, ErrorCode.unsupported_version, versions)
                await self.send(encode_response(ApiKey.API_VERSIONS, 0, e.correlation_id, body))
                return
            raise CloseConnection(str(e)) from e
        api_key, version = request.api_key, request.header.api_version
        if api_key is ApiKey.SASL_HANDSHAKE or api_key is ApiKey.SASL_AUTHENTICATE:
            await self._sasl_request(api_key, version, request.header.correlation_id, request.body)
            return
        await self.dispatch(request, frame)

    def versions(self) -> Versions:
        """The APIs and versions this connection offers (what ApiVersions answers)."""
        return SUPPORTED_VERSIONS

    def scope(self, request: DecodedRequest) -> RequestScope:
        """The request's scope: who asks, and the one authorizer snapshot every check of the request reads."""
        return RequestScope(**self.scope_fields(request))

    def scope_fields(self, request: DecodedRequest) -> dict[str, Any]:
        """``RequestScope``'s fields for ``request`` (the snapshot taken now), for a subclass's own scope type."""
        return {
            "services": self.services,
            "broker": self.context.broker,
            "context": RequestContext(self.principal, self.host),
            "api_key": request.api_key,
            "api_version": request.header.api_version,
            "client_id": request.header.client_id,
            "snapshot": self.services.authorizer.snapshot,
            "audit": self.context.audit,
        }

    async def dispatch(self, request: DecodedRequest, frame: bytes) -> None:
        """Answer an authenticated request (``frame`` is its bytes as received, for a subclass that forwards)."""
        header = request.header
        response = await HANDLERS[request.api_key](self.scope(request), request.body)
        await self.send(
            await encode_response_in_slices(request.api_key, header.api_version, header.correlation_id, response)
        )

    async def _sasl_request(self, api_key: ApiKey, version: int, correlation_id: int, body: Any) -> None:
        if self.sasl is None:
            raise CloseConnection(f"{api_key.api_name} on a {self.listener.protocol.value} listener")
        if self.sasl.authenticated:
            raise CloseConnection(f"{api_key.api_name} after authentication (re-authentication is not supported)")
        outcome: SaslOutcome = (
            self.sasl.handshake(version, body)
            if api_key is ApiKey.SASL_HANDSHAKE
            else self.sasl.authenticate(version, body)
        )
        self._count_login(outcome)  # before answering: a client that sees the answer sees the count
        if outcome.failed:
            await self._failure_delay()
        await self.send(encode_response(api_key, version, correlation_id, outcome.response))
        if outcome.close:
            raise CloseConnection(f"{api_key.api_name} failed")

    async def _raw_token(self, sasl: SaslState, frame: bytes) -> None:
        """A SASL token after a v0 handshake: raw bytes in, raw bytes out; failure closes the connection."""
        reply, error = sasl.token(frame)
        if error is not None:
            self._record_login(ok=False)
            await self._failure_delay()
            raise CloseConnection(f"SASL authentication failed: {error}")
        if sasl.authenticated:
            self._record_login(ok=True)
        await self.send(encode_frame(reply or b""))

    def _count_login(self, outcome: SaslOutcome) -> None:
        if outcome.failed:
            self._record_login(ok=False)
        elif self.sasl is not None and self.sasl.authenticated:
            self._record_login(ok=True)

    def _record_login(self, *, ok: bool) -> None:
        """Count a finished SASL login in ``Services.logins`` and log it (a failure at INFO, as Kafka does)."""
        if self.sasl is not None:
            record_login(self.services.logins, str(self.listener), self.host, self.sasl, succeeded=ok)

    async def _failure_delay(self) -> None:
        # Kafka delays failed authentications (100 ms by default) to slow down guessing; never block the loop.
        delay = self.services.settings.auth_failure_delay_ms / 1000
        if delay:
            await asyncio.sleep(delay)
