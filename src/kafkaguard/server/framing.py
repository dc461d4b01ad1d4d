"""Kafka's length-prefixed framing: a 4-byte big-endian size, then that many bytes.

Every frame is size-checked before a byte of it is buffered, so a peer cannot make the server allocate more than
the configured limit (Kafka's ``socket.request.max.bytes``, 100 MiB by default; far less before authentication).
"""

from __future__ import annotations

import asyncio
import struct

from kafkaguard.server.errors import FrameError

_SIZE = struct.Struct(">i")

#: Kafka's default socket.request.max.bytes.
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024
#: The limit before a SASL listener has authenticated the peer.
UNAUTHENTICATED_MAX_FRAME_BYTES = 512 * 1024


async def read_frame(reader: asyncio.StreamReader, max_bytes: int) -> bytes | None:
    """The next frame's payload, or None at a clean end of stream (the peer closed between frames).

    :raises FrameError: a negative or oversized length, or a stream that ends inside a frame.
    """
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError as e:
        if not e.partial:
            return None
        raise FrameError("connection closed inside a frame's length prefix") from e
    (size,) = _SIZE.unpack(head)
    if size < 0:
        raise FrameError(f"negative frame size {size}")
    if size > max_bytes:
        raise FrameError(f"frame of {size} bytes exceeds the limit of {max_bytes} bytes")
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError as e:
        raise FrameError(f"connection closed after {len(e.partial)} of {size} frame bytes") from e


def encode_frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload
