"""Protocol fuzzing over real sockets against a running server.

Valid requests of every supported API and version (kio's own hypothesis strategies for the generated request
types), their truncations and mutations, and plain random bytes are sent on fresh or reused connections — logged
in as a super user (so every handler runs to the end), not yet authenticated on the SASL listener, and on the
PLAINTEXT listener. Each time the server must answer or close that connection (never hang, never crash), and a
second, well-behaved connection opened at the start keeps being answered throughout. The module's server fixture
fails the module if the server logged an error (a handler exception reaching the accept loop is one).
"""

from __future__ import annotations

import dataclasses
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.static.primitive import i8, i32

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.config import SecurityProtocol
from kafkaguard.protocol.framing import DEFAULT_MAX_FRAME_BYTES, UNAUTHENTICATED_MAX_FRAME_BYTES
from kafkaguard.protocol.prelogin import HANDSHAKE_FRAME_BYTES
from kafkaguard.server.versions import SERVER_VERSIONS
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle
from tests.wire import Wire, encode_request

pytestmark = pytest.mark.integration

#: How long the server may take to answer or close; far above what it needs, far below a hang.
ANSWER_TIMEOUT = 5.0
FUZZ = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)

API_VERSIONS = [(int(key), version) for key, (low, high) in SERVER_VERSIONS.items() for version in range(low, high + 1)]


def describe_everything() -> DescribeAclsRequest:
    return DescribeAclsRequest(
        resource_type_filter=i8(1),
        resource_name_filter=None,
        pattern_type_filter=i8(1),
        principal_filter=None,
        host_filter=None,
        operation=i8(1),
        permission_type=i8(1),
    )


def tame(body: Any) -> Any:
    """Keep generated CreateTopics requests to a few partitions: the catalog has no partition limit, and a topic
    with a billion partitions makes every later Metadata answer enormous (reported; not what this test is about)."""
    topics = getattr(body, "topics", None)
    if type(body).__api_key__ != ApiKey.CREATE_TOPICS.value or not topics:
        return body
    small = tuple(dataclasses.replace(t, num_partitions=i32(int(t.num_partitions) % 4)) for t in topics)
    return dataclasses.replace(body, topics=small)


@st.composite
def valid_requests(draw: st.DrawFn) -> bytes:
    """A request payload (header + body, no length prefix) of any supported API and version."""
    api_key, version = draw(st.sampled_from(API_VERSIONS))
    body = tame(draw(st.from_type(load_request_schema(api_key, version))))
    correlation_id = draw(st.integers(0, 2**31 - 1))
    client_id = draw(st.none() | st.text(max_size=20))
    return encode_request(body, correlation_id, client_id)


@st.composite
def mutated_requests(draw: st.DrawFn) -> bytes:
    """A valid request payload, truncated, with bytes flipped, inserted or deleted."""
    data = bytearray(draw(valid_requests()))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["truncate", "flip", "insert", "delete", "set"]))
        position = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "truncate":
            del data[position:]
        elif kind == "flip" and data:
            data[position] ^= 1 << draw(st.integers(0, 7))
        elif kind == "insert":
            data[position:position] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete" and data:
            del data[position : position + draw(st.integers(1, 8))]
        elif kind == "set" and data:
            data[position] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
    return bytes(data)


class Connections:
    """Connections for examples: a logged-in one is reused until the server closes it."""

    def __init__(self, server: ServerHandle) -> None:
        self.server = server
        self._logged_in: Wire | None = None

    def open(self, kind: str) -> Wire:
        if kind == "authenticated":
            if self._logged_in is None:
                self._logged_in = Wire(self.server.sasl, timeout=ANSWER_TIMEOUT)
                self._logged_in.login(ADMIN, ADMIN_PASSWORD)
            return self._logged_in
        address = self.server.sasl if kind == "unauthenticated" else self.server.plaintext
        return Wire(address, timeout=ANSWER_TIMEOUT)

    def done(self, wire: Wire, *, still_open: bool) -> None:
        if wire is self._logged_in and still_open:
            return
        if wire is self._logged_in:
            self._logged_in = None
        wire.close()

    def close(self) -> None:
        if self._logged_in is not None:
            self._logged_in.close()
            self._logged_in = None


@pytest.fixture(scope="module")
def canary(server: ServerHandle) -> Iterator[Wire]:
    """The well-behaved connection: opened once, asked after every example."""
    wire = Wire(server.sasl, timeout=ANSWER_TIMEOUT)
    wire.login(ADMIN, ADMIN_PASSWORD)
    yield wire
    wire.close()


@pytest.fixture
def connections(server: ServerHandle) -> Iterator[Connections]:
    pool = Connections(server)
    yield pool
    pool.close()
    wait_for_connections(server, at_most=1)  # only the canary: every fuzzed connection was closed and reaped


def wait_for_connections(server: ServerHandle, at_most: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while len(server.server._connections) > at_most:
        assert time.monotonic() < deadline, f"{len(server.server._connections)} connections still open"
        time.sleep(0.01)  # polling the server's own count, bounded by the deadline


def still_served(canary: Wire, server: ServerHandle) -> None:
    """The well-behaved connection is answered, and the server has logged no error (a handler exception)."""
    assert canary.request(describe_everything()).error_code.value == 0
    assert server.errors == []


def send_frame_and_expect_answer_or_close(connections: Connections, kind: str, payload: bytes) -> bytes | None:
    """Send one framed payload; the answer (or None when the server closed the connection). A hang fails."""
    wire = connections.open(kind)
    try:
        wire.send_frame(payload)
        answer = wire.recv_frame()
    except (BrokenPipeError, ConnectionResetError):
        answer = None
    except TimeoutError:
        connections.done(wire, still_open=False)
        pytest.fail(f"no answer and no close within {ANSWER_TIMEOUT} s on a {kind} connection")
    connections.done(wire, still_open=answer is not None)
    return answer


KINDS = st.sampled_from(["authenticated", "unauthenticated", "plaintext"])


@FUZZ
@given(payload=valid_requests(), kind=KINDS)
def test_valid_requests_of_every_api_are_answered_or_closed(server, canary, connections, payload, kind):
    answer = send_frame_and_expect_answer_or_close(connections, kind, payload)
    api_key, version = struct.unpack_from(">hh", payload)
    event(f"{kind} {ApiKey(api_key).api_name} v{version}: {'answered' if answer else 'closed'}")
    if answer is not None:
        assert answer[:4] == payload[4:8]  # the response carries the request's correlation id
    still_served(canary, server)


@FUZZ
@given(payload=mutated_requests(), kind=KINDS)
def test_mutated_requests_never_hurt_the_server(server, canary, connections, payload, kind):
    send_frame_and_expect_answer_or_close(connections, kind, payload)
    still_served(canary, server)


@FUZZ
@given(data=st.binary(max_size=300), kind=KINDS)
def test_random_bytes_then_end_of_stream_close_the_connection(server, canary, connections, data, kind):
    """Unframed bytes: the server may wait for the rest of a frame, but at end of stream it must close."""
    wire = connections.open(kind)
    if wire is connections._logged_in:
        connections._logged_in = None  # this connection ends with the example
    try:
        wire.send_raw(data)
        wire.sock.shutdown(socket.SHUT_WR)
        while wire.recv_frame() is not None:  # answers to whatever complete frames the bytes held
            pass
    except (BrokenPipeError, ConnectionResetError):
        pass
    except TimeoutError:
        pytest.fail("the server kept a half-closed connection open")
    finally:
        wire.close()
    still_served(canary, server)


# ------------------------------------------------------------------------------------------------ frame limits


def closes_after_length_prefix(wire: Wire, size: int) -> bool:
    """Send only a length prefix: True if the server closes without waiting for (or buffering) the body."""
    wire.send_raw(struct.pack(">i", size))
    return wire.recv_frame() is None


def padded(body: Any, size: int, correlation_id: int = 1) -> bytes:
    """A request payload of exactly ``size`` bytes: trailing bytes after a request body are ignored."""
    payload = encode_request(body, correlation_id)
    return payload + b"\x00" * (size - len(payload))


def test_oversized_or_negative_length_prefix_closes_without_buffering(server: ServerHandle, canary: Wire):
    for size in (DEFAULT_MAX_FRAME_BYTES + 1, 2**31 - 1, -1, -(2**31)):
        with Wire(server.sasl, timeout=ANSWER_TIMEOUT) as wire:
            wire.login(ADMIN, ADMIN_PASSWORD)
            started = time.monotonic()
            assert closes_after_length_prefix(wire, size), size
            assert time.monotonic() - started < 1.0
        still_served(canary, server)


def test_frames_above_their_api_limit_are_refused_before_authentication(server: ServerHandle, canary: Wire):
    """Before login a frame may be as large as its API needs (``server.prelogin``): ApiVersions 1 KiB, a SASL token
    16 KiB; one byte more closes the connection after the size and the API key, the rest never read."""
    with Wire(server.sasl, timeout=ANSWER_TIMEOUT) as wire:
        assert closes_after_length_prefix(wire, UNAUTHENTICATED_MAX_FRAME_BYTES + 1)
    hello = ApiVersionsRequest(client_software_name="big", client_software_version="1")
    # At its limit, ApiVersions is answered before authentication...
    with Wire(server.sasl, timeout=ANSWER_TIMEOUT) as wire:
        wire.send_frame(padded(hello, HANDSHAKE_FRAME_BYTES))
        answer = wire.recv_frame()
        assert answer is not None
        assert answer[:4] == struct.pack(">i", 1)
    # ...one byte above it, the connection is closed once the API key is read; the body is never sent.
    with Wire(server.sasl, timeout=ANSWER_TIMEOUT) as wire:
        wire.send_raw(struct.pack(">ih", HANDSHAKE_FRAME_BYTES + 1, int(ApiKey.API_VERSIONS)))
        assert wire.recv_frame() is None
    # A SASL token frame may be larger: read whole at the token limit (then refused: no handshake came first)...
    token = SaslAuthenticateRequest(auth_bytes=b"n,,n=user,r=nonce")
    with Wire(server.sasl, timeout=ANSWER_TIMEOUT) as wire:
        wire.send_frame(padded(token, UNAUTHENTICATED_MAX_FRAME_BYTES, correlation_id=5))
        answer = wire.recv_frame()
        assert answer is not None
        assert answer[:4] == struct.pack(">i", 5)
    # ...but not above it.
    with Wire(server.sasl, timeout=ANSWER_TIMEOUT) as wire:
        wire.send_raw(struct.pack(">ih", UNAUTHENTICATED_MAX_FRAME_BYTES + 1, int(ApiKey.SASL_AUTHENTICATE)))
        assert wire.recv_frame() is None
    # ...and after it, a bigger frame is read as usual (the 100 MiB limit applies).
    with Wire(server.sasl, timeout=ANSWER_TIMEOUT) as wire:
        wire.login(ADMIN, ADMIN_PASSWORD)
        wire.send_frame(padded(describe_everything(), 2 * UNAUTHENTICATED_MAX_FRAME_BYTES, correlation_id=9))
        answer = wire.recv_frame()
        assert answer is not None
        assert answer[:4] == struct.pack(">i", 9)
    # The PLAINTEXT listener authenticates nobody, so it has the normal limit from the start.
    with Wire(server.address(SecurityProtocol.PLAINTEXT), timeout=ANSWER_TIMEOUT) as wire:
        wire.send_frame(padded(describe_everything(), UNAUTHENTICATED_MAX_FRAME_BYTES + 1, correlation_id=3))
        answer = wire.recv_frame()
        assert answer is not None
    still_served(canary, server)
