"""Kafka's unsigned varints (the counts and lengths of flexible versions, and tagged fields): the one reader and
the one writer.

Each caller states its own failure: a request header (``header``: ``HeaderError``), a request body's length check
(``lengths``: ``LengthError``, bounded by the end of the field it is in) and an upstream answer's walk (``walks``:
"it ends inside a field", ``UpstreamProtocolError``). So the reader raises what every one of them can tell apart
at no cost: ``IndexError`` past the end of the bytes, ``VarintTooLong`` beyond 5 bytes.

Worked example — ``b"\\x81\\xde\\xa0\\xcb\\x05"`` (1,500,000,001): 0x01 + 0x5e << 7 + 0x20 << 14 + 0x4b << 21 +
0x05 << 28; ``uvarint(b"\\x81\\xde\\xa0\\xcb\\x05", 0) == (1_500_000_001, 5)``.

Cost model: a value below 128 — nearly every count, length and tag — is one index and one comparison; each further
byte a shift and an or. The reader runs in the walks' hot loops (every element of a relayed Fetch or Produce
answer's structure) and in every request's length check, so it has no bound argument of its own: a caller bounded
inside the bytes (``lengths``) compares the offset it returns.
"""

from __future__ import annotations

from kafkaguard.protocol.errors import TaggedFieldsError, VarintTooLong

_TOO_LONG = "a varint longer than 5 bytes"


def uvarint(p: bytes | bytearray | memoryview, at: int) -> tuple[int, int]:
    """The unsigned varint at ``at`` and the offset after it.

    :raises IndexError: it runs past the end of ``p``.
    :raises VarintTooLong: it is longer than 5 bytes.
    """
    byte = p[at]
    if byte < 0x80:
        return byte, at + 1
    value, shift = byte & 0x7F, 7
    while True:
        at += 1
        byte = p[at]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at + 1
        shift += 7
        if shift > 28:
            raise VarintTooLong(_TOO_LONG)


def skip_tagged_fields(p: bytes | bytearray | memoryview, at: int, end: int, most: int) -> int:
    """The offset after the tagged-field section at ``at`` (a count, then per field a tag, a size and that many
    bytes), which must end by ``end``. The fields are skipped unread: what a request's reader does with fields it
    does not know (a request header, a walked Produce request).

    :raises TaggedFieldsError: more than ``most`` fields, or a field running past ``end``.
    :raises IndexError, VarintTooLong: as ``uvarint``.
    """
    count, at = uvarint(p, at)
    if count > most:
        raise TaggedFieldsError(f"{count} tagged fields in one section")
    for _ in range(count):
        _tag, at = uvarint(p, at)
        size, at = uvarint(p, at)
        at += size
        if at > end:
            raise TaggedFieldsError("a tagged field runs past its end")
    return at


def uvarint_bytes(value: int) -> bytes:
    """``value`` (≥ 0) as an unsigned varint: what ``uvarint`` reads. For bodies encoded by hand as bytes
    (``apis.acl_encoding``, ``proxy.fetch_walk``); kio's ``write_unsigned_varint`` writes to a buffer instead."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
