"""The contract between a relayed answer's walk (I/O-free: ``fetch_walk``, ``produce_walk``) and the relay that
drives it (``links``): an answer passed on as it arrives, its structure looked at on the way and its last bytes
rewritten in place.

A walk answers ``step(window)`` (``window``: bytes of the answer from the first one not yet passed on) with a
``Step`` ``(kind, a, b)``:

* ``(NEED, n, 0)``: call again with a window of at least ``n`` bytes (never past the answer's end);
* ``(PASS, k, m)``: pass on ``k`` bytes the walk has seen and ``m`` it need not see, unchanged; call again with what
  is left of the window after them;
* ``(TAIL, k, n)``: the answer's last ``k + n`` bytes: pass on ``k``, then the ``n`` that ``AnswerEdit.tail``
  rewrites (to the same length: the frame's size went out first). Done.

An edit that is ``held`` (``AnswerEdit.held``: Produce's) holds the answer whole before any byte of it passes on —
for answers small by nature, never for records — so its tail may be rewritten to any length (the frame's size is
written after it, ``links.edited_frame``), and its walk may answer ``(TAIL, k, 0)``: nothing to rewrite (``tail``
is not called).

A walk raises ``UpstreamProtocolError`` for an answer that does not fit its layout.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import NamedTuple, Protocol

from kafkaguard.proxy.wire import UpstreamProtocolError

NEED, PASS, TAIL = 0, 1, 2
Step = tuple[int, int, int]


class AnswerWalk(Protocol):
    def step(self, window: bytes | memoryview) -> Step: ...


class AnswerEdit(NamedTuple):
    """How one relayed answer is walked (``walk(count)``: a walk of the ``count`` bytes after the correlation id)
    and its last bytes rewritten (``tail``); ``held``: the answer is held whole first (see the module docstring).

    A named tuple, not a frozen dataclass: one is made per edited request, and a frozen dataclass's ``__init__``
    (``object.__setattr__`` per field) costs several times a tuple's."""

    walk: Callable[[int], AnswerWalk]
    tail: Callable[[bytes], Awaitable[bytes]]
    held: bool = False


class Malformed(UpstreamProtocolError):
    """A length or count that does not fit the answer a walk reads. The walk turns it into an
    ``UpstreamProtocolError`` that names the API and version; one that escaped would close the same way."""
