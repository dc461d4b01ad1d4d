"""What a dispatcher answers a request with: a closed set, so that the connection handles every kind and no other.

* a **response** (a kio response entity, or ``PreEncoded`` bytes of one): encoded with the request's header and sent
  after every answer before it;
* ``Relayed``: an answer made elsewhere (the proxy's upstream) and passed on as it arrives, in its turn (a
  ``RelayedAnswer``: the proxy's ``relay.AnswerRelay``);
* ``Throttled``: a response (or none) after which the client is muted until the throttle ends (KIP-219);
* ``NO_RESPONSE``: the request gets no answer (a Produce with acks=0);
* ``Close``: the connection ends, for the reason given (logged, never sent).

The connection's ``Outbox`` is the one writer of a client socket: responses and relayed answers go out through it in
request order (``protocol.outbox``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

from kio.static.protocol import Entity

from kafkaguard.protocol.codec import PreEncoded


class ClientWriter(Protocol):
    """Where an answer is written: the client connection's ``asyncio.StreamWriter``, or a writer standing for it (the
    proxy's metering writer, a test's)."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


class NoResponse:
    """The type of ``NO_RESPONSE`` (one instance)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_RESPONSE"


#: A request that gets no answer (Produce with acks=0), or whose answer was already passed on.
NO_RESPONSE: Final = NoResponse()


class RelayedAnswer(Protocol):
    """One answer in flight from elsewhere, with what it needs to pass on (the proxy's ``relay.AnswerRelay``: the
    upstream connection, the correlation id, the edit, the writer it passes through)."""

    async def pass_on(self, client: ClientWriter) -> None:
        """Write the answer to ``client`` as it arrives."""
        ...


@dataclass(frozen=True, slots=True)
class Relayed:
    """An answer passed on as it arrives: ``answer.pass_on(client)`` writes it to ``client`` when the answers before
    it are out (it may take a while: a Fetch answer of tens of MiB is streamed, never held whole)."""

    answer: RelayedAnswer


@dataclass(frozen=True, slots=True)
class Throttled:
    """``reply`` sent at once, then the client muted — its next request not read — until ``mute_until_ms`` on
    ``clock`` (the clock of whoever charged the quota: the throttle starts when it is charged, as Kafka's does)."""

    reply: Response | NoResponse
    mute_until_ms: int
    clock: Callable[[], int]

    def mute_left_ms(self) -> int:
        return self.mute_until_ms - self.clock()


@dataclass(frozen=True, slots=True)
class Close:
    """End the connection; ``reason`` is logged (the client is told nothing, as Kafka's broker closes it)."""

    reason: str


#: A response entity of the request's API and version, or its bytes already encoded.
Response = Entity | PreEncoded

#: Everything a dispatcher may answer.
Reply = Response | Relayed | Throttled | NoResponse | Close
