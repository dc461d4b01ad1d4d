"""One client connection: read a frame, check the SASL state, decode it, have the dispatcher answer it, and send
the answer through the connection's one writer (``outbox``).

Everything up to the dispatcher is the same for ``kafkaguard serve`` and the proxy: framing with sizes checked before
buffering, the pre-login gate (only ApiVersions and SASL before login; nothing but the header decoded), SASL/SCRAM
against kafkaguard's credentials, sessions (KIP-368), the length pre-pass before kio decodes a body. What a logged-in
request gets is the ``Dispatcher``'s business: the server's handlers (``server.dispatch``) or the proxy's
(``proxy.dispatch``); they answer with a ``replies.Reply``, a closed set the connection handles here.

Requests on a connection are read one at a time and answered in order (as Kafka clients expect). Every way a
connection can end is logged with its reason; nothing a peer sends can take down the server or another
connection: framing, decoding and dispatcher errors close this connection only. A logged-in connection holds a
``sessions.Session``: it is closed when its user's credential is deleted or changed, and (KIP-368) on its first
request after its lifetime unless it re-authenticated (SaslHandshake + SaslAuthenticate on the same connection).

**Drain** (a SIGTERM, ``node.listening``): ``drain()`` makes the connection end at its next request boundary, never
inside an answer. The requests whose bytes had arrived when the drain began are read and answered; relayed answers
(the proxy's fetches, long polls included) go out; then the connection closes: the answers, then a FIN (TLS: its
close_notify), and the socket is let go once the client's TCP has acknowledged them, so that the kernel never resets
a connection whose last answer is still on its way. A connection waiting for its next request with nothing of it
arrived is closed at once. Kafka clients take a closed connection as a retriable broker failure: they reconnect
(through the balancer) and send again what had no answer. The cost on the request path: two attribute writes and one
read per request.

**Deadlines** (``idle_timeout_seconds``; before login ``sasl_login_timeout_seconds`` from the accept): the wait for a
request's bytes ends at the earlier of them. One timer per connection (``_on_deadline``) watches them, re-armed only
when it fires, rather than a timeout per request: a request costs one attribute write for it, where
``asyncio.timeout_at`` scheduled and cancelled a timer every time (about 5% of the server's CPU in a flood of SCRAM
logins, four waits each; docs/benchmarks.md, "Figures from the code"). The timer never fires after a deadline (it is
armed at the earliest one the connection could have), and when it finds the connection inside a request it looks
again at the earliest deadline the next wait can have. A shorter ``idle_timeout_seconds`` applied live (SIGHUP)
takes effect on a connection after its timer next fires.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Collection
from typing import Any, NamedTuple, Protocol, cast

from kio.schema.errors import ErrorCode

from kafkaguard.audit.records.login_events import record_login_event
from kafkaguard.audit.records.refusals import RefusalReason
from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.config import SecurityProtocol
from kafkaguard.errors import KafkaguardError
from kafkaguard.identity.oauth import TokenExpectations
from kafkaguard.model import ANONYMOUS_PRINCIPAL, RequestContext, java_host
from kafkaguard.protocol.api_versions import Features, api_versions_response
from kafkaguard.protocol.codec import (
    DecodedRequest,
    RequestHead,
    UnsupportedRequest,
    Versions,
    decode_request,
    decode_request_head,
    encode_response,
)
from kafkaguard.protocol.errors import FrameTooLargeError, ProtocolError
from kafkaguard.protocol.framing import encode_frame, read_frame
from kafkaguard.protocol.header import peek_header
from kafkaguard.protocol.identity import CertificateNotMapped, Identity
from kafkaguard.protocol.mechanisms import Login, MechanismSource
from kafkaguard.protocol.outbox import Outbox
from kafkaguard.protocol.passthrough import LoginRelay, PassthroughMechanisms
from kafkaguard.protocol.prelogin import pre_login_limit
from kafkaguard.protocol.replies import Close, NoResponse, Relayed, Reply, Response, Throttled
from kafkaguard.protocol.sasl import SaslOutcome, SaslState, record_login, record_peer_login
from kafkaguard.protocol.scope import ListenerContext
from kafkaguard.protocol.sessions import Session
from kafkaguard.protocol.slices import encode_response_in_slices, sliced_array
from kafkaguard.protocol.unread import unacknowledged_bytes, unread_bytes

log = logging.getLogger(__name__)

#: APIs the connection answers itself: SASL moves the connection's state (no dispatcher's business), and ApiVersions
#: says what the dispatcher offers.
CONNECTION_VERSIONS: Versions = {
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
}
CONNECTION_APIS = frozenset(CONNECTION_VERSIONS)
#: What a SASL listener answers before authentication completes; anything else closes the connection.
BEFORE_AUTHENTICATION = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
#: Frames above this size are decoded on a worker thread (the length check walks every element in Python).
LARGE_FRAME = 256 * 1024


#: The audit trail's error for a login the failure budget refused unchecked.
THROTTLED_EVENT_ERROR = "Authentication failed: too many failed logins (refused unchecked by the failure budget)"

#: Relayed answers a connection may have queued before its next request is read (Kafka's Java producer keeps at most
#: 5 requests in flight by default; the proxy then holds back no one).
MAX_QUEUED_ANSWERS = 5
#: After a drain's last answer (and FIN), how long the client's remaining bytes are read and dropped before the
#: socket closes: Kafka clients close their side as soon as they read the end of the stream.
LINGER_SECONDS = 5.0
_LINGER_READ = 64 * 1024
_LINGER_POLL_SECONDS = 0.02


class CloseConnection(KafkaguardError):
    """Raised inside this module to end the connection loop with a reason (a dispatcher answers ``Close``).

    Control flow, never raised across a layer: ``Connection.run`` catches it first, before ``ProtocolError`` and
    ``KafkaguardError``, and nothing it calls catches ``KafkaguardError`` around a raise of it."""


class Drained(CloseConnection):
    """The connection ends at a request boundary because the process is draining (``Connection.drain``)."""


class Incoming(NamedTuple):
    """One logged-in request as its dispatcher gets it: decoded, its bytes as received (the proxy forwards them
    as they are), who sent it, and the connection's one writer (for answers relayed as they arrive). A named tuple:
    one is made per request, and a tuple is the cheapest immutable record to make."""

    request: DecodedRequest
    frame: bytes
    caller: RequestContext
    outbox: Outbox


class Walked(NamedTuple):
    """A logged-in request of an API its dispatcher reads from the bytes itself (``Dispatcher.walked``): its header
    decoded, its body not; the rest as ``Incoming``."""

    request: RequestHead
    frame: bytes
    caller: RequestContext
    outbox: Outbox


class Dispatcher(Protocol):
    """What answers a connection's logged-in requests: one per connection, made by the server that accepted it."""

    @property
    def versions(self) -> Versions:
        """The APIs and versions the connection offers (what ApiVersions answers, and what is decoded)."""

    @property
    def features(self) -> Features:
        """The cluster features ApiVersions v3+ answers (``api_versions.Features``; the server's: none)."""

    def dispatch(self, incoming: Incoming) -> Awaitable[Reply]:
        """The answer to ``incoming`` (ApiVersions and SASL never come here: the connection answers them)."""

    @property
    def walked(self) -> Collection[ApiKey]:
        """The APIs whose requests this dispatcher reads from their bytes itself (``dispatch_walked``) instead of
        having them decoded by kio: the proxy's Produce, whose records it never decodes. Usually empty."""

    def dispatch_walked(self, walked: Walked) -> Awaitable[Reply]:
        """The answer to a request of a ``walked`` API."""

    async def close(self) -> None:
        """The connection has ended (after its last answer went out or was dropped)."""

    @property
    def login_relay(self) -> LoginRelay | None:
        """Where this connection's logins go when they are passed through (the proxy with ``upstream_authentication:
        passthrough``: its own upstream connection, ``protocol.passthrough``); None: kafkaguard decides them."""


class Connection:
    """A client connection (see the module docstring); ``dispatcher`` answers its logged-in requests."""

    def __init__(
        self,
        context: ListenerContext,
        dispatcher: Dispatcher,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        host: str | None = None,
    ) -> None:
        """``host``: the client's address (Java's form) when it is not the socket's peer (a PROXY header's)."""
        self.context = context
        self.dispatcher = dispatcher
        self.services = context.services
        self.listener = context.listener
        self.reader = reader
        self.writer = writer
        if host is None:
            peer = writer.get_extra_info("peername")
            host = java_host(peer[0]) if peer else "unknown"
        self.host = host
        self.outbox = Outbox(writer, limit=MAX_QUEUED_ANSWERS, close=writer.close, peer=self.host)
        identity = self.services.sections.identity
        self.identity = context.identity or Identity.from_services(self.services)
        violations = context.violations
        mechanisms: MechanismSource = self.identity.mechanisms
        relay = dispatcher.login_relay
        if relay is not None:
            proxy = self.services.sections.proxy
            claims = TokenExpectations(
                sub_claim_name=proxy.passthrough_sub_claim_name, groups_claim=proxy.passthrough_groups_claim_name
            )
            passed = frozenset(proxy.passthrough_mechanisms)
            mechanisms = PassthroughMechanisms(mechanisms, relay, passed, self.services.login_budget, claims)
        #: Whether a re-authentication must wait for the relayed answers before it (its tokens share the upstream).
        self._relays_logins = relay is not None
        self.sasl = (
            SaslState(
                identity.listener_mechanisms(self.listener),
                mechanisms,
                self.host,
                session_lifetime_ms=identity.connections_max_reauth_ms,
                refuse_login=None if violations is None else violations.login_refusal,
                withheld=identity.withheld_mechanisms(self.listener),
            )
            if self.listener.protocol.uses_sasl
            else None
        )
        #: Who the client is without SASL: on an SSL listener, its certificate's principal.
        self.peer_principal = ANONYMOUS_PRINCIPAL
        #: Why the client has no principal at all (no mapping rule applies to its certificate): closed at once.
        self.unidentified: str | None = None
        if self.listener.protocol is SecurityProtocol.SSL:
            self._identify_peer(writer)
        #: When a SASL listener's client must have logged in (``time.monotonic()``); the server moves it to the TCP
        #: accept, so that a TLS handshake counts.
        self.login_deadline = time.monotonic() + self.services.sections.listening.sasl_login_timeout_seconds
        #: Closed for bytes no Kafka client sends (a ``ProtocolError``): the server charges it to its principal or
        #: its address (``accountable_principal``, ``violations``).
        self.violated = False
        #: The logged-in session once SASL completed (registered with the server's ``SessionRegistry``).
        self.session: Session | None = None
        #: A re-authentication under way (KIP-368): from its SaslHandshake until its last SaslAuthenticate.
        self._reauthentication: SaslState | None = None
        #: Who sends this connection's requests, once logged in (made with its first request after login).
        self._caller: RequestContext | None = None
        #: While the connection waits for its next request's bytes (``drain`` may close it then).
        self.between_requests = False
        #: Draining: the bytes of requests that had arrived when the drain began, still to be read (None: serving).
        self._drain_left: int | None = None
        #: Whether ``drain`` cancelled the wait for the next request (its task's cancellation is then drain's).
        self._interrupted = False
        self._task: asyncio.Task[Any] | None = None
        #: The deadline watch (see the module docstring): its timer, when the current wait began (loop time), and
        #: whether it cancelled that wait (its task's cancellation is then the deadline's).
        self._deadline_timer: asyncio.TimerHandle | None = None
        self._waiting_since = 0.0
        self._timed_out = False

    @property
    def principal(self) -> str:
        """``User:<name>`` of the SASL login (it wins over a certificate, as in Kafka), else the peer's principal."""
        if self.sasl is None:
            return self.peer_principal
        return f"User:{self.sasl.user}"

    @property
    def accountable_principal(self) -> str | None:
        """Whom a protocol violation of this connection is charged to: its logged-in principal (SASL, or a mapped
        client certificate), or None before login and for ``User:ANONYMOUS`` (every client of a PLAINTEXT listener
        is that one: its address answers for it then)."""
        if not self.authenticated or self.unidentified is not None:
            return None
        principal = self.principal
        return None if principal == ANONYMOUS_PRINCIPAL else principal

    @property
    def groups(self) -> tuple[str, ...]:
        """The groups the login's token carried (``Group:NAME``), beside those the store keeps."""
        login = None if self.sasl is None else self.sasl.login
        return () if login is None else login.groups

    def _identify_peer(self, writer: asyncio.StreamWriter) -> None:
        """An SSL listener's client is who its certificate says (Kafka's ``DefaultKafkaPrincipalBuilder``)."""
        tls = writer.get_extra_info("ssl_object")
        certificate = tls.getpeercert(binary_form=True) if tls is not None else None
        try:
            principal = self.identity.certificate_principal(certificate)
        except CertificateNotMapped as e:
            self._unidentified(str(e))
            return
        violations = self.context.violations
        refusal = None if violations is None else violations.login_refusal(principal)
        if refusal is not None:  # refused as a certificate no rule maps is: no principal, closed at once
            self._unidentified(refusal)
            return
        self.peer_principal = principal
        if certificate is not None:
            self._record_ssl_login(principal, succeeded=True)

    def _unidentified(self, reason: str) -> None:
        """An SSL listener's client gets no principal (``reason``): a failed login, and the connection closes."""
        self.unidentified = reason
        self._record_ssl_login(reason, succeeded=False)

    def _record_ssl_login(self, outcome: str, *, succeeded: bool) -> None:
        """Count and audit a certificate login: ``outcome`` is its principal, or why it has none."""
        listener = str(self.listener)
        record_peer_login(self.services.logins, listener, self.host, "SSL", outcome, succeeded=succeeded)
        record_login_event(
            self.context.audit,
            succeeded=succeeded,
            mechanism="SSL",
            listener=listener,
            host=self.host,
            principal=outcome if succeeded else None,
            error=None if succeeded else outcome,
        )

    @property
    def authenticated(self) -> bool:
        return self.sasl is None or self.sasl.authenticated

    def drain(self) -> None:
        """The process is draining: end at the next request boundary (see the module docstring). Called again (the
        drain's sweep), it closes the connection if it now waits for a request of which nothing has arrived (a TLS
        connection's count of arrived bytes can be high: ``protocol.unread``). One case is closed as idle though a
        request has begun: its 4-byte size (6 bytes before login) read and nothing more of it arrived by the sweep;
        nothing of such a request was processed, and the client sends it again on its next connection."""
        unread = unread_bytes(self.reader, self.writer)
        if self._drain_left is None:
            self._drain_left = unread
        if (
            self.between_requests
            and unread == 0
            and not self._interrupted
            and not self._timed_out
            and self._task is not None
        ):
            self._interrupted = True
            self._task.cancel()  # caught in run(): the wait for the next request is all it stops

    @property
    def draining(self) -> bool:
        return self._drain_left is not None

    async def run(self) -> None:
        reason = "client closed the connection"
        self._task = asyncio.current_task()
        try:
            if self.unidentified is not None:  # Kafka closes such a channel at its first request
                raise CloseConnection(f"no principal: {self.unidentified}")
            while True:
                if self.outbox.full:  # relayed answers outstanding: read no more until one is out
                    await self.outbox.room()
                if self._drain_left is not None and self._drain_left <= 0:
                    raise Drained("draining: every request that had arrived is answered")
                self.between_requests = True
                try:
                    frame = await self._next_frame()
                except asyncio.CancelledError:
                    if self._timed_out and not self._uncancel():
                        raise self._deadline_passed() from None
                    if not self._interrupted or self._uncancel():
                        raise  # stopped by its owner, not (only) by drain() or the deadline
                    raise Drained("draining: closed between requests") from None
                self.between_requests = False
                if frame is None:
                    break
                if self._drain_left is not None:
                    self._drain_left -= 4 + len(frame)
                await self._handle(frame)
        except Drained as e:
            reason = str(e)
            await self._close_drained()
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
            if self._deadline_timer is not None:
                self._deadline_timer.cancel()
                self._deadline_timer = None
            session = self.session
            if session is not None:
                reason = session.ended or reason  # the connection was closed because the session ended
                if self.context.sessions is not None:
                    self.context.sessions.discard(session)
            log.debug("connection from %s (%s) closed: %s", self.host, self.principal, reason)
            await self.outbox.stop()
            await self.dispatcher.close()
            task = self._task
            if self._drain_left is not None and task is not None and not task.cancelling():
                await self._end_stream()  # draining, and not forced: the last answer is not cut off by the close
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except (ConnectionError, OSError) as e:
                # A connection lost to an error (the client's reset): asyncio keeps that exception (the protocol's
                # close future) and raises it again here, which adds this frame to its traceback — and this frame
                # holds the connection, which holds the protocol: a garbage cycle holding the whole connection
                # (reader, writer, dispatcher, upstream link, session), which the collector's freeze would keep
                # until the hourly reclaim (tests/proxy/test_no_garbage_cycles.py). Nothing reads the traceback.
                e.__traceback__ = None

    def _uncancel(self) -> int:
        """Take back drain()'s cancellation of this task; the cancellations left (others': its owner's stop)."""
        task = self._task
        return 0 if task is None else task.uncancel()

    async def _close_drained(self) -> None:
        """The drain's end of the connection: the answers in flight go out (relayed ones included), then the end of
        the stream (plaintext: a FIN; TLS: its close_notify); the connection lets go once the client's TCP has
        acknowledged all of it, or the client closed too (at most ``LINGER_SECONDS``), so that the close sends no
        reset that could cut off the last answer. Meanwhile the client's bytes are read and dropped (plaintext) or
        left unread (TLS: asyncio's transport cannot half-close, and the client's close_notify is not waited for,
        which TLS allows the side that closes)."""
        with contextlib.suppress(KafkaguardError, ConnectionError, OSError):
            await self.outbox.flushed()  # a failed answer closes the socket: nothing to end then
        await self._end_stream()

    async def _end_stream(self) -> None:
        """See ``_close_drained``: the end of the stream after the answers written, and the linger."""
        # whatever goes wrong here (the client went away, the linger ran out), it is closed next
        with contextlib.suppress(ConnectionError, OSError, TimeoutError):
            transport = self.writer.transport
            if transport.is_closing():
                return
            await self.writer.drain()
            if not transport.can_write_eof():
                self.writer.close()  # the answers, then close_notify
                async with asyncio.timeout(LINGER_SECONDS):
                    settled = 0
                    while settled < 2:  # twice: what asyncio's transport still held has reached the socket too
                        await asyncio.sleep(_LINGER_POLL_SECONDS)
                        settled = settled + 1 if unacknowledged_bytes(self.writer) == 0 else 0
                transport.abort()
                return
            transport.write_eof()
            async with asyncio.timeout(LINGER_SECONDS):
                while unacknowledged_bytes(self.writer) > 0:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(_LINGER_POLL_SECONDS):
                            if not await self.reader.read(_LINGER_READ):
                                return  # the client closed too

    async def _next_frame(self) -> bytes | None:
        """The next request frame, or None when the client closed between frames. Before login on a SASL listener,
        the wait ends at ``login_deadline`` and each frame is held to its API's limit (``prelogin``), decided from
        its first bytes; both refusals are counted and logged (``Services.refusals``).

        :raises CloseConnection: idle for ``idle_timeout_seconds``, or not logged in by the deadline.
        :raises FrameTooLargeError: a frame above its limit (before login: counted as a refusal too).
        """
        listening = self.services.sections.listening
        loop = asyncio.get_running_loop()
        now = self._waiting_since = loop.time()
        limit, limit_for_api = listening.max_request_bytes, None
        pre_login = not self.authenticated
        if pre_login:
            limit = listening.max_unauthenticated_request_bytes
            if self.sasl is None or not self.sasl.raw_tokens:  # a v0 handshake's raw tokens have no header
                limit_for_api = functools.partial(pre_login_limit, token_bytes=limit)
        deadline = self._deadline(now)
        if deadline <= now:  # checked before reading: frames already buffered must not run past it
            raise self._deadline_passed()
        if self._deadline_timer is None:
            self._deadline_timer = loop.call_at(deadline, self._on_deadline)
        try:
            return await read_frame(self.reader, limit, limit_for_api=limit_for_api)
        except FrameTooLargeError as e:
            if pre_login:
                self.refuse(RefusalReason.PRE_LOGIN_FRAME_SIZE, f"{e}; nothing of it was buffered")
            raise

    def _deadline(self, waiting_since: float) -> float:
        """When a wait for a request that began at ``waiting_since`` (loop time) must end: idle, or (before login)
        the login's deadline, whichever is earlier."""
        idle_at = waiting_since + self.services.sections.listening.idle_timeout_seconds
        if self.authenticated:
            return idle_at
        return min(idle_at, self._login_deadline_at())

    def _login_deadline_at(self) -> float:
        return asyncio.get_running_loop().time() + self.login_deadline - time.monotonic()

    def _on_deadline(self) -> None:
        """The deadline timer (see the module docstring): cancel a wait past its deadline, else arm again."""
        self._deadline_timer = None
        task = self._task
        if task is None or task.done():
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self.between_requests:
            deadline = self._deadline(self._waiting_since)
            if deadline <= now:
                if not self._interrupted and not self._timed_out:  # a drain's cancellation is already on its way
                    self._timed_out = True
                    task.cancel()
                return
        else:
            deadline = self._deadline(now)  # inside a request: the next wait begins later than now
        self._deadline_timer = loop.call_at(deadline, self._on_deadline)

    def _deadline_passed(self) -> CloseConnection:
        """The wait for a request passed its deadline: a refusal counted and logged before login, and why it closes.

        Sooner than idle before login means the login's deadline (``_deadline``)."""
        listening = self.services.sections.listening
        idle_at = self._waiting_since + listening.idle_timeout_seconds
        if not self.authenticated and self._login_deadline_at() < idle_at:
            timeout = listening.sasl_login_timeout_seconds
            self.refuse(
                RefusalReason.SASL_LOGIN_TIMEOUT,
                f"not logged in within sasl_login_timeout_seconds ({timeout:g} s) of connecting",
            )
            return CloseConnection(f"not logged in within {timeout:g} s")
        return CloseConnection(f"idle for {listening.idle_timeout_seconds:g} s")

    def refuse(self, reason: RefusalReason, detail: str) -> None:
        """Count and log (rate-limited) that this connection is closed before login, for ``reason``."""
        self.services.refusals.record(str(self.listener), reason, self.host, detail)

    def send(self, data: bytes) -> Awaitable[None]:
        return self.outbox.send(data)  # the outbox's coroutine itself: no frame of this method's on the hot path

    async def _handle(self, frame: bytes) -> None:
        if self.sasl is not None and self.sasl.raw_tokens and not self.sasl.authenticated:
            await self._raw_token(self.sasl, frame)
            return
        api_key_code = peek_header(frame)[0]  # once: what the checks below and the walked path look at
        if not self.authenticated:
            # Kafka reads only the header before authentication: no other body is decoded until SASL completes.
            if api_key_code not in BEFORE_AUTHENTICATION:  # ApiKey is an IntEnum: a raw code finds its member
                raise ProtocolError(f"API key {api_key_code} before SASL authentication completed")
        elif self.session is not None:
            self._check_session(self.session, api_key_code)
        versions, dispatcher = self.dispatcher.versions, self.dispatcher
        if dispatcher.walked and api_key_code in dispatcher.walked:
            try:
                head = decode_request_head(frame, versions)
            except UnsupportedRequest as e:
                raise CloseConnection(str(e)) from e
            walked = Walked(head, frame, self._caller_of(), self.outbox)
            await self._answer(head, await dispatcher.dispatch_walked(walked))
            return
        try:
            limit = self.services.sections.listening.max_request_items
            if len(frame) > LARGE_FRAME:  # checked and decoded on a worker thread: the loop keeps serving others
                request = await asyncio.to_thread(decode_request, frame, versions, max_items=limit)
            else:
                request = decode_request(frame, versions, max_items=limit)
        except UnsupportedRequest as e:
            if e.api_key == ApiKey.API_VERSIONS:
                # A newer client: answer v0 with our versions so it can pick one (Kafka's rule).
                body = api_versions_response(0, versions, ErrorCode.unsupported_version)
                await self.send(encode_response(ApiKey.API_VERSIONS, 0, e.correlation_id, body))
                return
            raise CloseConnection(str(e)) from e
        api_key, version = request.api_key, request.header.api_version
        if api_key is ApiKey.SASL_HANDSHAKE or api_key is ApiKey.SASL_AUTHENTICATE:
            await self._sasl_request(api_key, version, request.header.correlation_id, request.body)
            return
        if api_key is ApiKey.API_VERSIONS:  # the versions offered: the dispatcher's, answered alike everywhere
            body = api_versions_response(version, versions, features=self.dispatcher.features)
            await self.send(encode_response(api_key, version, request.header.correlation_id, body))
            return
        reply = await dispatcher.dispatch(Incoming(request, frame, self._caller_of(), self.outbox))
        await self._answer(request, reply)

    def _caller_of(self) -> RequestContext:
        caller = self._caller
        if caller is None:  # made once per login: who asks does not change between its requests
            caller = self._caller = RequestContext(self.principal, self.host, self.groups)
        return caller

    async def _answer(self, request: DecodedRequest | RequestHead, reply: Reply) -> None:
        """Send ``reply`` (``replies``: every kind is handled here, and no other)."""
        kind = type(reply)  # identity checks, most frequent first: this runs once per request
        if kind is NoResponse:
            return
        if kind is Relayed:
            self.outbox.relay(cast(Relayed, reply).answer)
            return
        if kind is Throttled:
            throttled = cast(Throttled, reply)
            await self._answer(request, throttled.reply)
            # KIP-219: the answer went out at once; now the client is muted (its next request is not read) until the
            # throttle ends, as Kafka's broker mutes a throttled channel.
            delay_ms = throttled.mute_left_ms()
            if delay_ms > 0:
                await asyncio.sleep(delay_ms / 1000)
            return
        if kind is Close:
            raise CloseConnection(cast(Close, reply).reason)
        response = cast(Response, reply)
        header = request.header
        api_key, version, correlation_id = request.api_key, header.api_version, header.correlation_id
        name = sliced_array(response)
        if name is not None:  # a large answer: encoded in slices, the loop free between them
            data = await encode_response_in_slices(api_key, version, correlation_id, response, name)
        else:
            data = encode_response(api_key, version, correlation_id, response)
        await self.outbox.send(data)

    def _check_session(self, session: Session, api_key_code: int) -> None:
        """Before any request of a logged-in connection (Kafka's ``SocketServer`` does the same), given the
        request's API key: an ended session closes the connection; during a re-authentication only SaslAuthenticate
        may come; past its lifetime (KIP-368) only a SaslHandshake that begins a re-authentication may."""
        if session.ended is not None:
            raise CloseConnection(session.ended)
        if self._reauthentication is not None:
            if api_key_code != ApiKey.SASL_AUTHENTICATE:
                raise CloseConnection(f"API key {api_key_code} during SASL re-authentication")
        elif (
            session.expires_at is not None
            and session.expired(time.monotonic())
            and api_key_code != ApiKey.SASL_HANDSHAKE
        ):
            raise CloseConnection(f"session expired: not re-authenticated within {session.lifetime_ms} ms")

    async def _sasl_request(self, api_key: ApiKey, version: int, correlation_id: int, body: Any) -> None:
        if self.sasl is None:
            raise CloseConnection(f"{api_key.api_name} on a {self.listener.protocol.value} listener")
        sasl, refused = self._sasl_state(self.sasl, api_key)
        if refused is None and self._relays_logins and sasl.reauthenticating:
            await self.outbox.flushed()  # a passed-through re-authentication goes up after the answers before it
        if refused is not None:
            outcome = sasl.refuse(api_key, version, refused)
        elif api_key is ApiKey.SASL_HANDSHAKE:
            outcome = sasl.handshake(version, body)
        else:
            outcome = await sasl.authenticate(version, body)
        if refused is None:
            self._count_login(sasl, outcome)  # before answering: a client that sees the answer sees the count
        if outcome.failed and outcome.delay:
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
        reply, error = await sasl.token(frame)
        if error is not None:
            self._record_login(sasl, ok=False)
            if not sasl.failure_relayed:  # a broker's verdict came delayed by the broker
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
        login = sasl.login
        if login is None:  # unreachable: an authenticated state has its login
            raise CloseConnection("SASL completed without a login")
        self.session = Session(
            login.user,
            login.mechanism,
            login.credential,
            host=self.host,
            listener=str(self.listener),
            lifetime_ms=_bounded_lifetime(sasl.session_lifetime_ms, login),
            now=time.monotonic(),
            close=self.writer.close,
        )
        if self.context.sessions is not None:
            self.context.sessions.add(self.session)

    def _renew_session(self, sasl: SaslState) -> None:
        """A re-authentication succeeded (same user and mechanism, checked by ``SaslState``): the connection goes
        on as before, with the credential or token just proved and a new lifetime."""
        self._reauthentication = None
        self.sasl = sasl
        self._caller = None  # the same user (SaslState checks it), but a new token may carry other groups
        login = sasl.login
        if self.session is not None and login is not None:
            self.session.renew(login.credential, _bounded_lifetime(sasl.session_lifetime_ms, login), time.monotonic())

    def _record_login(self, sasl: SaslState, *, ok: bool) -> None:
        """Count a finished SASL login in ``Services.logins`` and log it (a failure at INFO, as Kafka does; one the
        failure budget refused as a refusal, rate-limited); a re-authentication is logged, not counted."""
        record_login(self.services.logins, str(self.listener), self.host, sasl, succeeded=ok)
        if ok and sasl.reauthenticating:
            return  # a renewed session is no new login
        error = None if ok else sasl.failure or "authentication failed"
        if not ok and sasl.throttled:
            # the budget's (login_failures_per_address_*, login_failures_per_user_*) or a full PLAIN derivation pool
            self.services.refusals.record(
                str(self.listener),
                RefusalReason.LOGIN_FAILURES,
                self.host,
                f"{sasl.mechanism} login refused unchecked: {error}",
            )
            error = THROTTLED_EVENT_ERROR  # without its "retry after N s": identical refusals collapse in the trail
        record_login_event(
            self.context.audit,
            succeeded=ok,
            mechanism=sasl.mechanism or "none",
            listener=str(self.listener),
            host=self.host,
            principal=f"User:{sasl.user}" if ok and sasl.user is not None else None,
            attempted_name=sasl.claimed_user,
            error=error,
        )

    async def _failure_delay(self) -> None:
        # Kafka delays failed authentications (100 ms by default) to slow down guessing; never block the loop.
        delay = self.services.sections.identity.auth_failure_delay_ms / 1000
        if delay:
            await asyncio.sleep(delay)


def _bounded_lifetime(lifetime_ms: int, login: Login) -> int | None:
    """A session's lifetime for ``Session`` (None: as long as the connection). A token always bounds it: one told 0
    (it expired within the clock skew) ends at once — Kafka closes such a connection at its first request too."""
    return lifetime_ms if lifetime_ms > 0 or login.expires_at_ms is not None else None
