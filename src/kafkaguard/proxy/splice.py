"""Moving a relayed answer's bytes from the upstream socket to the client socket inside the kernel (Linux splice).

A relayed Fetch answer is tens of KiB to tens of MiB that the proxy never reads. Copied through Python, each byte
is received into a buffer, sliced out and sent again: three copies and a few Python objects per 256 KiB, which on a
machine shared with the broker and its clients is CPU taken from both (measured in ``benchmarks/bench_proxy.py``).
``splice(2)`` moves the bytes socket → pipe → socket without them entering the process, as Kafka's own broker sends a
log segment with ``sendfile``.

Cost model, for an answer of ``n`` bytes and a pipe of ``P`` bytes: about ``2 n / P`` splice calls plus one
event-loop wait whenever a socket is not ready; no allocation that grows with ``n``. Nothing here buffers more than
the pipe holds, so a client that stops reading stops the upstream reads too (TCP flow control does the rest), and
every wait is under the caller's timeout.

Both ends must be plain sockets (no TLS: encrypted bytes cannot be passed on unchanged). ``available()`` says whether
this platform has splice at all; the caller copies instead when it cannot be used.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import socket

from kafkaguard.proxy.wire import ClientGone

#: Asked for each pipe (Linux's default pipe-max-size); if refused (an unprivileged user over its pipe pages),
#: the pipe keeps its default 64 KiB, which only means more calls.
PIPE_BYTES = 1024 * 1024
_FLAGS = getattr(os, "SPLICE_F_MOVE", 0) | getattr(os, "SPLICE_F_NONBLOCK", 0)
#: Wake for the source when this much (or all that is left) has arrived, not for every segment.
LOW_WATER_BYTES = 256 * 1024
#: Into the client while more of the answer is still to come: TCP may then fill whole segments instead of pushing
#: each piece as it comes (as MSG_MORE).
_MORE = getattr(os, "SPLICE_F_MORE", 0)


def available() -> bool:
    return hasattr(os, "splice") and hasattr(fcntl, "F_SETPIPE_SZ")


class Pipe:
    """A kernel pipe for one connection's splices, made on first use and kept until ``close``."""

    def __init__(self) -> None:
        self._fds: tuple[int, int] | None = None
        self.capacity = 0

    def fds(self) -> tuple[int, int]:
        if self._fds is None:
            read_fd, write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                self.capacity = fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
            except OSError:
                self.capacity = fcntl.fcntl(write_fd, fcntl.F_GETPIPE_SZ)
            self._fds = read_fd, write_fd
        return self._fds

    def close(self) -> None:
        if self._fds is not None:
            for fd in self._fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._fds = None


async def splice_exactly(
    source_socket: socket.socket, target: int, count: int, pipe: Pipe, prefix: bytes = b""
) -> None:
    """Move exactly ``count`` bytes from ``source_socket`` to socket descriptor ``target`` (both non-blocking),
    after ``prefix`` (a few bytes already read, such as the answer's size and correlation id: they go into the pipe
    first, so the client gets them in the same segment as what follows, not in one of their own).

    ``target`` may be a duplicate of a descriptor an asyncio transport owns (the loop refuses to watch a transport's
    own descriptor); the caller guarantees nothing else writes to it meanwhile.

    :raises asyncio.IncompleteReadError: ``source`` ended before ``count`` bytes.
    :raises ClientGone: writing to ``target`` failed.
    :raises OSError: ``source`` failed.
    """
    loop = asyncio.get_running_loop()
    source = source_socket.fileno()
    pipe_read, pipe_write = pipe.fds()
    remaining, in_pipe = count, 0  # not yet read from source; read but not yet written to target
    if prefix:
        in_pipe = os.write(pipe_write, prefix)  # an empty pipe takes a few bytes whole
    low_water = 1  # the source's SO_RCVLOWAT: 1 is the kernel's default, which every other reader expects
    try:
        while remaining or in_pipe:
            moved = False
            if remaining and in_pipe < pipe.capacity:
                try:
                    n = os.splice(source, pipe_write, min(remaining, pipe.capacity - in_pipe), flags=_FLAGS)
                except BlockingIOError:
                    n = -1
                if n == 0:
                    raise asyncio.IncompleteReadError(b"", remaining)
                if n > 0:
                    remaining, in_pipe, moved = remaining - n, in_pipe + n, True
            if in_pipe:
                try:
                    n = os.splice(pipe_read, target, in_pipe, flags=_FLAGS | (_MORE if remaining else 0))
                except BlockingIOError:
                    n = 0
                except OSError as e:  # the target's side: the client went away, the source is fine
                    raise ClientGone(f"writing to the client failed: {e}") from e
                if n:
                    in_pipe, moved = in_pipe - n, True
            if moved:
                continue
            reading = remaining and in_pipe < pipe.capacity
            if reading and not in_pipe:
                # Nothing to write meanwhile: be woken when a good part of what is left has arrived, not for each
                # segment (each wake-up costs a loop turn; without this a 1 MiB answer took ~16).
                wanted = min(remaining, LOW_WATER_BYTES)
                if wanted != low_water:
                    source_socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, wanted)
                    low_water = wanted
            await _ready(loop, source if reading else None, target if in_pipe else None)
    finally:
        if low_water != 1:
            with contextlib.suppress(OSError):
                source_socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1)


async def peek(source_socket: socket.socket, wanted: int, most: int) -> bytes:
    """At least ``wanted`` and at most ``most`` of the bytes waiting on ``source_socket``, left there (``MSG_PEEK``):
    a relayed answer's structure is looked at, then spliced on with what follows it. Waits, woken once ``wanted``
    bytes have arrived (``SO_RCVLOWAT``), not per segment.

    :raises asyncio.IncompleteReadError: the source ended before ``wanted`` bytes.
    :raises OSError: the socket failed.
    """
    loop = asyncio.get_running_loop()
    low_water, seen = 1, -1
    try:
        while True:
            try:
                data = source_socket.recv(most, socket.MSG_PEEK)
            except BlockingIOError:
                data = None
            if data is not None:
                if len(data) >= wanted:
                    return data
                if not data:
                    raise asyncio.IncompleteReadError(data, wanted)
                if len(data) == seen:  # readable below the low-water mark without more: the end, or memory pressure
                    if _peer_closed(source_socket):
                        raise asyncio.IncompleteReadError(data, wanted)
                    await asyncio.sleep(_PRESSED_WAIT)  # Linux signals a squeezed buffer readable early: poll it
                    continue
                seen = len(data)
            if wanted != low_water:
                source_socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, wanted)
                low_water = wanted
            await _ready(loop, source_socket.fileno(), None)
    finally:
        if low_water != 1:
            with contextlib.suppress(OSError):
                source_socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1)


#: TCP states in which the peer has sent its FIN (Linux ``tcp_states.h``): TIME_WAIT, CLOSE, CLOSE_WAIT, LAST_ACK,
#: CLOSING.
_PEER_CLOSED = frozenset({6, 7, 8, 9, 11})
#: How long ``peek`` waits between looks while readiness is signalled below its low-water mark (not at the end: Linux
#: reports a socket readable early when its receive buffer is under pressure). Bounded by the caller's timeout.
_PRESSED_WAIT = 0.001


def _peer_closed(sock: socket.socket) -> bool:
    """Whether the peer has closed its side (``TCP_INFO``'s first byte is the connection's state)."""
    try:
        return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] in _PEER_CLOSED
    except OSError:
        return True


async def _ready(loop: asyncio.AbstractEventLoop, readable: int | None, writable: int | None) -> None:
    """Wait until ``readable`` can be read or ``writable`` written (whichever comes first)."""
    waiter = loop.create_future()

    def wake() -> None:
        if not waiter.done():
            waiter.set_result(None)

    if readable is not None:
        loop.add_reader(readable, wake)
    if writable is not None:
        loop.add_writer(writable, wake)
    try:
        await waiter
    finally:
        if readable is not None:
            loop.remove_reader(readable)
        if writable is not None:
            loop.remove_writer(writable)
