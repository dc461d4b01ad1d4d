"""``proxy.links``: a connect that is cancelled (a timeout, a watch stopped) leaves no socket open; a TLS link
(``StreamLink``) passes answers through, bounded, and waits on the way up for a broker that does not read."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import cast

import pytest

from kafkaguard.proxy.links import STREAM_BUFFER, StreamLink, open_link
from tests.kafka.pki import CertificateAuthority


def test_a_cancelled_connect_closes_its_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, only an ``OSError`` closed the socket: a connect cut short by ``asyncio.timeout`` (the upstream's
    timeout) or by a stopping broker-settings watch leaked it, which pytest reported as an unclosed socket."""
    dialled: list[socket.socket] = []

    async def never_connects(sock: socket.socket, _address: object) -> None:
        dialled.append(sock)
        await asyncio.Event().wait()

    async def dial() -> None:
        monkeypatch.setattr(asyncio.get_running_loop(), "sock_connect", never_connects)
        async with asyncio.timeout(0.05):
            await open_link("127.0.0.1", 9, None)

    with pytest.raises(TimeoutError):
        asyncio.run(dial())
    assert len(dialled) == 1
    assert dialled[0].fileno() == -1  # closed


def test_a_refused_connect_raises_its_os_error() -> None:
    with socket.socket() as bound:  # bound, not listening: a connect to it is refused
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        with pytest.raises(ConnectionRefusedError):
            asyncio.run(open_link("127.0.0.1", port, None))


# ------------------------------------------------------------------------------------------ StreamLink over TLS


class SlowWriter:
    """A client that takes its time: each drain lets the loop run a few times, so the upstream gets ahead."""

    def __init__(self, link: StreamLink) -> None:
        self.data = bytearray()
        self.link = link
        self.most_buffered = 0

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        for _ in range(3):
            await asyncio.sleep(0)
        self.most_buffered = max(self.most_buffered, self.link._receiver.buffered)


@contextlib.asynccontextmanager
async def tls_server(
    tmp_path: Path, serve: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
) -> AsyncIterator[tuple[int, ssl.SSLContext]]:
    """A TLS server on loopback (a certificate for 127.0.0.1 from a CA of its own) and a client context trusting
    that CA, the host name checked."""
    ca = CertificateAuthority.create("links test CA")
    ca_file = ca.write(tmp_path)
    certfile, keyfile = ca.issue("CN=upstream", hosts=("127.0.0.1",)).write(tmp_path, "upstream")
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(certfile, keyfile)
    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_context)
    async with server:
        yield server.sockets[0].getsockname()[1], ssl.create_default_context(cafile=str(ca_file))


def test_a_tls_link_passes_an_answer_through_with_its_buffer_bounded(tmp_path: Path) -> None:
    """8 MiB through a real TLS connection into a slow client: the same bytes in order, what follows left for the
    next read, and the link never holding more than its buffer (its socket paused meanwhile)."""
    data = os.urandom(8 * 1024 * 1024 + 5)

    async def answer(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(data + b"next")
        await writer.drain()
        writer.close()

    async def scenario() -> None:
        async with tls_server(tmp_path, answer) as (port, context):
            link = await open_link("127.0.0.1", port, context)
            assert isinstance(link, StreamLink)
            try:
                client = SlowWriter(link)
                await link.pass_on(b"HEAD", len(data), client)
                assert bytes(client.data) == b"HEAD" + data
                assert await link.read_exactly(4) == b"next"
                assert 0 < client.most_buffered <= STREAM_BUFFER
                with pytest.raises(asyncio.IncompleteReadError):
                    await link.read_exactly(1)
            finally:
                link.close()

    asyncio.run(scenario())


def test_a_tls_link_cut_inside_an_answer_raises_incomplete_read(tmp_path: Path) -> None:
    async def half(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"x" * 100_000)
        await writer.drain()
        writer.transport.abort()  # no close_notify: cut

    async def scenario() -> None:
        async with tls_server(tmp_path, half) as (port, context):
            link = await open_link("127.0.0.1", port, context)
            try:
                with pytest.raises((asyncio.IncompleteReadError, ConnectionError, ssl.SSLError)):
                    await link.pass_on(b"", 1_000_000, SlowWriter(cast(StreamLink, link)))
            finally:
                link.close()

    asyncio.run(scenario())


def test_a_tls_link_send_waits_for_a_server_that_does_not_read_then_goes_on(tmp_path: Path) -> None:
    """Flow control on the way up: 32 MiB sent, 1 MiB at a time, to a server that reads nothing for a while; the
    sends wait (the transport's buffers are full) and complete once the server reads, every byte arriving."""
    release = asyncio.Event()
    received = bytearray()

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await release.wait()
        while chunk := await reader.read(1 << 20):
            received.extend(chunk)
        writer.close()

    async def scenario() -> None:
        async with tls_server(tmp_path, slow) as (port, context):
            link = await open_link("127.0.0.1", port, context)
            try:
                payload = os.urandom(32 * 1024 * 1024)

                async def send_all() -> None:  # as the proxy sends: request after request, each drained
                    for at in range(0, len(payload), 1 << 20):
                        await link.send([payload[at : at + 1000], payload[at + 1000 : at + (1 << 20)]])

                sending = asyncio.create_task(send_all())
                await asyncio.sleep(0.3)
                assert not sending.done()  # waiting in drain: nobody reads
                release.set()
                await asyncio.wait_for(sending, 30)
                for _ in range(3000):  # sent is not yet received: the link's close aborts, dropping what it holds
                    if len(received) >= len(payload):
                        break
                    await asyncio.sleep(0.01)
                assert bytes(received) == payload
            finally:
                link.close()

    asyncio.run(scenario())
