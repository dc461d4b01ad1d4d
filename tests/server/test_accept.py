"""accept: the decision comes before anything is read; a kept connection gets its streams, over TLS too, without
losing the bytes the client sent before the server looked (its ClientHello, its first request)."""

from __future__ import annotations

import asyncio
import ssl

import pytest

from kafkaguard.server.accept import listen, open_streams
from tests.server.conftest import TlsFiles


async def echo_server(tls: ssl.SSLContext | None, refuse_first: bool) -> tuple[asyncio.Server, list[str]]:
    """Echo one line per connection; the first connection is closed unread when ``refuse_first``."""
    decisions: list[str] = []

    async def serve(transport: asyncio.Transport) -> None:
        await asyncio.sleep(0.05)  # a busy loop: the client's first bytes have arrived before the handover
        reader, writer = await open_streams(transport, tls, limit=64 * 1024)
        writer.write(await reader.readline())
        await writer.drain()
        writer.close()

    tasks: set[asyncio.Task[None]] = set()

    def on_accept(transport: asyncio.Transport) -> None:
        if refuse_first and not decisions:
            decisions.append("refused")
            transport.close()
            return
        decisions.append("kept")
        task = asyncio.get_running_loop().create_task(serve(transport))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    return await listen("127.0.0.1", 0, on_accept), decisions


@pytest.mark.parametrize("use_tls", [False, True])
def test_a_kept_connection_loses_nothing_the_client_sent_early(use_tls: bool, tls_files: TlsFiles):
    async def scenario() -> bytes:
        server_tls = None
        client_tls = None
        if use_tls:
            server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            server_tls.load_cert_chain(tls_files.certfile, tls_files.keyfile)
            client_tls = ssl.create_default_context(cafile=str(tls_files.certfile))
        server, decisions = await echo_server(server_tls, refuse_first=False)
        port = server.sockets[0].getsockname()[1]
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_tls)
            writer.write(b"hello\n")  # at once: sent before the server's task has run
            line = await asyncio.wait_for(reader.readline(), 5)
            writer.close()
            assert decisions == ["kept"]
            return line
        finally:
            server.close()
            await server.wait_closed()

    assert asyncio.run(scenario()) == b"hello\n"


def test_a_refused_tls_connection_gets_no_handshake(tls_files: TlsFiles):
    async def scenario() -> None:
        server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_tls.load_cert_chain(tls_files.certfile, tls_files.keyfile)
        client_tls = ssl.create_default_context(cafile=str(tls_files.certfile))
        server, decisions = await echo_server(server_tls, refuse_first=True)
        port = server.sockets[0].getsockname()[1]
        try:
            with pytest.raises((ssl.SSLError, OSError)):  # closed before a ServerHello
                await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port, ssl=client_tls), 5)
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_tls)  # the next is kept
            writer.write(b"again\n")
            assert await asyncio.wait_for(reader.readline(), 5) == b"again\n"
            writer.close()
            assert decisions == ["refused", "kept"]
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(scenario())
