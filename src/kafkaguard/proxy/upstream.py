"""Connections from the proxy to the upstream brokers, logged in with the proxy's own service credential.

Each client connection gets its own upstream connection to the broker it means (see ``nodes``), opened on its first
forwarded request. Requests go upstream in the order the client sent them, and the upstream answers them in that
order, as Kafka's broker answers a connection's requests:

* a request whose answer passes through unchanged (the fast path of an allowed Produce, Fetch, group request …) is
  sent at once (``send``), and its answer is passed on later by the client connection's writer
  (``pass_answer_on``, run by ``protocol.outbox``) while the client connection reads, authorizes and sends the
  next one. Without this the broker would sit idle for a proxy round trip between any two requests of a connection;
* any other use (``exchange``: an answer the proxy reads or rewrites) is made once the answers before it have been
  passed on (the caller waits for its outbox).

An upstream that cannot be reached, closes, or does not answer within the timeout raises ``UpstreamUnavailable``:
the proxy closes that client's connection, which every Kafka client treats as a retriable broker failure (it
reconnects and retries), and the next client connection dials again. Nothing waits without a bound. Each failed
dial (every address tried) and each connection that fails in use is counted by reason in the process's
``UpstreamFailures`` when one is given (``kafkaguard_upstream_failures_total{reason}``): a client's login refused by
the broker in passthrough is the client's failure, not the upstream's, and is not counted.

A connection is in one of three states (``_NotConnected``, ``_Connected`` with its link, ``_Failed`` with why):
what each call may do is decided by the state's type, not by asserts.

``Upstream`` names what a request's handling uses of its upstream connection (``proxy.scope`` and the handlers):
``UpstreamConnection`` is the one the proxy runs with; the proxy's unit tests put an in-memory one in its place
(``tests/proxy/memory_upstream.py``), so a handler's decisions are tested without sockets or a broker.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from typing import Any, Protocol

from kafkaguard.audit.records.upstream_failures import UpstreamFailure, UpstreamFailures
from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.errors import KafkaguardError, ScramError
from kafkaguard.identity.kerberos import Initiator, KerberosError
from kafkaguard.protocol.build import build_request
from kafkaguard.protocol.codec import request_schema
from kafkaguard.protocol.passthrough import LoginUnavailable, RelayedAnswer
from kafkaguard.protocol.replies import ClientWriter
from kafkaguard.proxy.links import Link, open_link
from kafkaguard.proxy.oauthbearer_client import (
    OAUTHBEARER,
    OAUTHBEARER_ERROR_ACKNOWLEDGEMENT,
    oauthbearer_error_status,
    oauthbearer_initial_response,
)
from kafkaguard.proxy.walks import AnswerEdit
from kafkaguard.proxy.wire import (
    ClientGone,
    UpstreamProtocolError,
    correlation_id_of,
    decode_response,
    encode_request,
    request_correlation_id,
)
from kafkaguard.scram import ScramMechanism
from kafkaguard.scram.client import SaltedPasswordCache, ScramClientSession

log = logging.getLogger(__name__)

#: The largest upstream answer the proxy buffers (a Fetch is bounded by the client's max_bytes; Kafka's default
#: fetch.max.bytes is 50 MiB, so this leaves room for the biggest a client may ask).
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
CLIENT_ID = "kafkaguard-proxy"
_SIZE = struct.Struct(">i")


class UpstreamProtocol(Enum):
    """How the proxy reaches the upstream cluster (Kafka's ``security.protocol``)."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_sasl(self) -> bool:
        return self in (UpstreamProtocol.SASL_PLAINTEXT, UpstreamProtocol.SASL_SSL)

    @property
    def uses_tls(self) -> bool:
        return self in (UpstreamProtocol.SSL, UpstreamProtocol.SASL_SSL)


class UpstreamUnavailable(KafkaguardError):
    """The upstream broker cannot be reached, closed the connection, refused the proxy's login, or did not answer in
    time; the message says which, never a secret."""


class TokenSource(Protocol):
    """Where OAUTHBEARER logins get their token (``proxy.upstream_tokens.AccessTokenSource``)."""

    async def token(self) -> str:
        """The token a new connection logs in with.

        :raises UpstreamUnavailable: there is none to be had.
        """
        ...


#: The SASL name of Kerberos.
GSSAPI = "GSSAPI"
#: The most SaslAuthenticate round trips a GSSAPI login takes (the context, the empty token, the layer answer).
_GSSAPI_MAX_STEPS = 5


@dataclass(frozen=True, slots=True)
class KerberosLogin:
    """The proxy's own Kerberos principal (its keytab's credentials) and the upstream brokers' service name: each
    connection asks for a ticket to ``<service>/<the broker host it dialled>``."""

    initiator: Initiator
    service: str

    @property
    def mechanism_name(self) -> str:
        return GSSAPI


@dataclass(frozen=True, slots=True)
class ScramLogin:
    """SCRAM with the proxy's service user."""

    mechanism: ScramMechanism
    username: str
    password: str = field(repr=False)
    #: Salted passwords by the salt and iterations the upstream asks for: one PBKDF2 per process, not per connection.
    cache: SaltedPasswordCache = field(default_factory=SaltedPasswordCache, repr=False)

    @property
    def mechanism_name(self) -> str:
        return self.mechanism.mechanism_name


@dataclass(frozen=True, slots=True)
class OAuthBearerLogin:
    """OAUTHBEARER with the tokens ``tokens`` gets (no SCRAM mechanism, user or password)."""

    tokens: TokenSource

    @property
    def mechanism_name(self) -> str:
        return OAUTHBEARER


#: How the proxy logs in on a SASL upstream.
UpstreamLogin = ScramLogin | OAuthBearerLogin | KerberosLogin


@dataclass(frozen=True, slots=True)
class UpstreamSecurity:
    """The proxy's way in: protocol, the login on a SASL upstream (none without SASL), and the TLS context (with the
    proxy's client certificate, if it has one)."""

    protocol: UpstreamProtocol
    #: None on a SASL upstream fails its login (``proxy.app.upstream_security`` always gives one there).
    login: UpstreamLogin | None = None
    tls: ssl.SSLContext | None = None


@dataclass(frozen=True, slots=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class _NotConnected:
    """Not dialled yet, or closed: the next request dials."""


@dataclass(frozen=True, slots=True)
class _Connected:
    link: Link


@dataclass(frozen=True, slots=True)
class _Failed:
    """Done: every later call raises ``failure``."""

    failure: UpstreamUnavailable


_NOT_CONNECTED = _NotConnected()


def failure_reason(error: BaseException, *, dialled: bool) -> UpstreamFailure:
    """What an exception from an upstream link says went wrong (``dialled``: the TCP connection had been made, so an
    ``OSError`` is the upstream closing or resetting it, not an unreachable address)."""
    if isinstance(error, ssl.SSLError):  # before OSError: SSLError is one
        return UpstreamFailure.TLS
    if isinstance(error, TimeoutError):  # before OSError: TimeoutError is one
        return UpstreamFailure.TIMEOUT
    if isinstance(error, UpstreamProtocolError):
        return UpstreamFailure.PROTOCOL
    if isinstance(error, asyncio.IncompleteReadError) or (isinstance(error, OSError) and dialled):
        return UpstreamFailure.CLOSED
    return UpstreamFailure.UNREACHABLE


class Upstream(Protocol):
    """The way upstream of one client connection, as a request's handling uses it (``UpstreamConnection`` says what
    each call does): requests go up in order and are answered in order."""

    @property
    def address(self) -> Address:
        """The broker this connection reached (or will dial first)."""
        ...

    async def send(self, payload: bytes) -> None:
        """Write one request payload (no length prefix) upstream."""
        ...

    async def exchange(self, payload: bytes) -> bytes:
        """Send one request payload and return its response payload."""
        ...

    async def pass_answer_on(self, correlation_id: int, client: ClientWriter, edit: AnswerEdit | None = None) -> None:
        """Pass the framed answer to the request sent with ``correlation_id`` on to ``client``, unchanged (with
        ``edit``: walked as it passes, its last bytes rewritten, ``walks``)."""
        ...

    async def call(self, api_key: ApiKey, api_version: int, body: Any) -> Any:
        """The proxy's own request, with its own correlation id: the decoded answer."""
        ...

    def close(self) -> None:
        """The client connection has ended."""
        ...

    async def relay_login(self, mechanism: str, token: bytes, *, first: bool) -> RelayedAnswer:
        """A client's SASL token passed through to the broker (``protocol.passthrough.LoginRelay``)."""
        ...

    @property
    def as_client(self) -> bool:
        """Logged in as the client (its login passed through), not as the proxy's service account: the broker's
        own ACLs then decide the client's requests too (``proxy.broker_refusals``)."""
        ...


#: How a client connection gets its way upstream: from the addresses to try (``UpstreamConnection`` with the proxy's
#: security and timeout; a test's in-memory upstream).
Dial = Callable[[Sequence[Address]], Upstream]


class UpstreamConnection:
    """One connection to one upstream broker (see the module docstring), used by one client connection.

    ``addresses`` are tried in order until one answers (a bootstrap connection may go to any of the bootstrap
    servers; a connection meant for one node has just that node's address).
    """

    def __init__(
        self,
        addresses: Sequence[Address],
        security: UpstreamSecurity,
        *,
        timeout: float,
        failures: UpstreamFailures | None = None,
    ) -> None:
        self.addresses = tuple(addresses)
        self.address = self.addresses[0] if self.addresses else Address("unknown", 0)
        self._security = security
        self._timeout = timeout
        self._failures = failures
        self._state: _NotConnected | _Connected | _Failed = _NOT_CONNECTED
        self._correlation = itertools.count(1)
        #: An answer being passed on: the link is then closed by ``pass_answer_on`` when it ends (a socket must not be
        #: closed under the loop's wait on it).
        self._passing = False
        #: A client's login was passed through on this connection: it is the client's, and is never dialled again
        #: with the service credential (``relay_login``).
        self._relayed = False
        #: The mechanisms the broker enables, from its answer to the service login's SaslHandshake (empty before).
        self.offered_mechanisms: tuple[str, ...] = ()

    @property
    def as_client(self) -> bool:
        return self._relayed

    @property
    def connected(self) -> bool:
        state = self._state
        return isinstance(state, _Connected) and not state.link.closing

    @property
    def failed(self) -> bool:
        """Failed in use: every later call raises why (a failed dial is not this: the next call dials again)."""
        return isinstance(self._state, _Failed)

    async def connect(self) -> None:
        """Dial the first address that answers and, for SASL, log in.

        :raises UpstreamUnavailable: none reachable, TLS failed, or the login was refused.
        """
        failure = UpstreamUnavailable("no address for this upstream broker (it left the cluster's metadata)")
        for address in self.addresses:
            self.address = address
            try:
                await self._connect_to(address)
                return
            except UpstreamUnavailable as e:
                failure = e
        raise failure

    async def _connect_to(self, address: Address) -> None:
        security = self._security
        dialled = False
        try:
            async with asyncio.timeout(self._timeout):
                tls = security.tls if security.protocol.uses_tls else None
                link = await open_link(address.host, address.port, tls)
                dialled = True
                self._state = _Connected(link)
                if security.protocol.uses_sasl:
                    await self._login(link)
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ssl.SSLError) as e:
            self.close()
            self._count(failure_reason(e, dialled=dialled))
            raise UpstreamUnavailable(f"upstream {address} unreachable: {e.__class__.__name__}: {e}") from e
        except (ScramError, UpstreamProtocolError) as e:
            self.close()
            self._count(UpstreamFailure.LOGIN)
            raise UpstreamUnavailable(f"upstream {address} refused the proxy's login: {e}") from e
        except UpstreamUnavailable:  # no OAuth token to be had, or OAUTHBEARER refused (the message says which)
            self.close()
            self._count(UpstreamFailure.LOGIN)
            raise

    def _count(self, reason: UpstreamFailure) -> None:
        if self._failures is not None:
            self._failures.record(reason)

    async def _link(self) -> Link:
        """The open link, dialled first if needed.

        :raises UpstreamUnavailable: this connection failed before, or dialling fails.
        """
        state = self._state
        if isinstance(state, _Failed):
            raise state.failure
        if isinstance(state, _Connected) and not state.link.closing:
            return state.link
        if self._relayed:  # the client's own login is gone with its link: no other may stand in for it
            raise self._fail(
                UpstreamUnavailable(f"upstream {self.address} closed the client's passed-through login"),
                UpstreamFailure.CLOSED,
            )
        await self.connect()
        state = self._state
        if not isinstance(state, _Connected):  # connect() leaves it connected or raises
            raise UpstreamUnavailable(f"upstream {self.address} not connected")
        return state.link

    async def send(self, payload: bytes) -> None:
        """Write one request payload (no length prefix) upstream, in order; connects first if needed. Every request
        the proxy sends upstream goes through here.

        :raises UpstreamUnavailable: see the module docstring.
        """
        link = await self._link()
        try:
            async with asyncio.timeout(self._timeout):
                await link.send((_SIZE.pack(len(payload)), payload))  # no copy of a large request
        except (OSError, TimeoutError) as e:
            raise self._fail(
                UpstreamUnavailable(f"upstream {self.address} failed: {e.__class__.__name__}: {e}"),
                failure_reason(e, dialled=True),
            ) from e

    async def exchange(self, payload: bytes) -> bytes:
        """Send one request payload and return the response payload. The caller has waited for the answers relayed
        before it (answers come in request order).

        :raises UpstreamUnavailable: see the module docstring.
        """
        await self.send(payload)
        link = await self._link()
        try:
            async with asyncio.timeout(self._timeout):
                return await self._read_answer(link, request_correlation_id(payload))
        except UpstreamProtocolError as e:
            self._fail(UpstreamUnavailable(str(e)), UpstreamFailure.PROTOCOL)
            raise
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as e:
            raise self._fail(
                UpstreamUnavailable(f"upstream {self.address} failed: {e.__class__.__name__}: {e}"),
                failure_reason(e, dialled=True),
            ) from e

    async def _read_answer(self, link: Link, expected: int) -> bytes:
        """The next response payload on ``link``, which must answer correlation id ``expected``."""
        (size,) = _SIZE.unpack(await link.read_exactly(4))
        if not 4 <= size <= MAX_RESPONSE_BYTES:
            raise UpstreamProtocolError(f"upstream {self.address} sent a response frame of {size} bytes")
        response = await link.read_exactly(size)
        if correlation_id_of(response) != expected:
            raise UpstreamProtocolError(
                f"upstream {self.address} answered correlation id {correlation_id_of(response)}, not {expected}"
            )
        return response

    async def pass_answer_on(self, correlation_id: int, client: ClientWriter, edit: AnswerEdit | None = None) -> None:
        """Pass the answer to the request sent with ``correlation_id`` on to ``client`` unchanged, as it arrives,
        never held whole (a Fetch answer can be tens of MiB; nothing in it needs reading), under the timeout. The
        correlation id is checked before its first byte goes out. With ``edit`` the answer is walked on the way and
        its last bytes rewritten (``links``, ``walks``); a malformed one fails the connection as a bad frame does.

        :raises UpstreamUnavailable: the upstream failed (the client may then hold part of an answer: its connection
            must close).
        """
        link = await self._link()
        self._passing = True
        try:
            async with asyncio.timeout(self._timeout):
                head = await link.read_exactly(8)  # the frame's size, then the correlation id
                (size,) = _SIZE.unpack_from(head)
                if not 4 <= size <= MAX_RESPONSE_BYTES:
                    raise UpstreamProtocolError(f"upstream {self.address} sent a response frame of {size} bytes")
                if correlation_id_of(head[4:]) != correlation_id:
                    raise UpstreamProtocolError(
                        f"upstream {self.address} answered correlation id "
                        f"{correlation_id_of(head[4:])}, not {correlation_id}"
                    )
                await link.pass_on(head, size - 4, client, edit)
        except UpstreamProtocolError as e:
            raise self._fail(UpstreamUnavailable(str(e)), UpstreamFailure.PROTOCOL) from e
        except ClientGone as e:  # cut mid-answer: this connection is done, but the upstream did not fail
            raise self._fail(
                UpstreamUnavailable(
                    f"the client went away while an answer of upstream {self.address} was passed on: {e}"
                )
            ) from e
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as e:
            raise self._fail(
                UpstreamUnavailable(f"upstream {self.address} failed: {e.__class__.__name__}: {e}"),
                failure_reason(e, dialled=True),
            ) from e
        finally:
            self._passing = False
            if not isinstance(self._state, _Connected):  # failed or closed meanwhile: only now may the link close
                link.close()

    def _fail(self, failure: UpstreamUnavailable, reason: UpstreamFailure | None = None) -> UpstreamUnavailable:
        """This connection is done: remember why (every later call raises it), count ``reason`` once (None: not the
        upstream's failure, such as a client's refused passthrough login) and close the link (unless an answer is
        being passed on from it: ``pass_answer_on`` closes it when it ends)."""
        state = self._state
        if isinstance(state, _Failed):
            return state.failure
        self._state = _Failed(failure)
        if reason is not None:
            self._count(reason)
        if isinstance(state, _Connected) and not self._passing:
            state.link.close()
        return failure

    async def call(self, api_key: ApiKey, api_version: int, body: Any) -> Any:
        """The proxy's own request (version and node discovery), with its own correlation id: decoded."""
        payload = encode_request(api_key, api_version, next(self._correlation), CLIENT_ID, body)
        response = await self.exchange(payload)
        return decode_response(api_key, api_version, response)

    async def _login_call(self, link: Link, api_key: ApiKey, api_version: int, body: Any) -> Any:
        """One login request on the link being opened (its errors are ``connect``'s to report)."""
        correlation_id = next(self._correlation)
        payload = encode_request(api_key, api_version, correlation_id, CLIENT_ID, body)
        await link.send((_SIZE.pack(len(payload)), payload))
        return decode_response(api_key, api_version, await self._read_answer(link, correlation_id))

    def close(self) -> None:
        """The client connection has ended (its outbox stopped first: no answer is being passed on)."""
        state = self._state
        self._state = _NOT_CONNECTED
        if isinstance(state, _Connected):
            state.link.close()

    async def _login(self, link: Link) -> None:
        """SaslHandshake v1, then SCRAM, OAUTHBEARER or GSSAPI in SaslAuthenticate v2 frames (KIP-152), as Kafka's
        Java client logs in."""
        login = self._security.login
        if login is None:
            raise UpstreamProtocolError(f"no login for a {self._security.protocol.value} upstream")
        mechanism_name = login.mechanism_name
        handshake = await self._login_call(
            link,
            ApiKey.SASL_HANDSHAKE,
            1,
            build_request(request_schema(ApiKey.SASL_HANDSHAKE, 1), mechanism=mechanism_name),
        )
        self.offered_mechanisms = tuple(str(name) for name in handshake.mechanisms)
        if int(handshake.error_code) != 0:
            raise ScramError(f"the upstream does not offer {mechanism_name} (it offers {list(handshake.mechanisms)})")
        if isinstance(login, OAuthBearerLogin):
            await self._login_oauthbearer(link, login.tokens)
            return
        if isinstance(login, KerberosLogin):
            await self._login_gssapi(link, login)
            return
        session = ScramClientSession(login.mechanism, login.username, login.password, salted_password_cache=login.cache)
        server_first = await self._authenticate(link, session.first_message())
        # PBKDF2 on a cache miss: O(iterations), and a broker may ask for many: never on the loop
        client_final = await asyncio.to_thread(session.final_message, server_first)
        server_final = await self._authenticate(link, client_final)
        session.verify_server_final(server_final)

    async def _login_oauthbearer(self, link: Link, tokens: TokenSource) -> None:
        """One OAUTHBEARER message with the current token. A server that refuses it answers an error challenge
        (success, with a JSON document) and, once the client acknowledges it, fails the exchange with its message.

        :raises UpstreamUnavailable: no token, or the upstream refused it (with its status and message).
        """
        answer = await self._sasl_authenticate(link, oauthbearer_initial_response(await tokens.token()))
        if int(answer.error_code) == 0 and not answer.auth_bytes:
            return
        status = ""
        if int(answer.error_code) == 0:  # the error challenge
            status = f" ({oauthbearer_error_status(bytes(answer.auth_bytes))})"
            answer = await self._sasl_authenticate(link, OAUTHBEARER_ERROR_ACKNOWLEDGEMENT)
        raise UpstreamUnavailable(
            f"upstream {self.address} refused the proxy's OAUTHBEARER token{status}: "
            f"{answer.error_message or f'error code {answer.error_code}'}"
        )

    async def _login_gssapi(self, link: Link, kerberos: KerberosLogin) -> None:
        """SASL/GSSAPI as Java's ``GssKrb5Client`` (``identity.kerberos``). The first token may cost two round trips
        to the KDC (the proxy's TGT from its keytab, then the broker's service ticket): made on a thread.

        :raises UpstreamUnavailable: no ticket to be had, or the upstream refused the login (with its message).
        """
        try:
            exchange = kerberos.initiator.exchange(kerberos.service, self.address.host)
            token: bytes | None = await asyncio.to_thread(exchange.first)
            for _ in range(_GSSAPI_MAX_STEPS):
                if token is None:
                    return
                answer = await self._sasl_authenticate(link, token)
                if int(answer.error_code) != 0:
                    raise UpstreamUnavailable(
                        f"upstream {self.address} refused the proxy's GSSAPI login as {kerberos.initiator.principal}: "
                        f"{answer.error_message or f'error code {answer.error_code}'}"
                    )
                token = exchange.step(bytes(answer.auth_bytes))  # no I/O after the first token: cheap on the loop
        except KerberosError as e:
            raise UpstreamUnavailable(
                f"upstream {self.address}: the proxy's GSSAPI login as {kerberos.initiator.principal} failed: {e}"
            ) from None
        raise UpstreamUnavailable(f"upstream {self.address}: the GSSAPI login did not end")

    async def _sasl_authenticate(self, link: Link, auth_bytes: bytes) -> Any:
        schema = request_schema(ApiKey.SASL_AUTHENTICATE, 2)
        return await self._login_call(link, ApiKey.SASL_AUTHENTICATE, 2, build_request(schema, auth_bytes=auth_bytes))

    async def _authenticate(self, link: Link, token: bytes) -> bytes:
        answer = await self._sasl_authenticate(link, token)
        if int(answer.error_code) != 0:
            raise ScramError(f"upstream login failed: {answer.error_message or answer.error_code}")
        return bytes(answer.auth_bytes)

    async def relay_login(self, mechanism: str, token: bytes, *, first: bool) -> RelayedAnswer:
        """Pass a SASL token of the client's on to the broker, and the broker's answer back (``protocol.passthrough``):
        ``first`` opens this connection without the service login and sends SaslHandshake v1 for ``mechanism`` first
        (or, on a connection already logged in, begins its re-authentication, KIP-368); the token goes in a
        SaslAuthenticate v2. A refusal leaves the connection failed (the broker closes it, too).

        :raises LoginUnavailable: the broker could not be reached or did not answer in time (never a token in it).
        """
        self._relayed = True
        try:
            async with asyncio.timeout(self._timeout):
                link = await self._relay_link(first)
                if first:
                    schema = request_schema(ApiKey.SASL_HANDSHAKE, 1)
                    handshake = await self._login_call(
                        link, ApiKey.SASL_HANDSHAKE, 1, build_request(schema, mechanism=mechanism)
                    )
                    if int(handshake.error_code) != 0:
                        self._fail(UpstreamUnavailable(f"upstream {self.address} does not enable {mechanism}"))
                        return RelayedAnswer(int(handshake.error_code), f"Unsupported SASL mechanism {mechanism}", b"")
                answer = await self._sasl_authenticate(link, token)
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ssl.SSLError, UpstreamProtocolError) as e:
            failure = f"upstream {self.address} could not be asked about a login: {e.__class__.__name__}"
            self._fail(UpstreamUnavailable(failure), failure_reason(e, dialled=isinstance(self._state, _Connected)))
            raise LoginUnavailable(failure) from None  # the exception's text may quote what was sent: not chained
        code = int(answer.error_code)
        if code != 0:
            self._fail(UpstreamUnavailable(f"upstream {self.address} refused the client's login"))
        lifetime = answer.session_lifetime // timedelta(milliseconds=1)  # kio reads session_lifetime_ms as a timedelta
        return RelayedAnswer(code, answer.error_message, bytes(answer.auth_bytes), lifetime)

    async def _relay_link(self, first: bool) -> Link:
        """The link a relayed token goes on: a new one, dialled without a login, for a first token (the logged-in
        one when re-authenticating); the one the exchange is on for the others.

        :raises OSError, TimeoutError, ssl.SSLError: no address could be dialled.
        :raises LoginUnavailable: the connection failed before.
        """
        state = self._state
        if isinstance(state, _Failed):
            raise LoginUnavailable(str(state.failure))
        if isinstance(state, _Connected) and not state.link.closing:
            return state.link
        if not first:
            raise LoginUnavailable(f"upstream {self.address} closed the connection during a login")
        tls = self._security.tls if self._security.protocol.uses_tls else None
        failure: OSError = OSError("no address for this upstream broker")
        for address in self.addresses:
            self.address = address
            try:
                link = await open_link(address.host, address.port, tls)
            except OSError as e:  # ssl.SSLError is an OSError
                failure = e
                continue
            self._state = _Connected(link)
            return link
        raise failure


def _is_upstream(connection: UpstreamConnection) -> Upstream:
    """Never called: mypy checks here that ``UpstreamConnection`` is an ``Upstream``."""
    return connection
