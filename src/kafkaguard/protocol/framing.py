"""Kafka's length-prefixed framing: a 4-byte big-endian size, then that many bytes.

Every frame is size-checked before a byte of it is buffered, so a peer cannot make the server allocate more than
the configured limit (Kafka's ``socket.request.max.bytes``, 100 MiB by default; far less before authentication).

Before login the limit depends on the API (``prelogin``): ApiVersions is tens of bytes, a SCRAM token a few hundred.
``read_frame`` with ``limit_for_api`` reads the frame's first two bytes (the API key of its header) and checks the
size against that API's limit before buffering the rest. Example: a 512 KiB ApiVersions frame before login is
refused after 6 bytes, its 4-byte size and its 2-byte API key: nothing else of it is read.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable

from kafkaguard.protocol.errors import FrameError, FrameTooLargeError

_SIZE = struct.Struct(">i")
_API_KEY = struct.Struct(">h")

#: Kafka's default socket.request.max.bytes.
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024
#: The default limit of a SASL token frame before login (``Settings.max_unauthenticated_request_bytes``; smaller
#: still for the other APIs, see ``prelogin``).
UNAUTHENTICATED_MAX_FRAME_BYTES = 16 * 1024


async def read_frame(
    reader: asyncio.StreamReader, max_bytes: int, *, limit_for_api: Callable[[int], int] | None = None
) -> bytes | None:
    """The next frame's payload, or None at a clean end of stream (the peer closed between frames). With
    ``limit_for_api``, the size is also checked against ``limit_for_api(api key)`` once the first two bytes are read,
    before the rest is.

    :raises FrameTooLargeError: a length above ``max_bytes`` or above the API's limit.
    :raises FrameError: a negative length, or a stream that ends inside a frame.
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
        raise FrameTooLargeError(f"frame of {size} bytes exceeds the limit of {max_bytes} bytes", size, max_bytes)
    key = b""
    try:
        if limit_for_api is not None and size >= _API_KEY.size:
            key = await reader.readexactly(_API_KEY.size)
            (api_key,) = _API_KEY.unpack(key)
            limit = limit_for_api(api_key)
            if size > limit:
                message = f"frame of {size} bytes for API key {api_key} exceeds its limit of {limit} bytes before login"
                raise FrameTooLargeError(message, size, limit, api_key)
            return key + await reader.readexactly(size - len(key))  # a copy of at most a pre-login limit
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError as e:
        got = len(key) + len(e.partial)
        raise FrameError(f"connection closed after {got} of {size} frame bytes") from e


def encode_frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload
