"""The contract between a relayed answer's walk (I/O-free: ``fetch_walk``) and the relay that drives it (``links``):
an answer passed on as it arrives, its structure looked at on the way and its last bytes rewritten in place.

A walk answers ``step(window)`` (``window``: bytes of the answer from the first one not yet passed on) with a
``Step`` ``(kind, a, b)``:

* ``(NEED, n, 0)``: call again with a window of at least ``n`` bytes (never past the answer's end);
* ``(PASS, k, m)``: pass on ``k`` bytes the walk has seen and ``m`` it need not see, unchanged; call again with what
  is left of the window after them;
* ``(TAIL, k, n)``: the answer's last ``k + n`` bytes: pass on ``k``, then the ``n`` that ``AnswerEdit.tail``
  rewrites (to the same length: the frame's size went out first). Done.

A walk raises ``UpstreamProtocolError`` for an answer that does not fit its layout.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

NEED, PASS, TAIL = 0, 1, 2
Step = tuple[int, int, int]


class AnswerWalk(Protocol):
    def step(self, window: bytes | memoryview) -> Step: ...


@dataclass(frozen=True, slots=True)
class AnswerEdit:
    """How one relayed answer is walked (``walk(count)``: a walk of the ``count`` bytes after the correlation id)
    and its last bytes rewritten (``tail``)."""

    walk: Callable[[int], AnswerWalk]
    tail: Callable[[bytes], Awaitable[bytes]]


class Malformed(Exception):
    """A length or count that does not fit the answer a walk reads (the walk raises ``UpstreamProtocolError``)."""


def uvarint(p: bytes | memoryview, at: int) -> tuple[int, int]:
    """The unsigned varint at ``at`` and the offset after it; ``IndexError`` past the end of ``p`` (a walk's caller
    turns it into "it ends inside a field"), ``Malformed`` beyond 5 bytes. Written for the walks' hot loops: a
    count or length below 128, the common case, is one comparison."""
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
            raise Malformed("a varint longer than 5 bytes")
