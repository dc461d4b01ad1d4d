"""The byte pipe under an upstream connection: a plain socket, or a TLS stream.

``UpstreamConnection`` speaks Kafka over a ``Link``: send a request's parts, read exactly n bytes, pass n bytes of a
relayed answer on to the client. Two kinds, because what is fastest differs:

* ``SocketLink`` (PLAINTEXT and SASL_PLAINTEXT upstreams): the socket is read and written with the event loop's
  socket calls, so nothing reads ahead of what was asked, and a relayed answer's body moves to a plain client socket
  in the kernel (``splice``), never entering the process;
* ``StreamLink`` (SSL and SASL_SSL upstreams): asyncio's TLS transport decrypting straight into the link's own
  buffer (``_Receiver``, a ``BufferedProtocol``); the body is copied through in chunks (a TLS record must be decrypted
  to be passed on). A StreamReader cost two copies more per byte: asyncio joins the records it decrypts for a
  plain protocol, and the reader appends them to its buffer before a read slices them out.

Either copies when the client side cannot take a splice (a TLS client listener, a quota's metering writer, or bytes
still queued on the client's transport).

An answer relayed with an ``AnswerEdit`` (Fetch v16+: ``walks``, ``fetch_walk``) is walked on the way: on the
splice path its structure is peeked at (``splice.peek``, the bytes stay on the socket) and spliced on together with
the records that follow it, so a 1-partition answer costs two peeks, a read and a write of its last few bytes more
than an unedited one; copied, the walk looks at the bytes as they pass; small answers are read whole and walked in
memory. Its last bytes (the tagged section the edit rewrites) are read into the process and written rewritten. An
edit that holds its answer (``AnswerEdit.held``: Produce v10+, ``produce_walk``) has it read whole on every path,
walked in memory and written at once, its frame's size that of the rewritten answer (``edited_frame``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import socket
import ssl
import struct
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, cast

from kafkaguard.protocol.replies import ClientWriter
from kafkaguard.proxy import splice
from kafkaguard.proxy.resolve import resolve
from kafkaguard.proxy.walks import NEED, PASS, AnswerEdit
from kafkaguard.proxy.wire import ClientGone, UpstreamProtocolError

#: Bytes a relayed answer is copied in at a time when it cannot be spliced (large enough to amortize the loop,
#: small enough to stream).
RELAY_CHUNK = 1024 * 1024
#: How much of an answer a TLS link buffers before pausing its socket. With bench_proxy, 8 MiB here (and an 8 MiB
#: client write buffer) made consuming slower than 1 MiB: larger copies leave the CPU caches (see
#: docs/benchmarks.md, "Figures from the code").
STREAM_BUFFER = 1024 * 1024
#: The least room a TLS link offers asyncio to decrypt into; below it, the link's socket pauses until read.
_MIN_ROOM = 64 * 1024
#: Answers up to this size are read whole and written at once; larger ones are spliced (a splice costs a few more
#: calls than it saves on a small answer).
SPLICE_FROM = 64 * 1024
#: The most of an edited answer's structure peeked or read ahead at a time (a walk asks for less, usually).
LOOK_AHEAD = 4096
_SIZE = struct.Struct(">i")


class Link(Protocol):
    @property
    def closing(self) -> bool: ...

    async def send(self, parts: Sequence[bytes]) -> None:
        """Write ``parts`` in order, all of them."""

    async def read_exactly(self, count: int) -> bytes:
        """The next ``count`` bytes (stored as they arrive, never allocated ahead).

        :raises asyncio.IncompleteReadError: the upstream closed first.
        """

    async def pass_on(self, head: bytes, count: int, client: ClientWriter, edit: AnswerEdit | None = None) -> None:
        """Write ``head`` (bytes of the answer already read), then move the next ``count`` bytes to ``client`` as
        they arrive; with ``edit``, walked and its last bytes rewritten (see the module docstring).

        :raises UpstreamProtocolError: the walk found the answer malformed.
        """

    def close(self) -> None: ...


async def open_link(host: str, port: int, tls: ssl.SSLContext | None) -> Link:
    """Connect to ``host:port``; over TLS when ``tls`` is given."""
    if tls is not None:
        return await StreamLink.connect(host, port, tls)
    loop = asyncio.get_running_loop()
    infos = await resolve(host, port)
    failure: OSError = OSError(f"no address for {host}")
    for family, kind, proto, _, address in infos:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as asyncio's transports do
            await loop.sock_connect(sock, address)
        except OSError as e:
            sock.close()
            failure = e
            continue
        except BaseException:  # cancelled (the caller's timeout, a stopping watch): the socket is not handed on
            sock.close()
            raise
        return SocketLink(sock)
    raise failure


class SocketLink:
    """A plain TCP socket read and written with the loop's socket calls (see the module docstring)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._loop = asyncio.get_running_loop()
        self._pipe = splice.Pipe()

    @property
    def closing(self) -> bool:
        return self._sock.fileno() < 0

    async def send(self, parts: Sequence[bytes]) -> None:
        try:
            sent = self._sock.sendmsg(parts)  # one call, no joined copy of a large request
        except BlockingIOError:
            sent = 0
        for part in parts:
            if sent >= len(part):
                sent -= len(part)
                continue
            await self._loop.sock_sendall(self._sock, memoryview(part)[sent:])
            sent = 0

    async def read_exactly(self, count: int) -> bytes:
        return await gather(functools.partial(self._loop.sock_recv, self._sock), count)

    async def pass_on(self, head: bytes, count: int, client: ClientWriter, edit: AnswerEdit | None = None) -> None:
        if count <= SPLICE_FROM or (edit is not None and edit.held):  # a small answer (a Produce's): read whole
            body = await self.read_exactly(count)
            client.write(head + body if edit is None else await edited_frame(edit, head, body))  # one write
            await drain(client)
            return
        target = _spliceable(client)
        if target is None:
            await self._copy(head, count, client, edit)
            return
        duplicate = os.dup(target)  # the loop will not watch a descriptor its transport owns; a duplicate it will
        try:
            if edit is None:
                await splice.splice_exactly(self._sock, duplicate, count, self._pipe, prefix=head)
            else:
                await self._splice_walked(head, count, duplicate, client, edit)
        finally:
            os.close(duplicate)

    async def _splice_walked(
        self, head: bytes, count: int, target: int, client: ClientWriter, edit: AnswerEdit
    ) -> None:
        """The splice path of an edited answer: structure peeked, spliced on with the records after it; the last
        bytes read, rewritten and written through the client's transport (empty: everything spliced is out)."""
        walk, prefix, left = edit.walk(count), head, count
        step = walk.step(b"")
        while True:
            kind, seen, more = step
            if kind == NEED:
                step = walk.step(await splice.peek(self._sock, seen, min(left, max(seen, LOOK_AHEAD))))
            elif kind == PASS:
                await splice.splice_exactly(self._sock, target, seen + more, self._pipe, prefix=prefix)
                prefix, left = b"", left - seen - more
                step = walk.step(b"")
            else:
                last = await self.read_exactly(seen + more)
                client.write(prefix + last[:seen] + await edit.tail(last[seen:]))
                await drain(client)
                return

    async def _copy(self, head: bytes, count: int, client: ClientWriter, edit: AnswerEdit | None) -> None:
        read = functools.partial(self._loop.sock_recv, self._sock)
        if edit is None:
            await copy_through(read, head, count, client)
        else:
            await copy_walked(read, head, count, client, edit)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()
        self._pipe.close()


class _Receiver(asyncio.BufferedProtocol):
    """The protocol under a ``StreamLink``: bytes arrive into one buffer of ``STREAM_BUFFER`` bytes (TLS decrypts
    into it), taken out by ``read``; the transport pauses while less than ``_MIN_ROOM`` is free, and writes wait in
    ``drain`` while the transport's buffer is above its high-water mark.

    Cost: one copy of each byte out of the buffer (``read``), and now and then a move of what is left to the
    buffer's front (at most ``STREAM_BUFFER`` bytes, when less than ``_MIN_ROOM`` is free at its end)."""

    def __init__(self) -> None:
        self._buffer = bytearray(STREAM_BUFFER)
        self._view = memoryview(self._buffer)
        self._start = self._end = 0  # what arrived and is not yet read: ``_buffer[_start:_end]``
        self._loop = asyncio.get_running_loop()
        self._arrived: asyncio.Future[None] | None = None  # a read waiting for bytes
        self._drained: list[asyncio.Future[None]] = []  # sends waiting for the transport's buffer
        self._paused = False  # reading paused: the buffer is full
        self._writing_paused = False
        self._eof = False
        self._error: BaseException | None = None
        self.transport: asyncio.Transport | None = None

    # ------------------------------------------------------------------------------------- asyncio's side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        pending = self._end - self._start
        if len(self._buffer) - self._end < _MIN_ROOM and self._start:  # room at the end is short: to the front
            if pending <= self._start:  # no overlap: moved in place
                self._buffer[:pending] = self._view[self._start : self._end]
            else:
                self._buffer[:pending] = bytes(self._view[self._start : self._end])
            self._start, self._end = 0, pending
        return self._view[self._end :]  # never empty: reading pauses below ``_MIN_ROOM`` (buffer_updated)

    def buffer_updated(self, nbytes: int) -> None:
        self._end += nbytes
        if len(self._buffer) - (self._end - self._start) < _MIN_ROOM and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        self._error = exc
        self._wake()
        self._release()  # the sends find the transport closing

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._release()

    def _release(self) -> None:
        drained, self._drained = self._drained, []
        for waiter in drained:
            if not waiter.done():
                waiter.set_result(None)

    def _wake(self) -> None:
        arrived, self._arrived = self._arrived, None
        if arrived is not None and not arrived.done():
            arrived.set_result(None)

    # ------------------------------------------------------------------------------------- the link's side

    @property
    def buffered(self) -> int:
        """Bytes arrived and not yet read (at most ``STREAM_BUFFER``)."""
        return self._end - self._start

    async def read(self, most: int) -> bytes:
        """Up to ``most`` bytes, at least one; b"" at the end of the stream.

        :raises ConnectionError, ssl.SSLError: the connection failed."""
        while self._start == self._end:
            if self._error is not None:
                raise self._error
            if self._eof:
                return b""
            self._arrived = self._loop.create_future()
            await self._arrived
        end = min(self._end, self._start + most)
        data = bytes(self._view[self._start : end])
        self._start = end
        if self._start == self._end:
            self._start = self._end = 0
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return data

    async def read_exactly(self, count: int) -> bytes:
        """:raises asyncio.IncompleteReadError: the stream ended first."""
        return await gather(self.read, count)

    async def drain(self) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            if self._error is not None:
                raise self._error
            raise ConnectionResetError("the upstream connection is closed")
        if self._writing_paused:
            waiter = self._loop.create_future()
            self._drained.append(waiter)
            await waiter


class StreamLink:
    """A TLS connection to the upstream (see the module docstring), over ``_Receiver``."""

    def __init__(self, transport: asyncio.Transport, receiver: _Receiver) -> None:
        self._transport, self._receiver = transport, receiver

    @classmethod
    async def connect(cls, host: str, port: int, tls: ssl.SSLContext | None) -> StreamLink:
        """Connect (TLS with ``tls``, the host name checked as ``tls`` says; plain TCP without, for tests)."""
        loop = asyncio.get_running_loop()
        transport, receiver = await loop.create_connection(
            _Receiver, host, port, ssl=tls, server_hostname=host if tls is not None else None
        )
        return cls(transport, receiver)

    @property
    def closing(self) -> bool:
        return self._transport.is_closing()

    async def send(self, parts: Sequence[bytes]) -> None:
        self._transport.writelines(parts)
        await self._receiver.drain()

    async def read_exactly(self, count: int) -> bytes:
        return await self._receiver.read_exactly(count)

    async def pass_on(self, head: bytes, count: int, client: ClientWriter, edit: AnswerEdit | None = None) -> None:
        if edit is None:
            await copy_through(self._receiver.read, head, count, client)
        else:
            await pass_on_edited(self._receiver.read, head, count, client, edit)

    def close(self) -> None:
        """Abort, not TLS's graceful close: that waits (up to 30 s) for the broker's close_notify on a socket the
        proxy is done with, and a loop stopped meanwhile leaves the socket open. Nothing queued matters any more."""
        with contextlib.suppress(Exception):
            self._transport.abort()


async def gather(read: Callable[[int], Awaitable[bytes]], count: int) -> bytes:
    """Exactly ``count`` bytes from ``read`` (each call asks for what is left, at most ``RELAY_CHUNK``), stored as
    they arrive, never allocated ahead; one read's bytes as they are when they are all.

    :raises asyncio.IncompleteReadError: ``read`` ended first.
    """
    parts: list[bytes] = []
    left = count
    while left:
        chunk = await read(min(left, RELAY_CHUNK))
        if not chunk:
            raise asyncio.IncompleteReadError(b"".join(parts), count)
        parts.append(chunk)
        left -= len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


async def copy_through(read: Callable[[int], Awaitable[bytes]], head: bytes, count: int, client: ClientWriter) -> None:
    """Write ``head``, then copy ``count`` bytes from ``read`` (at most ``RELAY_CHUNK`` at a time) as they come.

    :raises asyncio.IncompleteReadError: ``read`` ended first.
    """
    client.write(head)
    remaining = count
    while remaining:
        chunk = await read(min(remaining, RELAY_CHUNK))
        if not chunk:
            raise asyncio.IncompleteReadError(b"", remaining)
        client.write(chunk)
        remaining -= len(chunk)
        await drain(client)


async def pass_on_edited(
    read: Callable[[int], Awaitable[bytes]], head: bytes, count: int, client: ClientWriter, edit: AnswerEdit
) -> None:
    """An edited answer copied from ``read``: held whole and written at once when the edit holds it, else walked as
    it passes (``copy_walked``).

    :raises asyncio.IncompleteReadError: ``read`` ended first.
    :raises UpstreamProtocolError: the walk found the answer malformed.
    """
    if not edit.held:
        await copy_walked(read, head, count, client, edit)
        return
    client.write(await edited_frame(edit, head, await _read_to(read, b"", count, count)))
    await drain(client)


async def copy_walked(
    read: Callable[[int], Awaitable[bytes]], head: bytes, count: int, client: ClientWriter, edit: AnswerEdit
) -> None:
    """``copy_through`` of an edited answer: the walk looks at the bytes as they pass (read ahead by at most
    ``LOOK_AHEAD`` beyond what it asks); what it passes opaque is copied in chunks as ``copy_through`` does.

    :raises asyncio.IncompleteReadError: ``read`` ended first.
    :raises UpstreamProtocolError: the walk found the answer malformed.
    """
    client.write(head)
    walk, window, left = edit.walk(count), b"", count  # left: not yet passed on
    step = walk.step(window)
    while True:
        kind, seen, more = step
        if kind == NEED:
            window = await _read_to(read, window, seen, min(left, max(seen, LOOK_AHEAD)))
            step = walk.step(window)
        elif kind == PASS:
            moved = seen + more
            if moved <= len(window):
                client.write(window[:moved])
                window = window[moved:]
            else:
                client.write(window)
                await copy_through(read, b"", moved - len(window), client)
                window = b""
            left -= moved
            await drain(client)
            step = walk.step(window)
        else:
            window = await _read_to(read, window, left, left)
            client.write(window[:seen] + await edit.tail(window[seen:]))
            await drain(client)
            return


async def _read_to(read: Callable[[int], Awaitable[bytes]], window: bytes, least: int, most: int) -> bytes:
    """``window`` with bytes from ``read`` added until it holds at least ``least`` (each read asks for what would
    bring it to ``most``).

    :raises asyncio.IncompleteReadError: ``read`` ended first.
    """
    while len(window) < least:
        chunk = await read(most - len(window))
        if not chunk:
            raise asyncio.IncompleteReadError(window, least)
        window += chunk
    return window


async def edited_frame(edit: AnswerEdit, head: bytes, body: bytes) -> bytes:
    """``head`` (the frame's size and the correlation id) and ``body`` (the ``count`` bytes after them) of an answer
    held whole, as passed on: ``body`` edited, the size that of what it became (a held edit may change it).

    :raises UpstreamProtocolError: the walk found the answer malformed.
    """
    rewritten = await edited(edit, body)
    if len(rewritten) != len(body):  # the size counts the correlation id (``head[4:]``) and the body
        head = _SIZE.pack(len(head) - _SIZE.size + len(rewritten)) + head[4:]
    return head + rewritten


async def edited(edit: AnswerEdit, body: bytes) -> bytes:
    """An answer's ``count`` bytes after its correlation id, held whole, walked and its last bytes rewritten.

    :raises UpstreamProtocolError: the walk found the answer malformed.
    """
    walk, view, at = edit.walk(len(body)), memoryview(body), 0
    step = walk.step(body)  # the whole answer: bytes index faster than a view; the view slices without copies
    while True:
        kind, seen, more = step
        if kind == PASS:
            at += seen + more
            step = walk.step(view[at:])
        elif kind == NEED:  # a walk given every byte there is asks for more only by mistake
            raise UpstreamProtocolError(f"an answer walk asked for {seen} bytes of the {len(body) - at} left")
        elif not more:  # a held edit's walk found nothing to rewrite (``walks``)
            return body
        else:
            return body[: at + seen] + await edit.tail(body[at + seen :])


async def drain(client: ClientWriter) -> None:
    """``client.drain()``, a failure said to be the client's (``ClientGone``): the client's writer fails only when
    the client's connection does.

    :raises ClientGone: the client's connection failed."""
    try:
        await client.drain()
    except ConnectionError as e:
        raise ClientGone(f"writing to the client failed: {e.__class__.__name__}: {e}") from e


def _spliceable(client: ClientWriter) -> int | None:
    """The client's socket descriptor when bytes may be spliced into it now: a plain socket (no TLS) whose
    transport has nothing queued (what it queued must go first), and splice available; else None.

    :raises ClientGone: the client's transport is closing."""
    if not splice.available() or not isinstance(client, asyncio.StreamWriter):
        return None
    if client.get_extra_info("sslcontext") is not None or client.transport.get_write_buffer_size():
        return None
    if client.transport.is_closing():  # its socket may be closed already (a reset seen): the client is gone
        raise ClientGone("the client's connection is closing")
    sock = client.get_extra_info("socket")
    return None if sock is None else int(sock.fileno())
