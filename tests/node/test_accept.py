"""accept: the decision comes before anything is read; a kept connection waits as a bare fd and gets its streams,
over TLS too, without losing the bytes the client sent before the server looked (its ClientHello, its first request);
one that sends nothing is closed at the wait limit, one its peer closes is forgotten, and neither holds objects the
garbage collector walks."""

from __future__ import annotations

import asyncio
import gc
import socket
import ssl
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest

from kafkaguard.node.accept import Doorway, open_streams
from tests.serving import TlsFiles


@dataclass
class Echo:
    """A doorway that echoes one line per handed-over connection, and what it was told."""

    tls: ssl.SSLContext | None
    refuse_first: bool = False
    decisions: list[str] = field(default_factory=list)
    gone: list[tuple[str, bool]] = field(default_factory=list)
    handed_over: list[float] = field(default_factory=list)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def admit(self, address: str) -> bool:
        keep = not (self.refuse_first and not self.decisions)
        self.decisions.append("kept" if keep else "refused")
        return keep

    def hand_over(self, sock: socket.socket, address: str, accepted_at: float) -> None:
        self.handed_over.append(accepted_at)
        task = asyncio.get_running_loop().create_task(self._serve(sock))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def on_gone(self, address: str, expired: bool) -> None:
        self.gone.append((address, expired))

    async def _serve(self, sock: socket.socket) -> None:
        await asyncio.sleep(0.05)  # a busy loop: more of the client's bytes arrive before the streams exist
        try:
            reader, writer = await open_streams(sock, self.tls, limit=64 * 1024)
        except OSError:
            sock.close()
            return
        writer.write(await reader.readline())
        await writer.drain()
        writer.close()


@asynccontextmanager
async def doorway(echo: Echo, wait_limit: float = 10.0) -> AsyncIterator[Doorway]:
    door = await Doorway.open(
        "127.0.0.1", 0, wait_limit=wait_limit, admit=echo.admit, hand_over=echo.hand_over, gone=echo.on_gone
    )
    try:
        yield door
    finally:
        door.close()
        await asyncio.gather(*echo.tasks, return_exceptions=True)


def tls_pair(tls_files: TlsFiles) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(tls_files.certfile, tls_files.keyfile)
    return server_tls, ssl.create_default_context(cafile=str(tls_files.certfile))


async def until(condition: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("use_tls", [False, True])
def test_a_kept_connection_loses_nothing_the_client_sent_early(use_tls: bool, tls_files: TlsFiles):
    async def scenario() -> bytes:
        server_tls, client_tls = tls_pair(tls_files) if use_tls else (None, None)
        echo = Echo(server_tls)
        async with doorway(echo) as door:
            reader, writer = await asyncio.open_connection("127.0.0.1", door.port, ssl=client_tls)
            writer.write(b"hello\n")  # at once: sent before the server's task has run
            line = await asyncio.wait_for(reader.readline(), 5)
            writer.close()
            assert echo.decisions == ["kept"]
            assert echo.gone == []
            return line

    assert asyncio.run(scenario()) == b"hello\n"


def test_a_refused_tls_connection_gets_no_handshake(tls_files: TlsFiles):
    async def scenario() -> None:
        server_tls, client_tls = tls_pair(tls_files)
        echo = Echo(server_tls, refuse_first=True)
        async with doorway(echo) as door:
            with pytest.raises((ssl.SSLError, OSError)):  # closed before a ServerHello
                await asyncio.wait_for(asyncio.open_connection("127.0.0.1", door.port, ssl=client_tls), 5)
            reader, writer = await asyncio.open_connection("127.0.0.1", door.port, ssl=client_tls)  # the next is kept
            writer.write(b"again\n")
            assert await asyncio.wait_for(reader.readline(), 5) == b"again\n"
            writer.close()
            assert echo.decisions == ["refused", "kept"]
            assert len(echo.handed_over) == 1

    asyncio.run(scenario())


def test_a_connection_that_sends_nothing_is_closed_at_the_wait_limit():
    async def scenario() -> None:
        echo = Echo(None)
        async with doorway(echo, wait_limit=0.3) as door:
            reader, writer = await asyncio.open_connection("127.0.0.1", door.port)
            started = time.monotonic()
            await until(lambda: door.waiting == 1)
            assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the server
            waited = time.monotonic() - started
            writer.close()
            assert echo.gone == [("127.0.0.1", True)]
            assert echo.handed_over == []
            assert door.waiting == 0
            assert 0.25 <= waited < 3.0

    asyncio.run(scenario())


def test_a_connection_its_peer_closes_unread_is_forgotten_without_a_handover():
    async def scenario() -> None:
        echo = Echo(None)
        async with doorway(echo) as door:
            _, writer = await asyncio.open_connection("127.0.0.1", door.port)
            await until(lambda: door.waiting == 1)
            writer.close()
            await until(lambda: echo.gone == [("127.0.0.1", False)])
            assert echo.handed_over == []
            assert door.waiting == 0

    asyncio.run(scenario())


def test_closing_the_doorway_closes_waiting_connections_and_reports_each():
    async def scenario() -> None:
        echo = Echo(None)
        door = await Doorway.open("127.0.0.1", 0, wait_limit=10, admit=echo.admit, hand_over=echo.hand_over,
                                  gone=echo.on_gone)  # fmt: skip
        clients = [await asyncio.open_connection("127.0.0.1", door.port) for _ in range(3)]
        await until(lambda: door.waiting == 3)
        door.close()
        for reader, writer in clients:
            assert await asyncio.wait_for(reader.read(), 5) == b""
            writer.close()
        assert echo.gone == [("127.0.0.1", False)] * 3
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", door.port)

    asyncio.run(scenario())


def test_waiting_connections_hold_nothing_the_garbage_collector_walks():
    """The reason the doorway exists: 8,000 idle connections served with streams and a task made full collections
    of ~170 ms (bench_abuse). Waiting ones here add one small object each."""

    async def scenario() -> tuple[int, int]:
        echo = Echo(None)
        async with doorway(echo) as door:
            clients: list[socket.socket] = []
            try:
                gc.collect()
                before = len(gc.get_objects())
                for _ in range(500):
                    client = socket.socket()
                    client.setblocking(False)
                    clients.append(client)
                    await asyncio.get_running_loop().sock_connect(client, ("127.0.0.1", door.port))
                await until(lambda: door.waiting == 500)
                gc.collect()
                # the 500 client sockets of this test are tracked; the server's side adds nothing per connection
                return len(gc.get_objects()) - before - len(clients), door.waiting
            finally:
                for client in clients:
                    client.close()

    added, waiting = asyncio.run(scenario())
    assert waiting == 500
    assert added <= 500 + 10  # the selector's key (a namedtuple of four ints) and nothing else; streams made ~43


def test_a_drain_serves_what_had_arrived_and_closes_the_rest():
    """``close(serve_arrived=True)``: a waiting connection whose first bytes arrived since the loop last looked, and
    one still in the kernel's accept queue with its bytes sent, are handed over and answered; a waiting one that sent
    nothing is closed; then the port refuses."""

    async def scenario() -> None:
        echo = Echo(None)
        async with doorway(echo) as door:
            port = door.port
            silent = socket.create_connection(("127.0.0.1", port), timeout=5)
            late = socket.create_connection(("127.0.0.1", port), timeout=5)
            await until(lambda: door.waiting == 2)
            late.sendall(b"late\n")  # the loop has not run since: the doorway has not seen these bytes
            queued = socket.create_connection(("127.0.0.1", port), timeout=5)  # in the kernel's queue
            queued.sendall(b"queued\n")
            door.close(serve_arrived=True)  # no await in between: the loop saw neither connection's bytes
            assert len(echo.handed_over) == 2
            assert echo.gone == [("127.0.0.1", False)]  # the silent one
            for sock in (late, queued, silent):
                sock.setblocking(False)
            loop = asyncio.get_running_loop()
            assert await asyncio.wait_for(loop.sock_recv(late, 100), 5) == b"late\n"
            assert await asyncio.wait_for(loop.sock_recv(queued, 100), 5) == b"queued\n"
            assert await asyncio.wait_for(loop.sock_recv(silent, 100), 5) == b""
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", port), timeout=5)
            for sock in (late, queued, silent):
                sock.close()

    asyncio.run(scenario())
