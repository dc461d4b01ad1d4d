"""A raw Kafka-protocol client for tests: kio-encoded requests over a plain (or TLS) socket, SCRAM via scramp.

It sends exactly the bytes a test asks for, so it reaches what real clients never send: requests before
authentication, unsupported versions, truncated and mutated frames.
"""

from __future__ import annotations

import io
import socket
import ssl
import struct
from typing import Any

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


def decode_response(payload: bytes, api_key: int, api_version: int) -> tuple[int, Any]:
    """(correlation id, response body); ApiVersions always uses response header v0."""
    schema: Any = load_response_schema(api_key, api_version)
    header_cls: Any = ResponseHeaderV1 if schema.__flexible__ and api_key != API_VERSIONS_KEY else ResponseHeaderV0
    header, offset = entity_reader(header_cls)(payload, 0)
    body, _size = entity_reader(schema)(payload, offset)
    return int(header.correlation_id), body


def decode_api_versions_v0(payload: bytes) -> tuple[int, Any]:
    header, offset = entity_reader(ResponseHeaderV0)(payload, 0)
    body, _size = entity_reader(ApiVersionsResponseV0)(payload, offset)
    return int(header.correlation_id), body


class Wire:
    """One connection. ``request`` sends a kio request body and decodes the answer; ``closed`` waits for EOF."""

    def __init__(self, address: tuple[str, int], *, tls: ssl.SSLContext | None = None, timeout: float = 5.0) -> None:
        raw = socket.create_connection(address, timeout=timeout)
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
        """SaslHandshake v1 + SaslAuthenticate v2 with SCRAM; raises AssertionError on failure."""
        handshake = self.request(SaslHandshakeRequest(mechanism=mechanism))
        assert handshake.error_code.value == 0, handshake
        client = scramp.ScramClient([mechanism], user, password)
        first = self.request(SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode()))
        assert first.error_code.value == 0, first
        client.set_server_first(bytes(first.auth_bytes).decode())
        final = self.request(SaslAuthenticateRequest(auth_bytes=client.get_client_final().encode()))
        assert final.error_code.value == 0, final
        client.set_server_final(bytes(final.auth_bytes).decode())


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
