"""Accepting a client's TCP connection before reading from it: admission first, then the TLS handshake and streams.

``asyncio.start_server(ssl=...)`` runs the TLS handshake before its callback sees the connection: a connection in its
handshake (up to 60 s) is counted by no limit, and one the limits then refuse has already cost the server the
handshake's public-key work. ``listen`` instead gives every accepted socket a protocol that reads nothing:
``on_accept(transport)`` is called at once, with the peer's address known and not one byte read, and either closes
the transport or keeps it; ``open_streams`` turns a kept one into a (reader, writer) pair — after the TLS handshake
on a TLS listener.

Why reading is paused from the first moment: the handover runs in the connection's task, whenever the loop gets to
it, and the TLS handshake runs on the untouched socket (``loop.start_tls``). Bytes read before the handover (the
client's ClientHello, or a first request) would go to a protocol that drops them, as they are lost with
``StreamWriter.start_tls`` called after a read, and the connection would hang (``tests/server/test_accept.py``).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from typing import cast

#: Connections the kernel queues before they are accepted (capped by net.core.somaxconn). asyncio's default, 100,
#: overflowed under a flood of connections from 16 addresses: the kernel then drops SYNs, and a real client's connect
#: waited for its 1 s retransmit (``bench_abuse``: logins from another address up to 1.0 s).
LISTEN_BACKLOG = 4096


class _Unread(asyncio.Protocol):
    """A just-accepted socket's protocol until ``open_streams`` replaces it: it pauses reading and hands over."""

    def __init__(self, on_accept: Callable[[asyncio.Transport], None]) -> None:
        self._on_accept = on_accept

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        accepted = cast(asyncio.Transport, transport)
        accepted.pause_reading()  # before the loop's first read of it (scheduled right after this call)
        self._on_accept(accepted)


async def listen(host: str | None, port: int, on_accept: Callable[[asyncio.Transport], None]) -> asyncio.Server:
    """Listen on ``host:port`` (None: every interface; port 0: any free port); ``on_accept`` decides about each
    accepted connection before anything is read from it. It must close the transport or pass it to
    ``open_streams``.

    :raises OSError: the address cannot be bound.
    """
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: _Unread(on_accept), host, port, backlog=LISTEN_BACKLOG)


async def open_streams(
    transport: asyncio.Transport, tls: ssl.SSLContext | None, *, limit: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A kept connection's streams (``limit``: the reader's buffer limit), after the TLS handshake when ``tls`` is
    given. Bound the handshake with the caller's timeout; a cancelled or failed one closes the transport.

    :raises OSError: the TLS handshake failed (``ssl.SSLError``) or the peer went away.
    """
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit, loop=loop)
    protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
    if tls is not None:
        upgraded = await loop.start_tls(transport, protocol, tls, server_side=True)  # it resumes reading
        if upgraded is None:
            raise ConnectionResetError("the connection ended during the TLS handshake")
        stream_transport = upgraded
    else:
        transport.set_protocol(protocol)
        stream_transport = transport
    protocol.connection_made(stream_transport)
    if tls is None:
        transport.resume_reading()
    return reader, asyncio.StreamWriter(stream_transport, protocol, reader, loop)
