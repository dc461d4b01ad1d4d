"""Connections from the proxy to the upstream brokers, logged in with the proxy's own service credential.

Each client connection gets its own upstream connection to the broker it means (see ``nodes``), opened on its first
forwarded request. Requests go upstream in the order the client sent them, and answers come back to the client in
that order, as Kafka's broker answers a connection's requests:

* a request whose answer passes through unchanged (``relay``: the fast path of an allowed Produce, Fetch, group
  request …) is sent at once, and its answer is passed on by this connection's own task while the client
  connection reads, authorizes and sends the next one: up to ``MAX_IN_FLIGHT`` answers outstanding, as a producer
  keeps several requests in flight. Without this the broker would sit idle for a proxy round trip between any two
  requests of a connection;
* any other use (``exchange``: an answer the proxy reads or rewrites, and every answer the proxy makes itself)
  first waits until the relayed answers before it have been passed on.

An upstream that cannot be reached, closes, or does not answer within the timeout raises ``UpstreamUnavailable``
(and a failure while passing an answer on is reported to ``on_failure``): the proxy closes that client's connection,
which every Kafka client treats as a retriable broker failure (it reconnects and retries), and the next client
connection dials again. Nothing waits without a bound.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
import struct
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.errors import KafkaguardError, ScramError
from kafkaguard.proxy.links import ClientWriter, Link, open_link
from kafkaguard.proxy.wire import (
    UpstreamProtocolError,
    correlation_id_of,
    decode_response,
    encode_request,
    request_correlation_id,
)
from kafkaguard.scram import ScramMechanism
from kafkaguard.scram.client import SaltedPasswordCache, ScramClientSession
from kafkaguard.server.build import build_request
from kafkaguard.server.codec import request_schema

log = logging.getLogger(__name__)

#: The largest upstream answer the proxy buffers (a Fetch is bounded by the client's max_bytes; Kafka's default
#: fetch.max.bytes is 50 MiB, so this leaves room for the biggest a client may ask).
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
CLIENT_ID = "kafkaguard-proxy"
#: Relayed answers a client connection may have outstanding before the proxy stops reading its requests (Kafka's
#: Java producer keeps at most 5 requests in flight by default; the proxy then holds back no one).
MAX_IN_FLIGHT = 5
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


@dataclass(frozen=True, slots=True)
class UpstreamSecurity:
    """The proxy's way in: protocol, TLS context, and for SASL the mechanism and service credential."""

    protocol: UpstreamProtocol
    mechanism: ScramMechanism = ScramMechanism.SCRAM_SHA_512
    username: str = ""
    password: str = field(default="", repr=False)
    tls: ssl.SSLContext | None = None
    cache: SaltedPasswordCache = field(default_factory=SaltedPasswordCache, repr=False)


@dataclass(frozen=True, slots=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class _Relayed:
    """A relayed request whose answer is still to be passed on."""

    correlation_id: int
    client: ClientWriter


class UpstreamConnection:
    """One connection to one upstream broker (see the module docstring). Used by one client connection's task; the
    answers to relayed requests are passed on by a task of its own.

    ``addresses`` are tried in order until one answers (a bootstrap connection may go to any of the bootstrap
    servers; a connection meant for one node has just that node's address). ``on_failure`` is told when a relayed
    answer fails while the client connection may be waiting for its client (it must close that connection).
    """

    def __init__(
        self,
        addresses: Sequence[Address],
        security: UpstreamSecurity,
        *,
        timeout: float,
        on_failure: Callable[[UpstreamUnavailable], None] | None = None,
    ) -> None:
        self.addresses = tuple(addresses)
        self.address = self.addresses[0] if self.addresses else Address("unknown", 0)
        self._security = security
        self._timeout = timeout
        self._on_failure = on_failure
        self._link: Link | None = None
        self._correlation = itertools.count(1)
        self._in_flight: deque[_Relayed] = deque()
        self._slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        self._idle = asyncio.Event()
        self._idle.set()
        self._responder: asyncio.Task[None] | None = None
        self._failure: UpstreamUnavailable | None = None
        self._closing = False

    @property
    def connected(self) -> bool:
        return self._link is not None and not self._link.closing

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
        try:
            async with asyncio.timeout(self._timeout):
                tls = security.tls if security.protocol.uses_tls else None
                self._link = await open_link(address.host, address.port, tls)
                if security.protocol.uses_sasl:
                    await self._login()
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ssl.SSLError) as e:
            self._close_link()
            raise UpstreamUnavailable(f"upstream {address} unreachable: {e.__class__.__name__}: {e}") from e
        except (ScramError, UpstreamProtocolError) as e:
            self._close_link()
            raise UpstreamUnavailable(f"upstream {address} refused the proxy's login: {e}") from e

    async def send(self, payload: bytes) -> None:
        """Write one request payload (no length prefix) upstream, in order; connects first if needed. Every request
        the proxy sends upstream goes through here.

        :raises UpstreamUnavailable: see the module docstring.
        """
        if self._failure is not None:
            raise self._failure
        if not self.connected:
            await self.connect()
        assert self._link is not None  # noqa: S101 - connect() set it or raised
        try:
            async with asyncio.timeout(self._timeout):
                await self._link.send((_SIZE.pack(len(payload)), payload))  # no copy of a large request
        except (OSError, TimeoutError) as e:
            raise self._fail(UpstreamUnavailable(f"upstream {self.address} failed: {e.__class__.__name__}: {e}")) from e

    async def exchange(self, payload: bytes, *, expect_response: bool = True) -> bytes | None:
        """Send one request payload and return the response payload (None when the request has none: a Produce with
        acks=0). Waits for every relayed answer before it first (answers come in request order).

        :raises UpstreamUnavailable: see the module docstring.
        """
        await self.idle()
        await self.send(payload)
        if not expect_response:
            return None
        try:
            async with asyncio.timeout(self._timeout):
                return await self._read_answer(request_correlation_id(payload))
        except UpstreamProtocolError as e:
            self._fail(UpstreamUnavailable(str(e)))
            raise
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as e:
            raise self._fail(UpstreamUnavailable(f"upstream {self.address} failed: {e.__class__.__name__}: {e}")) from e

    async def _read_answer(self, expected: int) -> bytes:
        """The next response payload on the link, which must answer correlation id ``expected``."""
        assert self._link is not None  # noqa: S101 - the request was sent on it
        (size,) = _SIZE.unpack(await self._link.read_exactly(4))
        if not 4 <= size <= MAX_RESPONSE_BYTES:
            raise UpstreamProtocolError(f"upstream {self.address} sent a response frame of {size} bytes")
        response = await self._link.read_exactly(size)
        if correlation_id_of(response) != expected:
            raise UpstreamProtocolError(
                f"upstream {self.address} answered correlation id {correlation_id_of(response)}, not {expected}"
            )
        return response

    async def relay(self, payload: bytes, client: ClientWriter) -> None:
        """Send one request and have its answer passed on to ``client`` unchanged, as it arrives, never held whole
        (a Fetch answer can be tens of MiB; nothing in it needs reading). Returns once the request is sent: the
        answer follows, after the answers of the requests relayed before it, while the client connection reads its
        next request (at most ``MAX_IN_FLIGHT`` answers outstanding). The correlation id of each answer is checked
        before its first byte goes out; a failure closes the client connection (``on_failure``), since the client may
        then hold part of an answer.

        :raises UpstreamUnavailable: the upstream failed (this request's or an earlier relayed one's answer).
        """
        await self._slots.acquire()
        try:
            await self.send(payload)
        except BaseException:
            self._slots.release()
            raise
        self._in_flight.append(_Relayed(request_correlation_id(payload), client))
        self._idle.clear()
        if self._responder is None:
            self._responder = asyncio.create_task(self._pass_answers_on(), name=f"relay from {self.address}")

    async def idle(self) -> None:
        """Wait until every relayed answer has been passed on.

        :raises UpstreamUnavailable: passing one on failed.
        """
        await self._idle.wait()
        if self._failure is not None:
            raise self._failure

    async def _pass_answers_on(self) -> None:
        """The relayed answers, in request order, each under the timeout (see ``relay``)."""
        try:
            while self._in_flight:
                relayed = self._in_flight[0]
                async with asyncio.timeout(self._timeout):
                    await self._pass_on(relayed)
                self._in_flight.popleft()
                self._slots.release()
        except UpstreamProtocolError as e:
            self._fail(UpstreamUnavailable(str(e)), notify=True)
        except (OSError, TimeoutError, asyncio.IncompleteReadError, KafkaguardError) as e:
            self._fail(UpstreamUnavailable(f"upstream {self.address} failed: {e.__class__.__name__}: {e}"), notify=True)
        except Exception as e:  # never leave a waiter hanging: whatever went wrong ends this connection
            log.exception("relaying from upstream %s failed", self.address)
            self._fail(UpstreamUnavailable(f"upstream {self.address} failed: {e.__class__.__name__}"), notify=True)
        finally:
            self._responder = None
            self._idle.set()
            if self._failure is not None or self._closing:
                self._close_link()  # only now: its waits on the link's sockets are unregistered

    async def _pass_on(self, relayed: _Relayed) -> None:
        assert self._link is not None  # noqa: S101 - relay() sent on it
        head = await self._link.read_exactly(8)  # the frame's size, then the correlation id
        (size,) = _SIZE.unpack_from(head)
        if not 4 <= size <= MAX_RESPONSE_BYTES:
            raise UpstreamProtocolError(f"upstream {self.address} sent a response frame of {size} bytes")
        if correlation_id_of(head[4:]) != relayed.correlation_id:
            raise UpstreamProtocolError(
                f"upstream {self.address} answered correlation id {correlation_id_of(head[4:])}, "
                f"not {relayed.correlation_id}"
            )
        await self._link.pass_on(head, size - 4, relayed.client)

    def _fail(self, failure: UpstreamUnavailable, *, notify: bool = False) -> UpstreamUnavailable:
        """This connection is done: remember why (every later call raises it), release whoever waits, close."""
        if self._failure is None:
            self._failure = failure
            if notify and self._on_failure is not None:
                self._on_failure(failure)
        while self._in_flight:
            self._in_flight.popleft()
            self._slots.release()
        self._idle.set()
        if self._responder is None or self._responder is asyncio.current_task():
            self._close_link()
        else:
            self._stop_responder()
        return self._failure

    def _stop_responder(self) -> None:
        """Cancel the responder and close the link once it has ended (its waits on the link's sockets unregistered
        by then; a task cancelled before its first step never runs its own ``finally``)."""
        assert self._responder is not None  # noqa: S101 - callers check
        self._responder.add_done_callback(lambda _: self._close_link())
        self._responder.cancel()

    async def call(self, api_key: ApiKey, api_version: int, body: Any) -> Any:
        """The proxy's own request (version and node discovery), with its own correlation id: decoded."""
        payload = encode_request(api_key, api_version, next(self._correlation), CLIENT_ID, body)
        response = await self.exchange(payload)
        assert response is not None  # noqa: S101 - expect_response is True
        return decode_response(api_key, api_version, response)

    async def _login_call(self, api_key: ApiKey, api_version: int, body: Any) -> Any:
        """One login request on the link being opened (its errors are ``connect``'s to report)."""
        assert self._link is not None  # noqa: S101 - _connect_to opened it
        correlation_id = next(self._correlation)
        payload = encode_request(api_key, api_version, correlation_id, CLIENT_ID, body)
        await self._link.send((_SIZE.pack(len(payload)), payload))
        return decode_response(api_key, api_version, await self._read_answer(correlation_id))

    def close(self) -> None:
        """Close the link and stop passing answers on (the client connection is ending). The failure callback is
        dropped: nobody is told of failures any more, and it is a bound method of the client connection, which held
        the two in a reference cycle (``server.collector`` counts on connections that end leaving none)."""
        self._closing = True
        self._on_failure = None
        if self._responder is not None:
            self._stop_responder()
        else:
            self._close_link()

    def _close_link(self) -> None:
        if self._link is not None:
            self._link.close()
        self._link = None

    async def _login(self) -> None:
        """SaslHandshake v1, then SCRAM in SaslAuthenticate v2 frames (KIP-152), as Kafka's Java client logs in."""
        security = self._security
        mechanism_name = security.mechanism.mechanism_name
        handshake = await self._login_call(
            ApiKey.SASL_HANDSHAKE, 1, build_request(request_schema(ApiKey.SASL_HANDSHAKE, 1), mechanism=mechanism_name)
        )
        if int(handshake.error_code) != 0:
            raise ScramError(f"the upstream does not offer {mechanism_name} (it offers {list(handshake.mechanisms)})")
        session = ScramClientSession(
            security.mechanism, security.username, security.password, salted_password_cache=security.cache
        )
        server_first = await self._authenticate(session.first_message())
        # PBKDF2 on a cache miss: up to ~1 s at the iteration counts a broker may ask for, never on the loop
        client_final = await asyncio.to_thread(session.final_message, server_first)
        server_final = await self._authenticate(client_final)
        session.verify_server_final(server_final)

    async def _authenticate(self, token: bytes) -> bytes:
        schema = request_schema(ApiKey.SASL_AUTHENTICATE, 2)
        answer = await self._login_call(ApiKey.SASL_AUTHENTICATE, 2, build_request(schema, auth_bytes=token))
        if int(answer.error_code) != 0:
            raise ScramError(f"upstream login failed: {answer.error_message or answer.error_code}")
        return bytes(answer.auth_bytes)
