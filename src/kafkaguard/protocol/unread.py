"""How many bytes a client has sent that its connection has not read yet: what a drain asks of every open
connection (``Connection.drain``) to tell a connection between requests from one whose next request is arriving.

Two places hold them: the stream reader's buffer (read from the socket, not yet consumed by a frame) and the
kernel's receive queue (``FIONREAD``). On a TLS connection the kernel's bytes are records, so the count is high by
their framing (a few dozen bytes a record): a drain then serves one request more, or waits for a request that never
comes until it checks again (``Connection.drain``, called again by the drain's sweep).

Cost model: one ``ioctl`` per call (about a microsecond), and a length; called once per connection per drain sweep,
never on the request path.
"""

from __future__ import annotations

import array
import asyncio
import fcntl
import termios


def buffered_bytes(reader: asyncio.StreamReader) -> int:
    """Bytes read from the socket that no read of ``reader`` has consumed yet. asyncio has no public way to ask; its
    buffer has been the reader's ``_buffer``, a bytearray, since asyncio began (3.4 to 3.13): a reader without one
    counts as holding nothing."""
    buffer = getattr(reader, "_buffer", None)
    return len(buffer) if isinstance(buffer, bytearray) else 0


def kernel_bytes(writer: asyncio.StreamWriter) -> int:
    """Bytes in the kernel's receive queue of ``writer``'s socket (0 when it has none, or is closed)."""
    return _queue_ioctl(writer, termios.FIONREAD)


def unacknowledged_bytes(writer: asyncio.StreamWriter) -> int:
    """Bytes written to ``writer``'s socket that the client's TCP has not acknowledged yet (Linux's SIOCOUTQ; its
    FIN counts one): once 0, closing the socket cannot cut off an answer, whatever the client sends after."""
    return _queue_ioctl(writer, termios.TIOCOUTQ)


def _queue_ioctl(writer: asyncio.StreamWriter, request: int) -> int:
    sock = writer.get_extra_info("socket")
    if sock is None:
        return 0
    count = array.array("i", [0])
    try:
        fcntl.ioctl(sock.fileno(), request, count, True)
    except (OSError, ValueError):  # closed (fileno -1) or gone
        return 0
    return int(count[0])


def unread_bytes(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> int:
    """Bytes the client sent that nothing has read yet (``buffered_bytes`` + ``kernel_bytes``)."""
    return buffered_bytes(reader) + kernel_bytes(writer)
