"""Connections from the proxy to the upstream brokers, logged in with the proxy's own service credential.

Each client connection gets its own upstream connection to the broker it means (see ``nodes``), opened on its first
forwarded request. Requests on it go one at a time, answer before the next, exactly as the client's own requests
reach the proxy and as Kafka's broker processes a connection's requests (it reads the next request only after
answering the last), so the order a client sends in is the order the broker sees.

An upstream that cannot be reached, closes, or does not answer within the timeout raises ``UpstreamUnavailable``:
the proxy closes that client's connection, which every Kafka client treats as a retriable broker failure (it
reconnects and retries), and the next client connection dials again. Nothing waits without a bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import ssl
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.errors import KafkaguardError, ScramError
from kafkaguard.proxy.wire import (
    UpstreamProtocolError,
    correlation_id_of,
    decode_response,
    encode_request,
    request_correlation_id,
)
from kafkaguard.scram import ScramMechanism
from kafkaguard.scram.client import SaltedPasswordCache, ScramClientSession
from kafkaguard.server.build import build
from kafkaguard.server.codec import request_schema
from kafkaguard.server.framing import read_frame

log = logging.getLogger(__name__)

#: The largest upstream answer the proxy buffers (a Fetch is bounded by the client's max_bytes; Kafka's default
#: fetch.max.bytes is 50 MiB, so this leaves room for the biggest a client may ask).
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
CLIENT_ID = "kafkaguard-proxy"
#: Bytes a relayed response is copied in at a time (large enough to amortize the loop, small enough to stream).
RELAY_CHUNK = 1024 * 1024
#: How much of an upstream answer the reader buffers before pausing the socket (asyncio's ``limit``). Measured with
#: bench_proxy: 8 MiB here (and an 8 MiB client write buffer) made consuming slower (0.45× direct vs 0.66× with
#: 1 MiB): larger copies leave the CPU caches on this 2-core machine.
STREAM_BUFFER = 1024 * 1024
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


class UpstreamConnection:
    """One connection to one upstream broker (see the module docstring). Not for concurrent use.

    ``addresses`` are tried in order until one answers (a bootstrap connection may go to any of the bootstrap
    servers; a connection meant for one node has just that node's address)."""

    def __init__(self, addresses: Sequence[Address], security: UpstreamSecurity, *, timeout: float) -> None:
        self.addresses = tuple(addresses)
        self.address = self.addresses[0] if self.addresses else Address("unknown", 0)
        self._security = security
        self._timeout = timeout
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = itertools.count(1)

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

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
                self._reader, self._writer = await asyncio.open_connection(
                    address.host,
                    address.port,
                    ssl=security.tls if security.protocol.uses_tls else None,
                    server_hostname=address.host if security.protocol.uses_tls else None,
                    limit=STREAM_BUFFER,
                )
                if security.protocol.uses_sasl:
                    await self._login()
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ssl.SSLError) as e:
            self.close()
            raise UpstreamUnavailable(f"upstream {address} unreachable: {e.__class__.__name__}: {e}") from e
        except (ScramError, UpstreamProtocolError) as e:
            self.close()
            raise UpstreamUnavailable(f"upstream {address} refused the proxy's login: {e}") from e

    async def exchange(self, payload: bytes, *, expect_response: bool = True) -> bytes | None:
        """Send one request payload (no length prefix) and return the response payload (None when the request
        has none: a Produce with acks=0). Connects first if needed.

        :raises UpstreamUnavailable: see the module docstring.
        """
        if not self.connected:
            await self.connect()
        assert self._reader is not None and self._writer is not None  # noqa: S101 - connect() set them or raised
        expected = request_correlation_id(payload)
        try:
            async with asyncio.timeout(self._timeout):
                self._writer.writelines((_SIZE.pack(len(payload)), payload))  # no copy of a large request
                await self._writer.drain()
                if not expect_response:
                    return None
                response = await read_frame(self._reader, MAX_RESPONSE_BYTES)
        except (OSError, TimeoutError, asyncio.IncompleteReadError, KafkaguardError) as e:
            self.close()
            raise UpstreamUnavailable(f"upstream {self.address} failed: {e.__class__.__name__}: {e}") from e
        if response is None:
            self.close()
            raise UpstreamUnavailable(f"upstream {self.address} closed the connection")
        if correlation_id_of(response) != expected:
            self.close()
            raise UpstreamProtocolError(
                f"upstream {self.address} answered correlation id {correlation_id_of(response)}, not {expected}"
            )
        return response

    async def relay(self, payload: bytes, client: asyncio.StreamWriter) -> None:
        """Send one request and stream its response to ``client`` as it arrives, in chunks, never holding it whole
        (a Fetch answer can be tens of MiB; nothing in it needs reading). The correlation id is checked before the
        first byte goes out.

        :raises UpstreamUnavailable: the upstream failed before or during the answer (the client's stream may then
            hold part of a response: its connection must close, which the caller does by letting this propagate).
        """
        if not self.connected:
            await self.connect()
        assert self._reader is not None and self._writer is not None  # noqa: S101 - connect() set them or raised
        expected = request_correlation_id(payload)
        try:
            async with asyncio.timeout(self._timeout):
                self._writer.writelines((_SIZE.pack(len(payload)), payload))
                await self._writer.drain()
                head = await self._reader.readexactly(8)  # the frame's size, then the correlation id
                (size,) = _SIZE.unpack_from(head)
                if not 4 <= size <= MAX_RESPONSE_BYTES:
                    raise UpstreamProtocolError(f"upstream {self.address} sent a response frame of {size} bytes")
                if correlation_id_of(head[4:]) != expected:
                    raise UpstreamProtocolError(
                        f"upstream {self.address} answered correlation id {correlation_id_of(head[4:])}, not {expected}"
                    )
                client.write(head)
                remaining = size - 4
                while remaining:
                    chunk = await self._reader.read(min(remaining, RELAY_CHUNK))
                    if not chunk:
                        raise asyncio.IncompleteReadError(b"", remaining)
                    client.write(chunk)
                    remaining -= len(chunk)
                    await client.drain()
        except UpstreamProtocolError:
            self.close()
            raise
        except (OSError, TimeoutError, asyncio.IncompleteReadError, KafkaguardError) as e:
            self.close()
            raise UpstreamUnavailable(f"upstream {self.address} failed: {e.__class__.__name__}: {e}") from e

    async def call(self, api_key: ApiKey, api_version: int, body: Any) -> Any:
        """The proxy's own request (login, version and node discovery), with its own correlation id: decoded."""
        payload = encode_request(api_key, api_version, next(self._correlation), CLIENT_ID, body)
        response = await self.exchange(payload)
        assert response is not None  # noqa: S101 - expect_response is True
        return decode_response(api_key, api_version, response)

    def close(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
        self._reader = self._writer = None

    async def _login(self) -> None:
        """SaslHandshake v1, then SCRAM in SaslAuthenticate v2 frames (KIP-152), as Kafka's Java client logs in."""
        security = self._security
        mechanism_name = security.mechanism.mechanism_name
        handshake = await self.call(
            ApiKey.SASL_HANDSHAKE, 1, build(request_schema(ApiKey.SASL_HANDSHAKE, 1), mechanism=mechanism_name)
        )
        if int(handshake.error_code) != 0:
            raise ScramError(f"the upstream does not offer {mechanism_name} (it offers {list(handshake.mechanisms)})")
        session = ScramClientSession(
            security.mechanism, security.username, security.password, salted_password_cache=security.cache
        )
        server_first = await self._authenticate(session.first_message())
        server_final = await self._authenticate(session.final_message(server_first))
        session.verify_server_final(server_final)

    async def _authenticate(self, token: bytes) -> bytes:
        schema = request_schema(ApiKey.SASL_AUTHENTICATE, 2)
        answer = await self.call(ApiKey.SASL_AUTHENTICATE, 2, build(schema, auth_bytes=token))
        if int(answer.error_code) != 0:
            raise ScramError(f"upstream login failed: {answer.error_message or answer.error_code}")
        return bytes(answer.auth_bytes)
