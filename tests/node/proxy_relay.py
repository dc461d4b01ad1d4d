"""A load balancer for tests: a TCP relay that opens each connection it relays with a PROXY protocol header, and the
encoders of v1 and v2 headers it uses (written from the spec apart from ``kafkaguard.node.proxy_header``'s
parser, so that tests can check one against the other).

::

    with ProxyRelay(("127.0.0.1", broker_port), version=2, source=("203.0.113.7", 40000)) as relay:
        client = socket.create_connection(("127.0.0.1", relay.port))
        # the broker reads encode_v2(("203.0.113.7", 40000), ("127.0.0.1", relay.port)), then the client's bytes

    async with ProxyRelay(target, version=1) as relay:   # the same relay in the running loop
        ...

Each accepted connection gets its own connection to the target; bytes flow both ways, an end of stream on one
side is passed on as an end of stream (``write_eof``) to the other, and the pair is closed when both directions
have ended (or either fails). Closing the relay closes every connection it holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import threading
from collections.abc import Sequence
from types import TracebackType

Address = tuple[str, int]

V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"


def encode_v1(source: Address | None, destination: Address | None = None) -> bytes:
    """A v1 line: TCP4 or TCP6 after the source's family, or ``PROXY UNKNOWN`` when ``source`` is None."""
    if source is None:
        return b"PROXY UNKNOWN\r\n"
    if destination is None:
        raise TypeError("a v1 TCP4/TCP6 line needs a destination")
    src, dst = ipaddress.ip_address(source[0]), ipaddress.ip_address(destination[0])
    if src.version != dst.version:
        raise TypeError(f"source {src} and destination {dst} are not of one family")
    protocol = "TCP4" if src.version == 4 else "TCP6"
    return f"PROXY {protocol} {src} {dst} {source[1]} {destination[1]}\r\n".encode("ascii")


def encode_v2(
    source: Address | None,
    destination: Address | None = None,
    *,
    local: bool = False,
    tlvs: Sequence[tuple[int, bytes]] = (),
) -> bytes:
    """A v2 header: PROXY over TCP4 or TCP6 after the source's family, PROXY with UNSPEC (no addresses) when
    ``source`` is None, or LOCAL (a health check; ``source`` and ``destination`` ignored); then ``tlvs``."""
    if local:
        command, family, block = 0x20, 0x00, b""
    elif source is None:
        command, family, block = 0x21, 0x00, b""
    else:
        if destination is None:
            raise TypeError("a v2 PROXY header with addresses needs a destination")
        src, dst = ipaddress.ip_address(source[0]), ipaddress.ip_address(destination[0])
        if src.version != dst.version:
            raise TypeError(f"source {src} and destination {dst} are not of one family")
        command, family = 0x21, 0x11 if src.version == 4 else 0x21
        ports = source[1].to_bytes(2, "big") + destination[1].to_bytes(2, "big")
        block = src.packed + dst.packed + ports
    block += b"".join(bytes([kind]) + len(value).to_bytes(2, "big") + value for kind, value in tlvs)
    return V2_SIGNATURE + bytes([command, family]) + len(block).to_bytes(2, "big") + block


class ProxyRelay:
    """Relays connections from ``127.0.0.1:<port>`` to ``target``, each opened with a PROXY header of ``version``
    carrying ``source`` (None: v1 ``UNKNOWN`` / v2 UNSPEC) and, as destination, the relay's own address as the
    client reached it. ``header``: send these bytes instead (a malformed header, say). ``tlvs``: v2 only.

    ``with``: the relay runs in a thread with its own loop (for sync tests); ``async with``: in the running loop.
    """

    def __init__(
        self,
        target: Address,
        *,
        version: int = 2,
        source: Address | None = ("203.0.113.7", 40000),
        tlvs: Sequence[tuple[int, bytes]] = (),
        header: bytes | None = None,
    ) -> None:
        if version not in (1, 2):
            raise ValueError(f"PROXY protocol version {version}: 1 or 2")
        if version == 1 and tlvs:
            raise ValueError("v1 headers have no TLVs")
        self.target = target
        self.version = version
        self.source = source
        self.tlvs = tuple(tlvs)
        self.header = header
        #: Connections accepted so far.
        self.accepted = 0
        self._server: asyncio.Server | None = None
        #: Each connection's relaying task and the client's writer, from its accept (before the task first runs).
        self._pairs: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the relay is not running")
        return int(self._server.sockets[0].getsockname()[1])

    def header_for(self, destination: Address) -> bytes:
        """The bytes sent to the target first on a connection that reached the relay at ``destination``."""
        if self.header is not None:
            return self.header
        if self.version == 1:
            return encode_v1(self.source, destination)
        return encode_v2(self.source, destination, tlvs=self.tlvs)

    # --------------------------------------------------------------------------------------- in the running loop

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        pairs = list(self._pairs.items())
        for task, client_writer in pairs:
            task.cancel()
            client_writer.close()  # also when the task never ran: cancelled before its start, it never will
        await asyncio.gather(*(task for task, _ in pairs), return_exceptions=True)

    async def __aenter__(self) -> ProxyRelay:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------------------------------ in a thread of its own

    def __enter__(self) -> ProxyRelay:
        started = threading.Event()
        failure: list[BaseException] = []

        async def serve() -> None:
            self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
            try:
                await self.start()
            except BaseException as e:  # reported to the caller by __enter__
                failure.append(e)
                raise
            finally:
                started.set()
            try:
                await self._stop.wait()
            finally:
                await self.aclose()

        self._thread = threading.Thread(target=asyncio.run, args=(serve(),), name="proxy-relay", daemon=True)
        self._thread.start()
        started.wait()
        if failure:
            self._thread.join()
            raise failure[0]
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join()

    # ------------------------------------------------------------------------------------------------- internals

    def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        task = asyncio.get_running_loop().create_task(self._relay(client_reader, client_writer))
        self._pairs[task] = client_writer
        task.add_done_callback(self._pairs.pop)

    async def _relay(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        writers = [client_writer]
        try:
            sockname = client_writer.get_extra_info("sockname")
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
            writers.append(upstream_writer)
            upstream_writer.write(self.header_for((sockname[0], sockname[1])))
            async with asyncio.TaskGroup() as pipes:  # one failing cancels the other
                pipes.create_task(_pipe(client_reader, upstream_writer))
                pipes.create_task(_pipe(upstream_reader, client_writer))
        except* OSError:
            pass  # either side went away: both are closed below
        finally:
            for writer in writers:  # all closed before the first wait, which a cancellation may interrupt
                writer.close()
            for writer in writers:
                with contextlib.suppress(OSError):
                    await writer.wait_closed()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until end of stream, then pass the end on."""
    while chunk := await reader.read(65536):
        writer.write(chunk)
        await writer.drain()
    if writer.can_write_eof() and not writer.is_closing():
        writer.write_eof()
