"""Reading a Fetch v16+ answer the proxy rewrote, with kio.

The proxy pads rewritten ``node_endpoints`` with an unknown top-level tagged field (or blanks the field into one),
which Kafka's clients skip (Java keeps it as an unknown tag, librdkafka skips it) but kio's reader refuses.
``readable`` drops those fields — checking first that they hold nothing but zeros — so kio can read the rest.
"""

from __future__ import annotations

import socket

import pytest

from kafkaguard.protocol.varint import uvarint, uvarint_bytes
from kafkaguard.proxy import splice
from kafkaguard.proxy.fetch_walk import FetchAnswerWalk
from kafkaguard.proxy.walks import PASS, TAIL

ENDPOINTS_TAG = 0


def tail_at(payload: bytes, version: int) -> int:
    """Where the top-level tagged section of a Fetch v16+ response payload (correlation id first) begins."""
    body = memoryview(payload)[4:]
    walk, at = FetchAnswerWalk(len(body), version), 0
    step = walk.step(body)
    while step[0] == PASS:
        at += step[1] + step[2]
        step = walk.step(body[at:])
    assert step[0] == TAIL
    return 4 + at + step[1]


def tags_of(section: bytes) -> list[tuple[int, bytes]]:
    """(tag, value) of a tagged-field section that fills ``section``."""
    count, at = uvarint(section, 0)
    tags = []
    for _ in range(count):
        tag, at = uvarint(section, at)
        size, at = uvarint(section, at)
        tags.append((tag, section[at : at + size]))
        at += size
    assert at == len(section)
    return tags


def readable(payload: bytes, version: int) -> bytes:
    """``payload`` without its unknown top-level tagged fields, each of which must be zeros (filler or blanked)."""
    start = tail_at(payload, version)
    tags = tags_of(payload[start:])
    kept = [(tag, value) for tag, value in tags if tag == ENDPOINTS_TAG]
    for tag, value in tags:
        assert tag == ENDPOINTS_TAG or value == bytes(len(value)), f"unknown tag {tag} holds more than zeros"
    section = uvarint_bytes(len(kept)) + b"".join(uvarint_bytes(t) + uvarint_bytes(len(v)) + v for t, v in kept)
    return payload[:start] + section


def counted_peeks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """``splice.peek`` spied on for the test: the list fills with the bytes each peek waited for."""
    peeks: list[int] = []
    real_peek = splice.peek

    async def counting(sock: socket.socket, wanted: int, most: int) -> bytes:
        peeks.append(wanted)
        return await real_peek(sock, wanted, most)

    monkeypatch.setattr(splice, "peek", counting)
    return peeks
