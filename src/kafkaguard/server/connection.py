"""One client connection: read a frame, decode it, check the SASL state, run the handler, write the response.

Requests on a connection are answered one at a time and in order (as Kafka clients expect). Every way a
connection can end is logged with its reason; nothing a peer sends can take down the server or another
connection: framing, decoding and handler errors close this connection only. A logged-in connection holds a
``sessions.Session``: it is closed when its user's credential is deleted or changed, and (KIP-368) on its first
request after its lifetime unless it re-authenticated (SaslHandshake + SaslAuthenticate on the same connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kafkaguard.audit.refusals import RefusalReason
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
from kafkaguard.server.errors import FrameTooLargeError, ProtocolError
from kafkaguard.server.framing import encode_frame, read_frame
from kafkaguard.server.handlers.acls import create_acls, delete_acls, describe_acls
from kafkaguard.server.handlers.cluster import api_versions, api_versions_response, describe_cluster
from kafkaguard.server.handlers.quotas import alter_client_quotas, describe_client_quotas
from kafkaguard.server.handlers.scram import alter_user_scram_credentials, describe_user_scram_credentials
from kafkaguard.server.handlers.topics import create_topics, delete_topics, metadata
from kafkaguard.server.header import peek_header
from kafkaguard.server.prelogin import pre_login_limit
from kafkaguard.server.sasl import SaslOutcome, SaslState, record_login
from kafkaguard.server.scope import BrokerInfo, RequestScope
from kafkaguard.server.sessions import Session, SessionRegistry
from kafkaguard.server.slices import encode_response_in_slices, sliced_array

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
    advertised on the connection's listener, the audit log (None when off) and the server's registry of logged-in
    sessions (``server.sessions``; None only in unit tests of one connection: then no session ends with its user)."""

    services: Services
    listener: Listener
    broker: BrokerInfo
    audit: AuditLog | None = None
    sessions: SessionRegistry | None = None


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
            SaslState(
                settings.sasl_mechanisms,
                self.services.credentials,
                self.services.server_secret,
                session_lifetime_ms=settings.connections_max_reauth_ms,
            )
            if self.listener.protocol.uses_sasl
            else None
        )
        #: When a SASL listener's client must have logged in (``time.monotonic()``); the server moves it to the TCP
        #: accept, so that a TLS handshake counts.
        self.login_deadline = time.monotonic() + settings.sasl_login_timeout_seconds
        #: Closed for bytes no Kafka client sends (a ``ProtocolError``): the server keeps the address out a moment.
        self.violated = False
        #: The logged-in session once SASL completed (registered with the server's ``SessionRegistry``).
        self.session: Session | None = None
        #: A re-authentication under way (KIP-368): from its SaslHandshake until its last SaslAuthenticate.
        self._reauthentication: SaslState | None = None

    @property
    def principal(self) -> str:
        if self.sasl is None:
            return ANONYMOUS_PRINCIPAL
        return f"User:{self.sasl.user}"

    @property
    def authenticated(self) -> bool:
        return self.sasl is None or self.sasl.authenticated

    async def run(self) -> None:
        reason = "client closed the connection"
        try:
            while True:
                frame = await self._next_frame()
                if frame is None:
                    break
                await self._handle(frame)
        except CloseConnection as e:
            reason = str(e)
        except ProtocolError as e:
            reason = f"protocol error: {e}"
            self.violated = e.sent_by_client
        except (ConnectionError, asyncio.IncompleteReadError) as e:
            reason = f"connection lost: {e.__class__.__name__}"
        except KafkaguardError as e:
            reason = f"request failed: {e}"
            log.warning("closing connection from %s: %s", self.host, reason)
        finally:
            session = self.session
            if session is not None:
                reason = session.ended or reason  # the connection was closed because the session ended
                if self.context.sessions is not None:
                    self.context.sessions.discard(session)
            log.debug("connection from %s (%s) closed: %s", self.host, self.principal, reason)
            self.writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await self.writer.wait_closed()

    async def _next_frame(self) -> bytes | None:
        """The next request frame, or None when the client closed between frames. Before login on a SASL listener,
        the wait ends at ``login_deadline`` and each frame is held to its API's limit (``prelogin``), decided from
        its first bytes; both refusals are counted and logged (``Services.refusals``).

        :raises CloseConnection: idle for ``idle_timeout_seconds``, or not logged in by the deadline.
        :raises FrameTooLargeError: a frame above its limit (before login: counted as a refusal too).
        """
        settings = self.services.settings
        loop = asyncio.get_running_loop()
        idle_at = loop.time() + settings.idle_timeout_seconds
        limit, limit_for_api, deadline = settings.max_request_bytes, None, idle_at
        pre_login = not self.authenticated
        if pre_login:
            limit = settings.max_unauthenticated_request_bytes
            if self.sasl is None or not self.sasl.raw_tokens:  # a v0 handshake's raw tokens have no header
                limit_for_api = functools.partial(pre_login_limit, token_bytes=limit)
            deadline = min(idle_at, loop.time() + self.login_deadline - time.monotonic())
        try:
            if deadline <= loop.time():  # checked before reading: frames already buffered must not run past it
                raise TimeoutError
            # asyncio.timeout_at, not wait_for: no extra task per request on this hot path
            async with asyncio.timeout_at(deadline):
                return await read_frame(self.reader, limit, limit_for_api=limit_for_api)
        except TimeoutError:
            if deadline < idle_at:
                timeout = settings.sasl_login_timeout_seconds
                self.refuse(RefusalReason.SASL_LOGIN_TIMEOUT, f"not logged in within sasl_login_timeout_seconds "
                            f"({timeout:g} s) of connecting")  # fmt: skip
                raise CloseConnection(f"not logged in within {timeout:g} s") from None
            raise CloseConnection(f"idle for {settings.idle_timeout_seconds:g} s") from None
        except FrameTooLargeError as e:
            if pre_login:
                self.refuse(RefusalReason.PRE_LOGIN_FRAME_SIZE, f"{e}; nothing of it was buffered")
            raise

    def refuse(self, reason: RefusalReason, detail: str) -> None:
        """Count and log (rate-limited) that this connection is closed before login, for ``reason``."""
        self.services.refusals.record(str(self.listener), reason, self.host, detail)

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
                raise ProtocolError(f"API key {api_key_code} before SASL authentication completed")
        elif self.session is not None:
            self._check_session(self.session, frame)
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
        api_key, version, correlation_id = request.api_key, header.api_version, header.correlation_id
        name = sliced_array(response)
        if name is not None:
            await self.send(await encode_response_in_slices(api_key, version, correlation_id, response, name))
        else:
            await self.send(encode_response(api_key, version, correlation_id, response))

    def _check_session(self, session: Session, frame: bytes) -> None:
        """Before any request of a logged-in connection (Kafka's ``SocketServer`` does the same): an ended session
        closes the connection; during a re-authentication only SaslAuthenticate may come; past its lifetime
        (KIP-368) only a SaslHandshake that begins a re-authentication may."""
        if session.ended is not None:
            raise CloseConnection(session.ended)
        if self._reauthentication is not None:
            api_key_code = peek_header(frame)[0]
            if api_key_code != ApiKey.SASL_AUTHENTICATE:
                raise CloseConnection(f"API key {api_key_code} during SASL re-authentication")
        elif (
            session.expires_at is not None
            and session.expired(time.monotonic())
            and peek_header(frame)[0] != ApiKey.SASL_HANDSHAKE
        ):
            raise CloseConnection(f"session expired: not re-authenticated within {session.lifetime_ms} ms")

    async def _sasl_request(self, api_key: ApiKey, version: int, correlation_id: int, body: Any) -> None:
        if self.sasl is None:
            raise CloseConnection(f"{api_key.api_name} on a {self.listener.protocol.value} listener")
        sasl, refused = self._sasl_state(self.sasl, api_key)
        if refused is not None:
            outcome = sasl.refuse(api_key, version, refused)
        elif api_key is ApiKey.SASL_HANDSHAKE:
            outcome = sasl.handshake(version, body)
        else:
            outcome = sasl.authenticate(version, body)
        if refused is None:
            self._count_login(sasl, outcome)  # before answering: a client that sees the answer sees the count
        if outcome.failed:
            await self._failure_delay()
        await self.send(encode_response(api_key, version, correlation_id, outcome.response))
        if outcome.close:
            raise CloseConnection(f"{api_key.api_name} failed" if refused is None else refused)

    def _sasl_state(self, sasl: SaslState, api_key: ApiKey) -> tuple[SaslState, str | None]:
        """The SASL state a SaslHandshake or SaslAuthenticate goes to — the login's until it completes, then a
        re-authentication's (KIP-368), which only a SaslHandshake begins, when the session may re-authenticate — or
        the authenticated state and why the request is refused."""
        if not sasl.authenticated:
            return sasl, None
        if self._reauthentication is not None:
            return self._reauthentication, None
        if api_key is not ApiKey.SASL_HANDSHAKE or self.session is None:
            return sasl, f"{api_key.api_name} after authentication without a SaslHandshake"
        refused = self.session.begin_reauthentication(time.monotonic())
        if refused is not None:
            return sasl, f"{api_key.api_name} after authentication: {refused}"
        self._reauthentication = sasl.reauthentication()
        return self._reauthentication, None

    async def _raw_token(self, sasl: SaslState, frame: bytes) -> None:
        """A SASL token after a v0 handshake: raw bytes in, raw bytes out; failure closes the connection."""
        reply, error = sasl.token(frame)
        if error is not None:
            self._record_login(sasl, ok=False)
            await self._failure_delay()
            raise CloseConnection(f"SASL authentication failed: {error}")
        if sasl.authenticated:
            self._record_login(sasl, ok=True)
            self._start_session(sasl)
        await self.send(encode_frame(reply or b""))

    def _count_login(self, sasl: SaslState, outcome: SaslOutcome) -> None:
        """After a SASL step: count and log a finished login or re-authentication, and start or renew the session
        on success."""
        if outcome.failed:
            self._record_login(sasl, ok=False)
        elif sasl.authenticated:
            self._record_login(sasl, ok=True)
            if sasl.reauthenticating:
                self._renew_session(sasl)
            else:
                self._start_session(sasl)

    def _start_session(self, sasl: SaslState) -> None:
        """The login succeeded: the session starts, registered so that it ends with its user's credential."""
        user, credential = sasl.user, sasl.credential
        if user is None:  # unreachable: an authenticated state has its user
            raise CloseConnection("SASL completed without a user")
        self.session = Session(
            user,
            credential.mechanism,
            credential,
            host=self.host,
            listener=str(self.listener),
            lifetime_ms=sasl.session_lifetime_ms,
            now=time.monotonic(),
            close=self.writer.close,
        )
        if self.context.sessions is not None:
            self.context.sessions.add(self.session)

    def _renew_session(self, sasl: SaslState) -> None:
        """A re-authentication succeeded (same user and mechanism, checked by ``SaslState``): the connection goes
        on as before, with the credential just proved and a new lifetime."""
        self._reauthentication = None
        self.sasl = sasl
        if self.session is not None:
            self.session.renew(sasl.credential, time.monotonic())

    def _record_login(self, sasl: SaslState, *, ok: bool) -> None:
        """Count a finished SASL login in ``Services.logins`` and log it (a failure at INFO, as Kafka does); a
        re-authentication is logged, not counted."""
        record_login(self.services.logins, str(self.listener), self.host, sasl, succeeded=ok)

    async def _failure_delay(self) -> None:
        # Kafka delays failed authentications (100 ms by default) to slow down guessing; never block the loop.
        delay = self.services.settings.auth_failure_delay_ms / 1000
        if delay:
            await asyncio.sleep(delay)
