"""A Fetch v16 answer relayed with its walk (``links``: spliced with peeks, copied, TLS stream, held whole), on real
loopback sockets, the upstream writing it in small uneven pieces: the client gets every byte the upstream sent
but the last section, where ``node_endpoints`` are rewritten to the proxy's address in the same number of bytes;
not one byte more is taken from the upstream; the low-water mark is restored; malformed or cut answers raise
instead of hanging."""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kio.static.primitive import Records

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.build import nested
from kafkaguard.protocol.codec import encode_response, response_schema
from kafkaguard.proxy import links, splice
from kafkaguard.proxy.fetch_walk import FetchAnswerWalk, NodeEndpoint, node_endpoints_in, tail_with
from kafkaguard.proxy.walks import AnswerEdit
from kafkaguard.proxy.wire import UpstreamProtocolError
from tests.proxy.fetch_answers import counted_peeks, tail_at
from tests.proxy.memory_upstream import entity
from tests.proxy.test_relay_pipeline import Collecting, client_pair, read_answer, run, tcp_pair

PROXIED = NodeEndpoint(2, "proxy.example", 19095, None)


def answer(*sizes: int, host: str = "kafka-2.internal") -> bytes:
    """A framed v16 answer: one topic, a partition per size of records, broker 2 at ``host`` as a new leader."""
    cls = response_schema(ApiKey.FETCH, 16)
    partitions = tuple(
        entity(nested(cls, "PartitionData"), partition_index=i, records=Records(bytes([i % 251]) * size))
        for i, size in enumerate(sizes)
    )
    topic = entity(nested(cls, "FetchableTopicResponse"), partitions=partitions)
    endpoint = entity(nested(cls, "NodeEndpoint"), node_id=2, host=host, port=9092)
    return encode_response(ApiKey.FETCH, 16, 7, entity(cls, responses=(topic,), node_endpoints=(endpoint,)))


def expected(framed: bytes) -> bytes:
    """What the client must get: the same bytes, the last section rewritten to ``PROXIED``."""
    at = 4 + tail_at(framed[4:], 16)
    return framed[:at] + tail_with(framed[at:], [PROXIED])


async def rewrite(tail: bytes) -> bytes:
    assert node_endpoints_in(tail) == (NodeEndpoint(2, "kafka-2.internal", 9092, None),)
    return tail_with(tail, [PROXIED])


EDIT = AnswerEdit(walk=lambda count: FetchAnswerWalk(count, 16), tail=rewrite)


async def send_unevenly(sock: socket.socket, data: bytes, seed: int) -> None:
    """``data`` in pieces of 1 byte to 200 KiB, with pauses: a walk's windows end anywhere."""
    loop, rng, at = asyncio.get_running_loop(), random.Random(seed), 0
    while at < len(data):
        piece = rng.choice([1, 3, 17, 100, 4096, 70_000, 200_000])
        await loop.sock_sendall(sock, data[at : at + piece])
        at += piece
        if rng.random() < 0.3:
            await asyncio.sleep(0.001)


async def pass_on_from_socket(framed: bytes, target: Callable[[links.SocketLink], Awaitable[Any]], seed: int) -> Any:
    """``framed`` then b"rest" written to a socket link; ``target(link)`` passes the answer on."""
    writer_socket, source = tcp_pair()
    link = links.SocketLink(source)
    sending = asyncio.create_task(send_unevenly(writer_socket, framed + b"rest", seed))
    try:
        result = await target(link)
        assert await link.read_exactly(4) == b"rest", "not one byte more was taken"
        assert source.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == 1
        await sending
        return result
    finally:
        sending.cancel()
        link.close()
        writer_socket.close()


SHAPES = {
    "one partition of 1 MiB": (1024 * 1024,),
    "large and small": (300_000, 10, 0, 5000, 2 * 1024 * 1024, 4095),
    "small only": (100, 200),
}


@pytest.mark.parametrize("sizes", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize("seed", [1, 2])
def test_spliced_with_peeks(sizes: tuple[int, ...], seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    peeks = counted_peeks(monkeypatch)

    async def scenario() -> None:
        framed = answer(*sizes)
        async with client_pair() as (proxy_side, client):

            async def target(link: links.SocketLink) -> None:
                head = await link.read_exactly(8)
                await link.pass_on(head, len(framed) - 8, proxy_side, EDIT)

            reading = asyncio.create_task(read_answer(client))
            await pass_on_from_socket(framed, target, seed)
            correlation_id, body = await reading
        assert framed[4:8] + body == expected(framed)[4:] and correlation_id == 7
        assert b"kafka-2" not in body
        if len(framed) - 8 > links.SPLICE_FROM:
            assert peeks, "the structure was peeked at, not read"

    run(scenario)


@pytest.mark.parametrize("sizes", SHAPES.values(), ids=SHAPES.keys())
def test_copied_into_a_writer_that_is_not_a_socket(sizes: tuple[int, ...]) -> None:
    async def scenario() -> None:
        framed = answer(*sizes)
        collected = Collecting()

        async def target(link: links.SocketLink) -> None:
            head = await link.read_exactly(8)
            await link.pass_on(head, len(framed) - 8, collected, EDIT)

        await pass_on_from_socket(framed, target, 3)
        assert bytes(collected.data) == expected(framed)

    run(scenario)


def test_copied_from_a_tls_stream_link() -> None:
    async def scenario() -> None:
        framed = answer(300_000, 7, 1024 * 1024)

        async def serve(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(framed + b"next")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        async with server:
            host, port = server.sockets[0].getsockname()[:2]
            link = await links.StreamLink.connect(host, port, None)
            collected = Collecting()
            try:
                head = await link.read_exactly(8)
                await link.pass_on(head, len(framed) - 8, collected, EDIT)
                assert bytes(collected.data) == expected(framed)
                assert await link.read_exactly(4) == b"next"
            finally:
                link.close()

    run(scenario)


def malformed(size: int) -> bytes:
    """A framed answer whose one partition claims 1 GiB of records in a frame of ``size`` records bytes."""
    framed = bytearray(answer(size))
    at = 4 + 4 + 1 + 10 + 1 + 16 + 1 + 30 + 1 + 4  # the records' length (size prefix, correlation id, … replica)
    length = bytes(framed[at : at + 3])
    assert length[0] & 0x80, "a multi-byte length"
    framed[at : at + 5] = bytes.fromhex("8180808004")  # 1 GiB + 1: the rest shifts, the frame's size stays
    return bytes(framed[: len(framed)])


@pytest.mark.parametrize("size", [1000, 200_000])
@pytest.mark.parametrize("writer", ["socket", "collecting"])
def test_a_malformed_answer_raises_without_a_hang(size: int, writer: str) -> None:
    async def scenario() -> None:
        framed = malformed(size)
        async with client_pair() as (proxy_side, _client):
            out = proxy_side if writer == "socket" else Collecting()

            async def target(link: links.SocketLink) -> None:
                head = await link.read_exactly(8)
                with pytest.raises(UpstreamProtocolError, match="malformed Fetch v16 response"):
                    await link.pass_on(head, len(framed) - 8, out, EDIT)

            writer_socket, source = tcp_pair()
            link = links.SocketLink(source)
            try:
                await asyncio.get_running_loop().sock_sendall(writer_socket, framed)
                await target(link)
            finally:
                link.close()
                writer_socket.close()

    run(scenario)


def test_an_answer_cut_inside_its_structure_raises_without_a_hang() -> None:
    async def scenario() -> None:
        framed = answer(500_000, 500_000)
        # size, correlation id, header tags, throttle/error/session, 1 topic, its id, 2 partitions; the first one's
        # head, no aborted, replica, a 3-byte records length, its records, its tags; then 20 bytes into the second's
        cut = 4 + 4 + 1 + 10 + 1 + 16 + 1 + 30 + 1 + 4 + 3 + 500_000 + 1 + 20
        async with client_pair() as (proxy_side, _client):
            writer_socket, source = tcp_pair()
            link = links.SocketLink(source)
            try:
                await asyncio.get_running_loop().sock_sendall(writer_socket, framed[:cut])
                writer_socket.close()
                head = await link.read_exactly(8)
                with pytest.raises(asyncio.IncompleteReadError):
                    await link.pass_on(head, len(framed) - 8, proxy_side, EDIT)
                assert source.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == 1
            finally:
                link.close()

    run(scenario)


def test_peek_waits_for_what_it_wants_and_leaves_it_on_the_socket() -> None:
    async def scenario() -> None:
        writer_socket, source = tcp_pair()
        loop = asyncio.get_running_loop()
        try:
            writer_socket.sendall(b"abc")
            later = asyncio.create_task(asyncio.sleep(0.01))
            later.add_done_callback(lambda _: writer_socket.sendall(b"defgh"))
            assert await splice.peek(source, 6, 100) == b"abcdefgh", "woken once 6 were there: all 8 came together"
            assert source.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == 1
            assert await loop.sock_recv(source, 100) == b"abcdefgh", "nothing was taken"
            writer_socket.sendall(b"xy")
            writer_socket.close()
            with pytest.raises(asyncio.IncompleteReadError):
                await splice.peek(source, 3, 100)
        finally:
            source.close()

    run(scenario)
