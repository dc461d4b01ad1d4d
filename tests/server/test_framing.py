"""Framing: sizes are checked before anything is buffered; a clean close between frames is not an error."""

from __future__ import annotations

import asyncio
import struct

import pytest

from kafkaguard.server.errors import FrameError
from kafkaguard.server.framing import encode_frame, read_frame


def reader_with(data: bytes, eof: bool = True) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    if eof:
        reader.feed_eof()
    return reader


async def frames(data: bytes, limit: int = 1024) -> list[bytes]:
    reader = reader_with(data)
    out = []
    while (frame := await read_frame(reader, limit)) is not None:
        out.append(frame)
    return out


def test_round_trip_of_several_frames():
    payloads = [b"", b"a", b"xyz" * 100]
    data = b"".join(encode_frame(p) for p in payloads)
    assert asyncio.run(frames(data)) == payloads


def test_clean_close_between_frames_is_end_of_stream():
    assert asyncio.run(frames(b"")) == []


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (struct.pack(">i", 2000) + b"x", "exceeds the limit of 1024"),
        (struct.pack(">i", -1), "negative frame size"),
        (b"\x00\x00", "inside a frame's length prefix"),
        (struct.pack(">i", 10) + b"abc", "after 3 of 10 frame bytes"),
    ],
)
def test_bad_frames_raise_frame_error(data: bytes, message: str):
    with pytest.raises(FrameError, match=message):
        asyncio.run(frames(data))


def test_oversized_frame_is_refused_before_its_body_arrives():
    """The limit is checked on the length prefix: the body never needs to be sent (or buffered)."""

    async def scenario() -> None:
        reader = reader_with(struct.pack(">i", 10_000_000), eof=False)
        with pytest.raises(FrameError):
            await asyncio.wait_for(read_frame(reader, 1024), timeout=5)

    asyncio.run(scenario())
