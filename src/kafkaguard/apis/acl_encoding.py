"""The DescribeAcls response body (v1–v3), encoded by hand.

Written by hand because it must be fast: a DescribeAcls of 10k ACLs through kio's generic entity writer spent tens of
milliseconds building and type-checking 10k objects, and the resulting garbage pushed p99 further
(benchmarks/bench_server.py; see docs/benchmarks.md, "Figures from the code"). The format is small and fixed
(DescribeAclsResponse.json); tests check these bytes decode with kio to exactly what the kio-built response holds, for
every version.

v1 (classic): throttle int32, error int16, message nullable string (int16 length), resources int32 count of
[type int8, name string, pattern int8, acls int32 count of [principal string, host string, op int8, perm int8]].
v2+ (flexible): compact strings and arrays (unsigned varint length + 1) and an empty tagged-field section (one
zero byte) after every struct.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from kafkaguard.model import ResourcePattern, StoredAcl
from kafkaguard.protocol.codec import PreEncoded
from kafkaguard.protocol.varint import uvarint_bytes

_HEAD = struct.Struct(">ih")


def encode_describe_acls(version: int, resources: Sequence[tuple[ResourcePattern, Sequence[StoredAcl]]]) -> PreEncoded:
    """A successful response (error 0, an empty message, as Kafka sends it) listing ``resources`` with their ACLs."""
    flexible = version >= 2
    cache: dict[str, bytes] = {}

    def string(text: str) -> bytes:
        encoded = cache.get(text)
        if encoded is None:
            raw = text.encode("utf-8")
            encoded = uvarint_bytes(len(raw) + 1) + raw if flexible else struct.pack(">h", len(raw)) + raw
            cache[text] = encoded
        return encoded

    def count(n: int) -> bytes:
        return uvarint_bytes(n + 1) if flexible else struct.pack(">i", n)

    tags = b"\x00" if flexible else b""
    out = bytearray(_HEAD.pack(0, 0))
    out += b"\x01" if flexible else b"\x00\x00"  # "": Kafka never sets the message of a successful answer
    out += count(len(resources))
    for pattern, acls in resources:
        out.append(pattern.resource_type.code)
        out += string(pattern.name)
        out.append(pattern.pattern_type.code)
        out += count(len(acls))
        for acl in acls:
            entry = acl.binding.entry
            out += string(entry.principal)
            out += string(entry.host)
            out.append(entry.operation.code)
            out.append(entry.permission_type.code)
            out += tags
        out += tags
    out += tags
    return PreEncoded(bytes(out))
