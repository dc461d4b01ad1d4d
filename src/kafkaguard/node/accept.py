"""Accepting TCP connections: admission before anything is read, and a connection that has sent nothing held as a
bare file descriptor.

Worked example (one listener, a SASL listener's 10 s login deadline)::

    doorway = await Doorway.open("127.0.0.1", 9092, wait_limit=10.0, admit=..., hand_over=..., gone=...)
    # a client connects from 10.0.0.7:     admit("10.0.0.7") -> True; its fd waits, nothing is read
    # its ClientHello or ApiVersions arrives: hand_over(socket, "10.0.0.7", accepted_at) -> the server's task
    # another connects and sends nothing:  10 s later gone("10.0.0.7", expired=True), and its fd is closed
    # another connects and closes at once: gone("10.0.0.7", expired=False); nothing was built for it
    doorway.close()                        # listening sockets closed; every waiting fd closed, gone(...) for each
    doorway.close(serve_arrived=True)      # a drain's: the kernel's queue accepted first, fds with bytes handed over

**Why a connection waits as a bare fd, not an asyncio transport.** The cost that matters is CPython's cyclic garbage
collector: a full collection walks every live container object, and the server cannot answer anyone meanwhile. A
connection served by asyncio streams and a task holds ~43 such objects (transport, selector key, handles, reader,
writer, protocol, the task, its coroutines and futures), so thousands of idle connections make every full collection a
pause every client waits through (``bench_abuse``'s idle flood; see docs/benchmarks.md, "Figures from the code"). A
waiting connection here is one ``(address, accepted_at, serial)`` tuple of atomic values, which the collector stops
tracking after its first pass, in a dict and a deque, and its selector key (four ints): a full collection walks next to
nothing of it. The fds wait in a selector of their own whose fd the event loop watches, so one readiness callback serves
them all, and none of them is read here: the first bytes (a TLS ClientHello, a first request) stay in the kernel for the
transport built at the handover.

Cost model: accept O(1) (a selector registration); a handover O(1) plus the transport's construction; expiry O(1) per
expired connection (deadlines are monotonic in accept order, ``wait_limit`` being one per doorway).

Written by hand because asyncio's ``create_server`` builds a transport and a protocol for every accepted socket
before anyone can decide about it.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import logging
import selectors
import socket
import ssl
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

#: Connections the kernel queues before they are accepted (capped by net.core.somaxconn). asyncio's default, 100,
#: overflowed under a flood of connections from 16 addresses: the kernel then drops SYNs, and a real client's connect
#: waited for its 1 s retransmit (``bench_abuse``: logins from another address took that long).
LISTEN_BACKLOG = 4096
#: Work per callback before the loop serves others: connections accepted (asyncio accepts ``backlog`` at a time;
#: under a flood of refused connections 128 at a time held the loop too long), readiness events taken, waiting fds
#: expired.
_ACCEPT_BATCH = 16
_READY_BATCH = 64
_EXPIRE_BATCH = 64
#: After running out of file descriptors (EMFILE, ENFILE) or memory, accepting pauses this long (asyncio's value).
_ACCEPT_RETRY_DELAY = 1.0
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})

#: ``admit(address)``: keep the connection (True) or not (False: it is closed unread; the caller counted the refusal).
Admit = Callable[[str], bool]
#: ``hand_over(sock, address, accepted_at)``: the connection has bytes to read (or an error to report); the callee
#: owns ``sock`` from here. ``accepted_at`` is ``time.monotonic()`` at the accept.
HandOver = Callable[[socket.socket, str, float], None]
#: ``gone(address, expired)``: a kept connection ended while waiting: it sent nothing for ``wait_limit`` seconds
#: (expired), or its peer closed it, or the doorway closed.
Gone = Callable[[str, bool], None]


def _bind(host: str | None, port: int, reuse_port: bool = False) -> list[socket.socket]:
    """Listening sockets for ``host:port`` as asyncio's ``create_server`` binds them (every address the host name
    resolves to; None or "": every interface), except that port 0 gets one port for all of them. With
    ``reuse_port`` (``node.workers``: several processes serve the port) each is bound with SO_REUSEPORT, and the
    kernel spreads the connections over the processes' sockets."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if reuse_port:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)  # the IPv4 socket takes IPv4
            if port == 0 and len(sockets) > 1:
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            sock.bind(address)
            sock.listen(LISTEN_BACKLOG)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _sent_anything(sock: socket.socket) -> bool | None:
    """Whether the peer has sent bytes (True), closed or reset the connection (False), or neither yet (None);
    nothing is read."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
    except (BlockingIOError, InterruptedError):
        return None
    except OSError:
        return False


class Doorway:
    """One listener's listening sockets and the connections accepted on them that have not sent a byte yet."""

    def __init__(
        self, sockets: list[socket.socket], *, wait_limit: float, admit: Admit, hand_over: HandOver, gone: Gone
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._sockets = sockets
        self._wait_limit = wait_limit
        self._admit = admit
        self._hand_over = hand_over
        self._gone = gone
        self._waiting_fds = selectors.DefaultSelector()
        #: fd -> (address, accepted_at, serial): atomic values only, so the garbage collector untracks each tuple.
        self._waiting: dict[int, tuple[str, float, int]] = {}
        #: (deadline, fd, serial) in accept order; an entry whose fd was handed over (or reused) is skipped.
        self._deadlines: collections.deque[tuple[float, int, int]] = collections.deque()
        self._serial = 0
        self._expiry: asyncio.Handle | None = None
        self._closed = False
        for sock in sockets:
            self._loop.add_reader(sock.fileno(), self._accept, sock)
        self._loop.add_reader(self._waiting_fds.fileno(), self._on_ready)

    @classmethod
    async def open(
        cls,
        host: str | None,
        port: int,
        *,
        wait_limit: float,
        admit: Admit,
        hand_over: HandOver,
        gone: Gone,
        reuse_port: bool = False,
    ) -> Doorway:
        """Listen on ``host:port`` (None: every interface; port 0: any free port; ``reuse_port``: shared with other
        processes, SO_REUSEPORT).

        :raises OSError: the address cannot be bound.
        """
        loop = asyncio.get_running_loop()
        sockets = await loop.run_in_executor(None, _bind, host, port, reuse_port)  # getaddrinfo may block
        return cls(sockets, wait_limit=wait_limit, admit=admit, hand_over=hand_over, gone=gone)

    @property
    def port(self) -> int:
        return int(self._sockets[0].getsockname()[1])

    @property
    def waiting(self) -> int:
        """Connections accepted and kept that have sent nothing yet."""
        return len(self._waiting)

    def close(self, *, serve_arrived: bool = False) -> None:
        """Stop accepting and close every waiting connection (``gone(address, False)`` for each). With
        ``serve_arrived`` (a drain), the connections the kernel has queued are accepted first (their clients see
        them connected), and a waiting one whose first bytes have arrived is handed over instead of closed: a request
        sent before the listener closed is answered. Cost: at most the listen backlog's accepts, and one peek per
        waiting connection, once."""
        if self._closed:
            return
        if serve_arrived:
            for sock in self._sockets:
                while self._accept(sock):
                    pass
        self._closed = True
        for sock in self._sockets:
            self._loop.remove_reader(sock.fileno())
            sock.close()
        self._loop.remove_reader(self._waiting_fds.fileno())
        if self._expiry is not None:
            self._expiry.cancel()
        for fd in list(self._waiting):
            if serve_arrived and self._hand_over_if_sent(fd):
                continue
            self._drop(fd, expired=False)
        self._waiting_fds.close()
        self._deadlines.clear()

    # ----------------------------------------------------------------------------------------------- internals

    def _accept(self, listening: socket.socket) -> bool:
        """Accept a batch; True when the batch ran out before the kernel's queue did."""
        for _ in range(_ACCEPT_BATCH):
            try:
                sock, peer = listening.accept()
            except (BlockingIOError, InterruptedError):
                return False
            except ConnectionAbortedError:
                continue  # the peer gave up while queued
            except OSError as e:
                if e.errno not in _OUT_OF_RESOURCES:
                    raise
                log.error("cannot accept connections (%s): pausing for %g s", e.strerror, _ACCEPT_RETRY_DELAY)
                self._loop.remove_reader(listening.fileno())
                self._loop.call_later(_ACCEPT_RETRY_DELAY, self._resume_accepting, listening)
                return False
            address = str(peer[0]) if isinstance(peer, tuple) else "unknown"
            if not self._admit(address):
                sock.close()
                continue
            accepted_at = time.monotonic()
            # Under load the client's first request is usually here already: no wait, no selector round trip.
            sent = _sent_anything(sock)
            if sent is not None:
                self._dispatch(sock, sent, address, accepted_at)
                continue
            fd = sock.detach()  # from here a bare fd: no socket object lives while it waits
            self._serial += 1
            self._waiting[fd] = (address, accepted_at, self._serial)
            self._deadlines.append((accepted_at + self._wait_limit, fd, self._serial))
            self._waiting_fds.register(fd, selectors.EVENT_READ)
            if self._expiry is None:
                self._expiry = self._loop.call_at(self._loop.time() + self._wait_limit, self._expire)
        return True

    def _resume_accepting(self, listening: socket.socket) -> None:
        if not self._closed:
            self._loop.add_reader(listening.fileno(), self._accept, listening)

    def _on_ready(self) -> None:
        self._forget_handed_over()
        for key, _ in self._waiting_fds.select(0)[:_READY_BATCH]:
            fd = key.fd
            address, accepted_at, _serial = self._waiting.pop(fd)
            self._waiting_fds.unregister(fd)
            sock = socket.socket(fileno=fd)
            # a spurious wakeup (None) is handed over too: the transport waits for the bytes
            self._dispatch(sock, _sent_anything(sock) is not False, address, accepted_at)

    def _hand_over_if_sent(self, fd: int) -> bool:
        """Hand a waiting connection over if its first bytes have arrived (True); else leave it waiting."""
        sock = socket.socket(fileno=fd)
        if _sent_anything(sock) is not True:
            sock.detach()  # still waiting: the fd stays the doorway's
            return False
        address, accepted_at, _serial = self._waiting.pop(fd)
        self._waiting_fds.unregister(fd)
        self._hand_over(sock, address, accepted_at)
        return True

    def _dispatch(self, sock: socket.socket, sent: bool, address: str, accepted_at: float) -> None:
        if sent:
            self._hand_over(sock, address, accepted_at)
        else:
            sock.close()
            self._gone(address, False)

    def _forget_handed_over(self) -> None:
        """Drop the deadlines at the head of the queue whose connections are no longer waiting (handed over or
        gone; the fd may be another connection's by now): real clients send at once, so the queue stays short."""
        deadlines, waiting = self._deadlines, self._waiting
        while deadlines:
            _, fd, serial = deadlines[0]
            entry = waiting.get(fd)
            if entry is not None and entry[2] == serial:
                return
            deadlines.popleft()

    def _expire(self) -> None:
        self._expiry = None
        now = time.monotonic()
        deadlines = self._deadlines
        for _ in range(_EXPIRE_BATCH):
            self._forget_handed_over()
            if not deadlines:
                return
            deadline, fd, _ = deadlines[0]
            if deadline > now:
                self._expiry = self._loop.call_at(self._loop.time() + (deadline - now), self._expire)
                return
            deadlines.popleft()
            self._drop(fd, expired=True)
        self._expiry = self._loop.call_soon(self._expire)  # more are due: after the others waiting for the loop

    def _drop(self, fd: int, *, expired: bool) -> None:
        address = self._waiting.pop(fd)[0]
        self._waiting_fds.unregister(fd)
        socket.socket(fileno=fd).close()
        self._gone(address, expired)


async def open_streams(
    sock: socket.socket, tls: ssl.SSLContext | None, *, limit: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A handed-over connection's streams (``limit``: the reader's buffer limit), after the TLS handshake when
    ``tls`` is given. Bound the handshake with the caller's timeout; the caller closes ``sock`` if this fails.

    :raises OSError: the TLS handshake failed (``ssl.SSLError``) or the peer went away.
    """
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit, loop=loop)
    protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
    # no handshake timeout of asyncio's own (60 s): the caller's deadline is the login's
    transport, _ = await loop.connect_accepted_socket(lambda: protocol, sock, ssl=tls)
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)
