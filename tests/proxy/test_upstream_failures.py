"""``kafkaguard_upstream_failures_total{reason}``: each way an upstream connection fails is counted once, under its
reason, against real sockets (a closed port, a listener that never answers, one that hangs up, one that sends a
bad frame, a plaintext one dialled with TLS) and a real ``kafkaguard serve`` refusing the proxy's password."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import ssl
import struct
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName

from kafkaguard.audit.records.upstream_failures import UpstreamFailure, UpstreamFailures
from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.console.metrics import ConsoleMetrics
from kafkaguard.protocol.build import build_request
from kafkaguard.protocol.codec import request_schema
from kafkaguard.proxy.upstream import (
    Address,
    ScramLogin,
    UpstreamConnection,
    UpstreamProtocol,
    UpstreamSecurity,
    UpstreamUnavailable,
)
from kafkaguard.proxy.wire import UpstreamProtocolError, encode_request
from kafkaguard.scram import ScramMechanism
from tests.proxy.fake_kafka import FakeKafka, fake_kafka, start_proxy
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle, sasl_server
from tests.wire import Wire

PLAINTEXT = UpstreamSecurity(UpstreamProtocol.PLAINTEXT)
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


HELLO = build_request(request_schema(ApiKey.API_VERSIONS, 3), client_software_name="t", client_software_version="1")


async def ask(address: Address, security: UpstreamSecurity, failures: UpstreamFailures, timeout: float = 5) -> str:
    """One ApiVersions on a new upstream connection; the failure's message (it must fail). A failed dial leaves the
    connection to dial again (and be counted again); a connection that failed in use stays failed, counted once."""
    connection = UpstreamConnection([address], security, timeout=timeout, failures=failures)
    try:
        with pytest.raises((UpstreamUnavailable, UpstreamProtocolError)) as failed:
            await connection.call(ApiKey.API_VERSIONS, 3, HELLO)
        if connection.failed:
            before = dict(failures.counts())
            with pytest.raises(UpstreamUnavailable):
                await connection.call(ApiKey.API_VERSIONS, 3, HELLO)
            assert failures.counts() == before
    finally:
        connection.close()
    return str(failed.value)


async def against(handler: Handler, security: UpstreamSecurity, failures: UpstreamFailures, timeout: float) -> str:
    """``ask`` an upstream whose connections ``handler`` serves; the handlers end when the connection closes."""
    handlers: list[asyncio.Task[None]] = []

    async def tracked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handlers.append(asyncio.current_task())  # type: ignore[arg-type]  # a handler runs in a task
        try:
            await handler(reader, writer)
            await reader.read()  # until the proxy's side closes
        except OSError:
            pass  # the proxy hung up first
        finally:
            writer.close()

    server = await asyncio.start_server(tracked, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        return await ask(Address("127.0.0.1", port), security, failures, timeout)
    finally:
        server.close()
        await asyncio.wait_for(asyncio.gather(*handlers), 10)


def nonzero(failures: UpstreamFailures) -> dict[str, int]:
    return {reason.value: count for reason, count in failures.counts().items() if count}


def test_every_reason_is_listed_from_the_start_at_zero() -> None:
    assert UpstreamFailures().counts() == dict.fromkeys(UpstreamFailure, 0)


def test_a_closed_port_is_unreachable() -> None:
    failures = UpstreamFailures()
    asyncio.run(ask(Address("127.0.0.1", closed_port()), PLAINTEXT, failures))
    assert nonzero(failures) == {"unreachable": 1}
    asyncio.run(ask(Address("127.0.0.1", closed_port()), PLAINTEXT, failures))
    assert nonzero(failures) == {"unreachable": 2}  # each dial that fails


def test_each_address_tried_that_does_not_answer_is_counted() -> None:
    failures = UpstreamFailures()
    addresses = [Address("127.0.0.1", closed_port()), Address("127.0.0.1", closed_port())]

    async def run() -> None:
        connection = UpstreamConnection(addresses, PLAINTEXT, timeout=5, failures=failures)
        with pytest.raises(UpstreamUnavailable):
            await connection.connect()

    asyncio.run(run())
    assert nonzero(failures) == {"unreachable": 2}


def test_an_upstream_that_never_answers_is_a_timeout() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        pass  # reads the request, answers nothing, until the proxy gives up

    failures = UpstreamFailures()
    message = asyncio.run(against(silent, PLAINTEXT, failures, timeout=0.3))
    assert "TimeoutError" in message
    assert nonzero(failures) == {"timeout": 1}


def test_an_upstream_that_hangs_up_on_a_request_is_closed() -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(4)
        writer.transport.abort()  # a reset in the middle of the request

    failures = UpstreamFailures()
    asyncio.run(against(hang_up, PLAINTEXT, failures, timeout=5))
    assert nonzero(failures) == {"closed": 1}


def test_an_oversized_answer_frame_is_a_protocol_failure() -> None:
    async def oversized(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        await reader.readexactly(size)
        writer.write(struct.pack(">i", 2**31 - 1))  # a frame far over MAX_RESPONSE_BYTES
        await writer.drain()

    failures = UpstreamFailures()
    message = asyncio.run(against(oversized, PLAINTEXT, failures, timeout=5))
    assert "response frame of" in message
    assert nonzero(failures) == {"protocol": 1}


def test_tls_to_a_plaintext_listener_is_a_tls_failure() -> None:
    async def plaintext(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        writer.write(b"HTTP/1.1 400 Bad Request\r\n\r\n" * 4)  # not a TLS record
        await writer.drain()

    failures = UpstreamFailures()
    tls = UpstreamSecurity(UpstreamProtocol.SSL, tls=ssl.create_default_context())
    asyncio.run(against(plaintext, tls, failures, timeout=5))
    assert nonzero(failures) == {"tls": 1}


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[ServerHandle]:
    """A real kafkaguard server with a SASL_PLAINTEXT listener, as the proxy's upstream (it must log no error)."""
    with sasl_server(tmp_path) as handle:
        yield handle


def test_a_refused_service_password_is_a_login_failure_and_is_exported(upstream: ServerHandle) -> None:
    failures = UpstreamFailures()
    security = UpstreamSecurity(
        UpstreamProtocol.SASL_PLAINTEXT, ScramLogin(ScramMechanism.SCRAM_SHA_256, ADMIN, "not-the-password")
    )
    message = asyncio.run(ask(Address(*upstream.sasl), security, failures))
    assert "refused the proxy's login" in message
    assert nonzero(failures) == {"login": 1}
    text = ConsoleMetrics(lambda: 0, upstream_failures=failures).render().decode()
    assert 'kafkaguard_upstream_failures_total{reason="login"} 1.0' in text
    assert 'kafkaguard_upstream_failures_total{reason="timeout"} 0.0' in text
    assert "not-the-password" not in text


def test_the_proxy_counts_a_client_connections_failed_upstream_in_its_services(tmp_path: Path) -> None:
    with fake_kafka(FakeKafka()) as broker:
        proxy = start_proxy(tmp_path / "data", broker.address)
    try:  # the broker has gone: a client's first forwarded request finds no upstream
        failures = proxy.services.upstream_failures
        before = failures.counts()[UpstreamFailure.UNREACHABLE]
        with Wire(proxy.sasl, timeout=10) as wire:
            wire.login(ADMIN, ADMIN_PASSWORD)
            topics = (MetadataRequestTopic(name=TopicName("t"), topic_id=None),)
            with pytest.raises(AssertionError, match="closed the connection"):
                wire.request(MetadataRequest(topics=topics, allow_auto_topic_creation=False,
                                             include_topic_authorized_operations=False))  # fmt: skip
        assert failures.counts()[UpstreamFailure.UNREACHABLE] > before
        text = ConsoleMetrics(lambda: 0, upstream_failures=failures).render().decode()
        assert re.search(r'kafkaguard_upstream_failures_total\{reason="unreachable"\} [1-9]', text)
    finally:
        proxy.stop()


@pytest.mark.parametrize("answer_bytes", [4 * 1024 * 1024, 32 * 1024], ids=["spliced", "copied"])
def test_a_client_that_goes_away_mid_answer_is_not_an_upstream_failure(answer_bytes: int) -> None:
    """A client resets while its answer is passed on (spliced into its socket, or copied): the upstream connection
    is done, its error names the client, and nothing is counted against the upstream. Before, the client's reset
    was counted and logged as the upstream's failure ("upstream … failed: ConnectionResetError")."""
    body = bytes(answer_bytes)
    request = encode_request(ApiKey.API_VERSIONS, 3, 41, "t", HELLO)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        asked = await reader.readexactly(size)
        writer.write(struct.pack(">i", 4 + len(body)) + asked[4:8] + body)  # the request's correlation id
        try:
            with contextlib.suppress(OSError):
                await writer.drain()
                await reader.read()
        finally:
            writer.close()

    async def scenario() -> tuple[str, dict[str, int]]:
        failures = UpstreamFailures()
        upstream = await asyncio.start_server(answer, "127.0.0.1", 0)
        listener = socket.create_server(("127.0.0.1", 0))
        listener.setblocking(False)
        try:
            _reader, client = await asyncio.open_connection(*listener.getsockname()[:2])
            far_end, _ = await asyncio.get_running_loop().sock_accept(listener)
            far_end.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            far_end.close()  # a reset: the client is gone before its answer arrives
            await asyncio.sleep(0.05)
            connection = UpstreamConnection(
                [Address("127.0.0.1", upstream.sockets[0].getsockname()[1])], PLAINTEXT, timeout=5, failures=failures
            )
            try:
                await connection.send(request)
                with pytest.raises(UpstreamUnavailable) as failed:
                    for _ in range(3):  # a first write into a reset socket may still be taken by the kernel
                        await connection.pass_answer_on(41, client)
                        await connection.send(request)
                assert connection.failed
            finally:
                connection.close()
                client.close()
            return str(failed.value), nonzero(failures)
        finally:
            listener.close()
            upstream.close()

    message, counted = asyncio.run(scenario())
    assert "the client went away" in message
    assert counted == {}
