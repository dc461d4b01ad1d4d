"""The test helper ``tests.node.proxy_relay``: its encoders against the spec's bytes, and the relay in front of
an echo server (what the echo server sends back is exactly what the relay sent it: the header, then the bytes)."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from types import TracebackType

import pytest

from tests.node.proxy_relay import V2_SIGNATURE, Address, ProxyRelay, encode_v1, encode_v2

SOURCE = ("203.0.113.7", 40000)
PAYLOAD = b"\x00\x00\x00\x0e\x00\x12\x00\x03\x00\x00\x00\x07\x00\x04test"


class EchoServer:
    """A blocking echo server in a thread, for ``connections`` connections one after the other; ``close_at_once``:
    close each connection unread instead."""

    def __init__(self, connections: int = 1, *, close_at_once: bool = False) -> None:
        self._listening = socket.create_server(("127.0.0.1", 0))
        self._connections = connections
        self._close_at_once = close_at_once
        self._thread = threading.Thread(target=self._serve, name="echo", daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._listening.getsockname()[:2]
        return str(host), int(port)

    def _serve(self) -> None:
        for _ in range(self._connections):
            connection, _ = self._listening.accept()
            with connection:
                if self._close_at_once:
                    continue
                while data := connection.recv(65536):
                    connection.sendall(data)

    def __enter__(self) -> EchoServer:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._thread.join(10)
        self._listening.close()
        assert not self._thread.is_alive()


def exchange(port: int, data: bytes) -> bytes:
    """Connect to the relay, send ``data``, end the stream and return everything received until the end."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
        client.sendall(data)
        client.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := client.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


# ---------------------------------------------------------------------------------------------------- encoders


def test_encode_v1_writes_the_spec_s_lines() -> None:
    assert encode_v1(("192.168.0.1", 56324), ("192.168.0.11", 443)) == (
        b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n"
    )
    assert encode_v1(("2001:db8::7", 0), ("::1", 65535)) == b"PROXY TCP6 2001:db8::7 ::1 0 65535\r\n"
    assert encode_v1(None) == b"PROXY UNKNOWN\r\n"


def test_encode_v2_writes_haproxy_s_bytes() -> None:
    haproxy = bytes.fromhex("0d0a0d0a000d0a515549540a 2111000c ac130001 ac130003 a652 0050")
    assert encode_v2(("172.19.0.1", 42578), ("172.19.0.3", 80)) == haproxy
    assert encode_v2(None, local=True) == V2_SIGNATURE + b"\x20\x00\x00\x00"
    assert encode_v2(None) == V2_SIGNATURE + b"\x21\x00\x00\x00"
    with_tlv = encode_v2(("::1", 1), ("::2", 2), tlvs=[(0xEA, b"\x01vpce-1")])
    assert with_tlv[12:16] == b"\x21\x21\x00\x2e"  # 36 bytes of addresses and ports + a TLV of 3 + 7
    assert with_tlv[-10:] == b"\xea\x00\x07\x01vpce-1"


@pytest.mark.parametrize("encode", [encode_v1, encode_v2])
def test_encoders_refuse_addresses_of_two_families(encode: Callable[[Address, Address], bytes]) -> None:
    with pytest.raises(TypeError, match="not of one family"):
        encode(("10.0.0.1", 1), ("::1", 2))


# ------------------------------------------------------------------------------------------------------ relay


@pytest.mark.parametrize("version", [1, 2])
def test_the_relay_sends_the_header_then_the_client_s_bytes_and_relays_the_answer(version: int) -> None:
    with EchoServer() as echo, ProxyRelay(echo.address, version=version, source=SOURCE) as relay:
        destination = ("127.0.0.1", relay.port)
        expected = encode_v1(SOURCE, destination) if version == 1 else encode_v2(SOURCE, destination)
        assert exchange(relay.port, PAYLOAD) == expected + PAYLOAD
        assert relay.accepted == 1


def test_the_relay_sends_its_tlvs_and_a_large_stream_intact() -> None:
    tlvs = [(0xEA, b"\x01vpce-08d2bf15fac5001c9"), (0xE0, bytes(8))]
    payload = bytes(range(256)) * 4096  # 1 MiB: many reads and writes, back pressure both ways
    with EchoServer() as echo, ProxyRelay(echo.address, version=2, source=SOURCE, tlvs=tlvs) as relay:
        received = exchange(relay.port, payload)
        assert received == encode_v2(SOURCE, ("127.0.0.1", relay.port), tlvs=tlvs) + payload


def test_the_relay_sends_a_given_header_verbatim() -> None:
    with EchoServer() as echo, ProxyRelay(echo.address, header=b"PROXY TCP4 garbage\r\n") as relay:
        assert exchange(relay.port, PAYLOAD) == b"PROXY TCP4 garbage\r\n" + PAYLOAD


def test_each_connection_gets_its_own_header_and_upstream() -> None:
    with EchoServer(connections=2) as echo, ProxyRelay(echo.address, version=1, source=None) as relay:
        assert exchange(relay.port, b"first") == b"PROXY UNKNOWN\r\nfirst"
        assert exchange(relay.port, b"second") == b"PROXY UNKNOWN\r\nsecond"
        assert relay.accepted == 2


def test_the_target_closing_ends_the_client_s_stream() -> None:
    with (
        EchoServer(close_at_once=True) as echo,
        ProxyRelay(echo.address) as relay,
        socket.create_connection(("127.0.0.1", relay.port), timeout=5) as client,
    ):
        assert client.recv(1) == b""


def test_an_unreachable_target_ends_the_client_s_stream() -> None:
    with socket.create_server(("127.0.0.1", 0)) as placeholder:
        free = placeholder.getsockname()[:2]  # nothing listens there once it is closed
    with (
        ProxyRelay((str(free[0]), int(free[1]))) as relay,
        socket.create_connection(("127.0.0.1", relay.port), timeout=5) as client,
    ):
        assert client.recv(1) == b""


def test_leaving_the_relay_closes_the_connections_it_holds() -> None:
    expected = b"PROXY UNKNOWN\r\nx"  # echoed: the header, then the client's byte
    with EchoServer() as echo:
        with ProxyRelay(echo.address, version=1, source=None) as relay:
            client = socket.create_connection(("127.0.0.1", relay.port), timeout=5)
            client.sendall(b"x")
            received = b""
            while len(received) < len(expected) and (chunk := client.recv(65536)):
                received += chunk
            assert received == expected
        with client:  # the client never ended its stream: the relay did, when it closed
            assert client.recv(1) == b""


def test_the_relay_runs_in_the_running_loop_with_async_with() -> None:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()
        await writer.wait_closed()

    async def scenario() -> None:
        server = await asyncio.start_server(echo, "127.0.0.1", 0)
        async with server, ProxyRelay(server.sockets[0].getsockname()[:2], version=2, source=SOURCE) as relay:
            header = encode_v2(SOURCE, ("127.0.0.1", relay.port))

            async def one(data: bytes) -> bytes:
                reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
                writer.write(data)
                writer.write_eof()
                received = await reader.read()
                writer.close()
                await writer.wait_closed()
                return received

            answers = await asyncio.gather(one(b"a" * 1000), one(b"b" * 2000))
            assert list(answers) == [header + b"a" * 1000, header + b"b" * 2000]
            assert relay.accepted == 2

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_a_relay_refuses_an_unknown_version_or_v1_tlvs() -> None:
    with pytest.raises(ValueError, match="version 3"):
        ProxyRelay(("127.0.0.1", 1), version=3)
    with pytest.raises(ValueError, match="no TLVs"):
        ProxyRelay(("127.0.0.1", 1), version=1, tlvs=[(1, b"h2")])
