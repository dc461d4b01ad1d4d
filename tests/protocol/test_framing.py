"""Framing: sizes are checked before anything is buffered; a clean close between frames is not an error."""

from __future__ import annotations

import asyncio
import struct

import pytest

from kafkaguard.protocol.errors import FrameError, FrameTooLargeError
from kafkaguard.protocol.framing import encode_frame, read_frame


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


def test_a_frame_above_its_apis_limit_is_refused_after_its_api_key():
    """Before login the limit depends on the API (``prelogin``): it is known from the first two bytes, so a 512 KiB
    ApiVersions frame is refused after 6 bytes and nothing else of it is awaited or buffered."""

    async def scenario() -> FrameTooLargeError:
        reader = reader_with(struct.pack(">ih", 512 * 1024, 18), eof=False)
        with pytest.raises(FrameTooLargeError) as refused:
            await asyncio.wait_for(read_frame(reader, 16 * 1024 * 1024, limit_for_api=lambda key: 1024), timeout=5)
        return refused.value

    refused = asyncio.run(scenario())
    assert (refused.size, refused.limit, refused.api_key) == (512 * 1024, 1024, 18)
    assert "for API key 18 exceeds its limit of 1024 bytes before login" in str(refused)


def test_a_frame_within_its_apis_limit_is_read_whole():
    limits = {18: 8, 36: 64}
    data = encode_frame(b"\x00\x12" + b"x" * 6) + encode_frame(b"\x00\x24" + b"y" * 40) + encode_frame(b"\x01")

    async def scenario() -> list[bytes]:
        reader = reader_with(data)
        return [await read_frame(reader, 1024, limit_for_api=limits.__getitem__) for _ in range(3)]  # type: ignore[misc]

    assert asyncio.run(scenario()) == [b"\x00\x12" + b"x" * 6, b"\x00\x24" + b"y" * 40, b"\x01"]


def test_a_stream_ending_inside_a_keyed_frame_says_how_much_came():
    async def scenario() -> None:
        reader = reader_with(struct.pack(">ih", 10, 18) + b"ab")
        await read_frame(reader, 1024, limit_for_api=lambda key: 100)

    with pytest.raises(FrameError, match="after 4 of 10 frame bytes"):
        asyncio.run(scenario())
