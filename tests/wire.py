"""The client side of the Kafka wire, for the tests and the benchmarks (one codec, one SCRAM exchange).

* ``encode_request``/``frame``/``decode_response``: kio-encoded requests (the header the request's schema names) and
  responses (header v0 for ApiVersions and non-flexible versions, else v1), schemas and kio readers looked up once;
* ``scram_exchange``: SaslHandshake v1 + SaslAuthenticate v2 × 2 as a generator, free of I/O (it yields each request
  body and is sent each response, as aiokafka's SASL automata), driven by ``Wire.login`` here and by the
  benchmarks' asyncio connections;
* ``Wire``: a raw blocking client over a plain (or TLS) socket. It sends exactly the bytes a test asks for, so it
  reaches what real clients never send: requests before authentication, unsupported versions, truncated and mutated
  frames.

``benchmarks/`` imports this module (``tests`` is a package beside it; both run from the repository root).
"""

from __future__ import annotations

import io
import socket
import ssl
import struct
from collections.abc import Generator
from typing import Any, Protocol

import scramp  # type: ignore[import-untyped]
from kio.index import load_response_schema
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i16, i32

API_VERSIONS_KEY = 18
_SIZE = struct.Struct(">i")
_RESPONSE_SCHEMAS: dict[tuple[int, int], Any] = {}

# ------------------------------------------------------------------------------------------------------ codec


def encode_request(body: Any, correlation_id: int, client_id: str | None = "wire-test") -> bytes:
    """The request's payload (no length prefix): the header its schema names, then the body."""
    header_cls = type(body).__header_schema__
    header = header_cls(
        request_api_key=i16(type(body).__api_key__),
        request_api_version=i16(type(body).__version__),
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    buffer = io.BytesIO()
    entity_writer(header_cls)(buffer, header)
    entity_writer(type(body))(buffer, body)
    return buffer.getvalue()


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload


def response_schema(api_key: int, api_version: int) -> Any:
    """kio's response class (looked up once: kio resolves it by import path on every call)."""
    schema = _RESPONSE_SCHEMAS.get((api_key, api_version))
    if schema is None:
        schema = _RESPONSE_SCHEMAS[(api_key, api_version)] = load_response_schema(api_key, api_version)
    return schema


def decode_response(payload: bytes, api_key: int, api_version: int) -> tuple[int, Any]:
    """(correlation id, response body) of a response payload (no length prefix); ApiVersions always uses response
    header v0."""
    schema = response_schema(api_key, api_version)
    header_cls: Any = ResponseHeaderV1 if schema.__flexible__ and api_key != API_VERSIONS_KEY else ResponseHeaderV0
    header, offset = entity_reader(header_cls)(payload, 0)
    body, _size = entity_reader(schema)(payload, offset)
    return int(header.correlation_id), body


def decode_api_versions_v0(payload: bytes) -> tuple[int, Any]:
    header, offset = entity_reader(ResponseHeaderV0)(payload, 0)
    body, _size = entity_reader(ApiVersionsResponseV0)(payload, offset)
    return int(header.correlation_id), body


# ------------------------------------------------------------------------------------------------------ SCRAM


class ScramClientSteps(Protocol):
    """The four steps of an RFC 5802 client, as ``scramp.ScramClient`` names them."""

    def get_client_first(self) -> str: ...

    def set_server_first(self, message: str) -> None: ...

    def get_client_final(self) -> str: ...

    def set_server_final(self, message: str) -> None: ...


def scram_exchange(client: ScramClientSteps, mechanism: str) -> Generator[Any, Any, None]:
    """SaslHandshake v1 + SaslAuthenticate v2 × 2 carrying ``client``'s messages: yields each request body, is sent
    each response. Raises AssertionError if the server refuses a step (or ``client`` the server's proof)."""
    handshake = yield SaslHandshakeRequest(mechanism=mechanism)
    _expect_no_error(handshake, "SaslHandshake")
    first = yield SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode())
    _expect_no_error(first, "SCRAM client-first")
    client.set_server_first(bytes(first.auth_bytes).decode())
    final = yield SaslAuthenticateRequest(auth_bytes=client.get_client_final().encode())
    _expect_no_error(final, "SCRAM client-final")
    client.set_server_final(bytes(final.auth_bytes).decode())


def scramp_exchange(user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> Generator[Any, Any, None]:
    """``scram_exchange`` with scramp's client (an implementation independent of kafkaguard's)."""
    return scram_exchange(scramp.ScramClient([mechanism], user, password), mechanism)


def _expect_no_error(response: Any, what: str) -> None:
    if response.error_code != 0:
        raise AssertionError(f"{what} failed: {response.error_code!r} {getattr(response, 'error_message', '')}")


# ------------------------------------------------------------------------------------------------ the client


class Wire:
    """One connection. ``request`` sends a kio request body and decodes the answer; ``closed`` waits for EOF."""

    def __init__(
        self,
        address: tuple[str, int],
        *,
        tls: ssl.SSLContext | None = None,
        timeout: float = 5.0,
        source: str | None = None,
    ) -> None:
        """Connect to ``address``, from the local address ``source`` when given (127.0.0.2 … are loopback too)."""
        raw = socket.create_connection(address, timeout=timeout, source_address=(source, 0) if source else None)
        self.sock: socket.socket = tls.wrap_socket(raw, server_hostname=address[0]) if tls is not None else raw
        self.sock.settimeout(timeout)
        self._correlation = 0

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def next_correlation_id(self) -> int:
        self._correlation += 1
        return self._correlation

    @property
    def last_correlation_id(self) -> int:
        """The correlation id of the last request sent (0 before the first)."""
        return self._correlation

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(frame(payload))

    def _read_exactly(self, size: int) -> bytes | None:
        chunks: list[bytes] = []
        remaining = size
        while remaining:
            chunk = self.sock.recv(min(remaining, 1 << 16))
            if not chunk:
                return None
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def recv_frame(self) -> bytes | None:
        """The next response payload, or None when the server closed the connection."""
        try:
            head = self._read_exactly(4)
        except ConnectionResetError:
            return None
        if head is None:
            return None
        (size,) = _SIZE.unpack(head)
        return self._read_exactly(size)

    def request(self, body: Any, client_id: str | None = "wire-test") -> Any:
        """Send ``body`` and return the decoded response; fails if the server closes instead."""
        correlation_id = self.next_correlation_id()
        self.send_frame(encode_request(body, correlation_id, client_id))
        payload = self.recv_frame()
        assert payload is not None, f"the server closed the connection instead of answering {type(body).__name__}"
        got, response = decode_response(payload, type(body).__api_key__, type(body).__version__)
        assert got == correlation_id
        return response

    def closed(self) -> bool:
        """True when the server has closed the connection (EOF or reset) before the timeout, without a reply."""
        try:
            data = self.sock.recv(1)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except (TimeoutError, ssl.SSLError):
            return False
        return data == b""

    def login(self, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> None:
        """SaslHandshake v1 + SaslAuthenticate v2 with scramp's SCRAM client; raises AssertionError on failure."""
        exchange = scramp_exchange(user, password, mechanism)
        try:
            body = next(exchange)
            while True:
                body = exchange.send(self.request(body))
        except StopIteration:
            return


# --------------------------------------------------------------------------------------------------- shortcuts

AUTO_CREATE = 15  # kafkaguard's AclOperation code for KIP-755 (SEMANTICS.md §16.1); no Python client knows it


def create_acl(
    wire: Wire,
    *,
    resource_type: int,
    name: str,
    pattern_type: int,
    principal: str,
    operation: int,
    permission: int = 3,
    host: str = "*",
) -> int:
    """CreateAcls v3 with one binding (codes as on the wire: TOPIC 2, CLUSTER 4; LITERAL 3, PREFIXED 4;
    ALLOW 3, DENY 2); returns its error code."""
    creation = AclCreation(
        resource_type=i8(resource_type),
        resource_name=name,
        resource_pattern_type=i8(pattern_type),
        principal=principal,
        host=host,
        operation=i8(operation),
        permission_type=i8(permission),
    )
    response = wire.request(CreateAclsRequest(creations=(creation,)))
    (result,) = response.results
    return int(result.error_code.value)


def metadata(wire: Wire, topics: list[str] | None, *, allow_auto_topic_creation: bool = True) -> Any:
    """Metadata v12 for ``topics`` (None: all topics)."""
    wanted = (
        None if topics is None else tuple(MetadataRequestTopic(topic_id=None, name=TopicName(name)) for name in topics)
    )
    return wire.request(
        MetadataRequest(
            topics=wanted,
            allow_auto_topic_creation=allow_auto_topic_creation,
            include_topic_authorized_operations=False,
        )
    )
