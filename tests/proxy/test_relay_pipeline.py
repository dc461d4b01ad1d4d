"""The proxy's relay path on real loopback sockets: an upstream connection sends, the client connection's outbox
passes the answers on in request order, byte for byte, by splice (large answers to a plain client socket) and by
copy (small ones, or a writer that is not a socket), at most MAX_QUEUED_ANSWERS queued, ``exchange`` after the
relays, and failures that end the connection without a hang.

The upstream is a small fake broker: it answers each request frame with its correlation id and a body of the size
the request asks for (the request's last 4 bytes), after a delay the test controls.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest

from kafkaguard.protocol.connection import MAX_QUEUED_ANSWERS
from kafkaguard.protocol.outbox import Outbox, OutboxClosed
from kafkaguard.protocol.replies import ClientWriter
from kafkaguard.proxy import links, splice
from kafkaguard.proxy.relay import AnswerRelay
from kafkaguard.proxy.upstream import (
    Address,
    UpstreamConnection,
    UpstreamProtocol,
    UpstreamSecurity,
    UpstreamUnavailable,
)

_I32 = struct.Struct(">i")
PLAIN = UpstreamSecurity(UpstreamProtocol.PLAINTEXT)


def request(correlation_id: int, answer_size: int) -> bytes:
    """A Fetch v4 request header (client id "t") whose body asks the fake broker for ``answer_size`` body bytes."""
    return struct.pack(">hhih", 1, 4, correlation_id, 1) + b"t" + _I32.pack(answer_size)


def body_of(correlation_id: int, size: int) -> bytes:
    return bytes((correlation_id + i) % 251 for i in range(size))


@dataclass
class FakeBroker:
    port: int = 0
    received: int = 0
    answered: int = 0
    delay: float = 0.0
    wrong_id: bool = False
    cut_after: int | None = None  # close mid-answer after this many body bytes of the first answer
    outstanding_seen: list[int] = field(default_factory=list)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = _I32.unpack(await reader.readexactly(4))[0]
                payload = await reader.readexactly(size)
                self.received += 1
                await asyncio.sleep(self.delay)
                (correlation_id,) = _I32.unpack_from(payload, 4)
                (wanted,) = _I32.unpack_from(payload, len(payload) - 4)
                body = body_of(correlation_id, wanted)
                answered_id = correlation_id + 1 if self.wrong_id else correlation_id
                frame = _I32.pack(4 + len(body)) + _I32.pack(answered_id) + body
                if self.cut_after is not None:
                    writer.write(frame[: 8 + self.cut_after])
                    await writer.drain()
                    writer.close()
                    return
                writer.write(frame)
                await writer.drain()
                self.answered += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def fake_broker(broker: FakeBroker) -> AsyncIterator[FakeBroker]:
    server = await asyncio.start_server(broker.serve, "127.0.0.1", 0)
    broker.port = server.sockets[0].getsockname()[1]
    async with server:
        yield broker


@asynccontextmanager
async def client_pair() -> AsyncIterator[tuple[asyncio.StreamWriter, asyncio.StreamReader]]:
    """The proxy's side of a client connection (a real StreamWriter on a TCP socket) and the client's reader."""
    accepted: asyncio.Future[asyncio.StreamWriter] = asyncio.get_running_loop().create_future()

    async def on_connect(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set_result(writer)

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        client_reader, client_writer = await asyncio.open_connection("127.0.0.1", port, limit=8 * 1024 * 1024)
        proxy_side = await accepted
        try:
            yield proxy_side, client_reader
        finally:
            proxy_side.close()
            client_writer.close()


async def read_answer(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    size = _I32.unpack(await reader.readexactly(4))[0]
    payload = await reader.readexactly(size)
    return _I32.unpack_from(payload)[0], payload[4:]


class Collecting:
    """A writer that is not a socket (as a quota's metering writer): the relay must copy into it."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        await asyncio.sleep(0)


SIZES = [100, 3 * 1024 * 1024, 10, 200_000, 0, 70_000, 1, 2 * 1024 * 1024, 5, links.SPLICE_FROM + 1]


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 60))


class Closing:
    """What the outbox calls to close the client's socket, counted."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1


def outbox_for(writer: ClientWriter, closing: Callable[[], None] = lambda: None) -> Outbox:
    return Outbox(writer, limit=MAX_QUEUED_ANSWERS, close=closing, peer="test")


async def relay(upstream: UpstreamConnection, outbox: Outbox, payload: bytes) -> None:
    """As ``ProxyScope.relay`` and the connection do it: send, then queue the answer's passing on."""
    await upstream.send(payload)
    correlation_id = _I32.unpack_from(payload, 4)[0]
    outbox.relay(AnswerRelay(upstream, correlation_id))


def test_relayed_answers_arrive_whole_and_in_request_order_through_a_socket() -> None:
    async def scenario() -> None:
        async with fake_broker(FakeBroker()) as broker, client_pair() as (proxy_side, client):
            upstream = UpstreamConnection([Address("127.0.0.1", broker.port)], PLAIN, timeout=10)
            outbox = outbox_for(proxy_side)
            try:
                for i, size in enumerate(SIZES):
                    await outbox.room()
                    await relay(upstream, outbox, request(i + 1, size))
                for i, size in enumerate(SIZES):
                    correlation_id, body = await read_answer(client)
                    assert correlation_id == i + 1
                    assert body == body_of(i + 1, size)
                await outbox.flushed()
            finally:
                await outbox.stop()
                upstream.close()

    run(scenario)


def test_relayed_answers_are_copied_into_a_writer_that_is_not_a_socket() -> None:
    async def scenario() -> None:
        async with fake_broker(FakeBroker()) as broker:
            upstream = UpstreamConnection([Address("127.0.0.1", broker.port)], PLAIN, timeout=10)
            writer = Collecting()
            outbox = outbox_for(writer)
            try:
                for i, size in enumerate(SIZES):
                    await outbox.room()
                    await relay(upstream, outbox, request(i + 1, size))
                await outbox.flushed()
            finally:
                await outbox.stop()
                upstream.close()
            expected = b"".join(
                _I32.pack(4 + size) + _I32.pack(i + 1) + body_of(i + 1, size) for i, size in enumerate(SIZES)
            )
            assert bytes(writer.data) == expected

    run(scenario)


def test_relay_returns_before_the_answer_and_at_most_max_queued_answers_wait() -> None:
    async def scenario() -> None:
        async with fake_broker(FakeBroker(delay=0.2)) as broker:
            upstream = UpstreamConnection([Address("127.0.0.1", broker.port)], PLAIN, timeout=10)
            writer = Collecting()
            outbox = outbox_for(writer)
            try:
                for i in range(MAX_QUEUED_ANSWERS):
                    await asyncio.wait_for(outbox.room(), 0.15)  # none waits 0.2 s
                    await asyncio.wait_for(relay(upstream, outbox, request(i + 1, 10)), 0.15)
                assert writer.data == b""  # nothing answered yet: every relay returned before its answer
                blocked = asyncio.create_task(outbox.room())
                await asyncio.sleep(0.05)
                assert not blocked.done()  # the connection reads no more requests until one answer is out
                await asyncio.wait_for(blocked, 5)
                await relay(upstream, outbox, request(MAX_QUEUED_ANSWERS + 1, 10))
                await outbox.flushed()
                assert len(writer.data) == (MAX_QUEUED_ANSWERS + 1) * (8 + 10)
            finally:
                await outbox.stop()
                upstream.close()

    run(scenario)


def test_an_answer_made_after_relays_goes_out_after_them() -> None:
    async def scenario() -> None:
        async with fake_broker(FakeBroker(delay=0.02)) as broker:
            upstream = UpstreamConnection([Address("127.0.0.1", broker.port)], PLAIN, timeout=10)
            writer = Collecting()
            outbox = outbox_for(writer)
            try:
                for i in range(3):
                    await relay(upstream, outbox, request(i + 1, 100_000))
                await outbox.send(b"own answer")  # the proxy's own: after the three relayed ones
                assert len(writer.data) == 3 * (8 + 100_000) + len(b"own answer")
                assert writer.data.endswith(b"own answer")
                answer = await upstream.exchange(request(9, 16))  # the link is free of relayed answers now
                assert answer == _I32.pack(9) + body_of(9, 16)
            finally:
                await outbox.stop()
                upstream.close()

    run(scenario)


@pytest.mark.parametrize("fault", ["wrong correlation id", "closed mid-answer"])
def test_an_upstream_fault_while_relaying_ends_the_connection_without_a_hang(fault: str) -> None:
    async def scenario() -> None:
        broker = FakeBroker(
            wrong_id=fault == "wrong correlation id", cut_after=1000 if fault != "wrong correlation id" else None
        )
        async with fake_broker(broker), client_pair() as (proxy_side, _client):
            closing = Closing()
            upstream = UpstreamConnection([Address("127.0.0.1", broker.port)], PLAIN, timeout=10)
            outbox = outbox_for(proxy_side, closing)
            try:
                await relay(upstream, outbox, request(1, 200_000))
                with pytest.raises(OutboxClosed):
                    await asyncio.wait_for(outbox.flushed(), 10)
                assert closing.calls == 1  # the client's socket is closed: it may hold part of an answer
                with pytest.raises(OutboxClosed):
                    outbox.relay(AnswerRelay(upstream, 2))  # the connection is done
                with pytest.raises(UpstreamUnavailable):
                    await upstream.send(request(2, 10))
                assert not upstream.connected
            finally:
                await outbox.stop()
                upstream.close()

    run(scenario)


def test_stopping_the_outbox_while_an_answer_is_passed_on_ends_its_task() -> None:
    async def scenario() -> None:
        async with fake_broker(FakeBroker(delay=5)) as broker:
            upstream = UpstreamConnection([Address("127.0.0.1", broker.port)], PLAIN, timeout=10)
            outbox = outbox_for(Collecting())
            await relay(upstream, outbox, request(1, 10))
            task = outbox._task  # the task that passes the queued answers on
            assert task is not None
            await asyncio.wait_for(outbox.stop(), 2)
            assert task.cancelled()
            upstream.close()
            assert not upstream.connected

    run(scenario)


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        a = socket.create_connection(listener.getsockname())
        b, _ = listener.accept()
    a.setblocking(False)
    b.setblocking(False)
    return a, b


def test_splice_moves_exactly_count_bytes_after_the_prefix_and_restores_the_low_water_mark() -> None:
    async def scenario() -> None:
        source_writer, source = tcp_pair()
        target, target_reader = tcp_pair()
        pipe = splice.Pipe()
        data = os.urandom(3 * 1024 * 1024)
        loop = asyncio.get_running_loop()
        try:
            sending = asyncio.create_task(loop.sock_sendall(source_writer, data + b"rest"))
            received = bytearray()

            async def read_all() -> None:
                while len(received) < 8 + len(data):
                    received.extend(await loop.sock_recv(target_reader, 65536))
                    await asyncio.sleep(0.001)  # a slow client: the splice must wait for room

            reading = asyncio.create_task(read_all())
            await splice.splice_exactly(source, target.fileno(), len(data), pipe, prefix=b"HEADHEAD")
            await asyncio.wait_for(reading, 10)
            await sending
            assert bytes(received) == b"HEADHEAD" + data
            assert await loop.sock_recv(source, 16) == b"rest"  # not one byte more was taken
            assert source.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == 1
        finally:
            pipe.close()
            pipe.close()  # a second close is harmless
            for s in (source_writer, source, target, target_reader):
                s.close()

    run(scenario)


def test_splice_raises_when_the_source_ends_early() -> None:
    async def scenario() -> None:
        source_writer, source = tcp_pair()
        target, target_reader = tcp_pair()
        pipe = splice.Pipe()
        try:
            source_writer.sendall(b"x" * 1000)
            source_writer.close()
            with pytest.raises(asyncio.IncompleteReadError):
                await splice.splice_exactly(source, target.fileno(), 500_000, pipe)
            assert source.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == 1
        finally:
            pipe.close()
            for s in (source, target, target_reader):
                s.close()

    run(scenario)


def test_the_stream_link_of_a_tls_upstream_copies_an_answer_through_in_order() -> None:
    """``StreamLink`` (what a TLS upstream uses) over a plain stream: the same bytes, head first, nothing more."""

    async def scenario() -> None:
        data = os.urandom(2 * 1024 * 1024 + 3)

        async def answer(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(data + b"next")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        async with server:
            host, port = server.sockets[0].getsockname()[:2]
            link = await links.StreamLink.connect(host, port, None)
            collected = Collecting()
            try:
                await link.pass_on(b"HEAD", len(data), collected)
                assert bytes(collected.data) == b"HEAD" + data
                assert await link.read_exactly(4) == b"next"
                with pytest.raises(asyncio.IncompleteReadError):
                    await link.pass_on(b"", 10, collected)
            finally:
                link.close()

    run(scenario)
