"""Request bodies whose first length field is hostile, built from kio's schema classes for any API and version.

For a request schema, the fixed-size fields before its first length-carrying field (array, string, bytes) are
written as zeros (a nested struct is entered, a nullable one with its not-null marker), then that field's length
or count is replaced by a hostile value in the field's own encoding: compact (unsigned varint of value + 1) in
flexible versions, int32 for legacy arrays and bytes, int16 for legacy strings.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

from kafkaguard.protocol.lengths import FIXED_SIZES, unwrap

#: Counts and lengths no honest request of a few bytes can carry (the issue's list).
HOSTILE = (2**31 - 1, 2**32 - 2, 1_500_000_000, -2)


def uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def first_length(schema: type[Any]) -> tuple[bytes, str] | None:
    """(bytes before the first length field, its encoding: "compact", "int32" or "int16"), or None if the body
    has no length field before its end."""
    flexible = bool(schema.__flexible__)
    prefix = bytearray()
    for field in dataclasses.fields(schema):
        if "tag" in field.metadata:
            continue
        inner, is_array, optional = unwrap(field.type)
        if not is_array and dataclasses.is_dataclass(inner):
            if optional:
                prefix.append(1)  # KIP-893 not-null marker
            found = first_length(inner)  # type: ignore[arg-type]
            if found is not None:
                return bytes(prefix) + found[0], found[1]
            return None  # a struct without length fields: stop here, this is rare enough not to matter
        kafka_type = field.metadata.get("kafka_type")
        if not is_array and kafka_type in FIXED_SIZES:
            prefix.extend(bytes(FIXED_SIZES[kafka_type]))
            continue
        if flexible:
            return bytes(prefix), "compact"
        return bytes(prefix), "int16" if (kafka_type == "string" and not is_array) else "int32"
    return None


def encode_length(value: int, encoding: str) -> bytes:
    if encoding == "compact":
        return uvarint((value + 1) % 2**32)  # -2 wraps to 2**32 - 1, the largest 5-byte varint
    if encoding == "int16":
        return struct.pack(">h", max(min(value, 2**15 - 1), -(2**15)))
    return struct.pack(">i", value if -(2**31) <= value < 2**31 else value - 2**32)


def hostile_bodies(schema: type[Any]) -> list[tuple[str, bytes]]:
    """(label, body) pairs: each hostile first length, a count of 3 with nothing after it, and truncations."""
    found = first_length(schema)
    if found is None:
        return [("empty body", b"")]
    prefix, encoding = found
    bodies = [(f"{encoding} length {value}", prefix + encode_length(value, encoding)) for value in HOSTILE]
    bodies.append(("length 3, body ends", prefix + encode_length(3, encoding)))
    bodies.append(("body ends inside the length", prefix + encode_length(2**31 - 1, encoding)[:1]))
    if encoding == "compact":
        bodies.append(("varint of six bytes", prefix + b"\xff\xff\xff\xff\xff\x01"))
    if prefix:
        bodies.append(("body ends before the length", prefix[:-1]))
    return bodies
