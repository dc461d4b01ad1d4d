"""One relayed answer in flight, from the upstream back to the client: the way back of the proxy's fast path, as a
named step with its state in view.

A request whose answer passes through (``ProxyScope.relay``: an allowed Produce, Fetch, group request …) is sent
upstream at once; what is left of it is an ``AnswerRelay`` — as aiokafka's connection keeps one entry per request in
flight — holding the upstream connection it went up on, its correlation id, the edit its answer gets on the way
(``walks.AnswerEdit``: Fetch v16+ and Produce v10+ rewrite ``node_endpoints``) and the writer it passes through (a
quota's metering writer). The connection's outbox calls ``pass_on`` in the request's turn (``protocol.outbox``), so
a stack trace of the way back reads as its steps::

    Outbox._pass_answers_on → AnswerRelay.pass_on → UpstreamConnection.pass_answer_on → SocketLink.pass_on → …

and a relay prints as what it is waiting for::

    AnswerRelay(correlation_id=7, upstream=kafka-1.internal:9092, edit=AnswerEdit(FetchAnswerWalk, _proxied_tail),
                through=_Charge.relay.<locals>.metering)

Cost: one small object per relayed request (four slots, as the partials it replaces held), nothing per byte.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from kafkaguard.protocol.replies import ClientWriter
from kafkaguard.proxy.upstream import Upstream
from kafkaguard.proxy.walks import AnswerEdit

#: What a relay's answer passes through on its way to the client: a writer made of the client's (``through``).
Through = Callable[[ClientWriter], ClientWriter]


class AnswerRelay:
    """The answer to the request sent upstream on ``upstream`` with ``correlation_id``, to be passed on to the client
    with ``edit`` (None: unchanged) through the writer ``through`` makes of the client's (None: the client's own).
    A ``protocol.replies.RelayedAnswer``."""

    __slots__ = ("correlation_id", "edit", "through", "upstream")

    def __init__(
        self, upstream: Upstream, correlation_id: int, edit: AnswerEdit | None = None, through: Through | None = None
    ) -> None:
        self.upstream = upstream
        self.correlation_id = correlation_id
        self.edit = edit
        self.through = through

    async def pass_on(self, client: ClientWriter) -> None:
        """Pass the answer on to ``client`` as it arrives (``Upstream.pass_answer_on``).

        :raises UpstreamUnavailable: the upstream failed (the client may then hold part of an answer: its connection
            must close).
        """
        through = self.through
        writer = client if through is None else through(client)
        await self.upstream.pass_answer_on(self.correlation_id, writer, self.edit)

    def __repr__(self) -> str:
        parts = [f"correlation_id={self.correlation_id}", f"upstream={self.upstream.address}"]
        if self.edit is not None:
            parts.append(f"edit=AnswerEdit({named(self.edit.walk)}, {named(self.edit.tail)})")
        if self.through is not None:
            parts.append(f"through={named(self.through)}")
        return f"AnswerRelay({', '.join(parts)})"


def named(step: Callable[..., object]) -> str:
    """What a callable is called where it is defined (a partial's function's): a relay's steps by name."""
    while isinstance(step, functools.partial):
        step = step.func
    return str(getattr(step, "__qualname__", type(step).__qualname__))
