"""The one writer of a client connection: answers go out in request order, whoever made them.

Kafka clients match answers to requests by correlation id but expect them in request order, as a broker sends them.
An answer the connection made itself is written at once when nothing is queued before it. A relayed answer (the
proxy's fast path: ``replies.Relayed``) arrives later, while the connection reads and authorizes the next request:
it is queued, and a task of the outbox's own — started with the first relayed answer, ended when the queue is
empty — passes the queued answers on in order. An answer made while relayed ones are queued waits for them.

Cost: an answer written at once costs a write and a drain, no task and no queue entry; a relayed answer costs one
queue entry, and a task per run of relayed answers (not per answer). At most ``limit`` relayed answers are queued:
``room()`` waits for one to go before the connection reads its next request, as a broker stops reading a channel
whose responses are outstanding.

A failure while passing an answer on closes the client's socket (the client may hold part of an answer; every
Kafka client treats a closed connection as a retriable broker failure): the connection's read then ends, and every
later write raises ``OutboxClosed``. Nothing else writes to the socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable

from kafkaguard.errors import KafkaguardError
from kafkaguard.protocol.replies import ClientWriter, RelayedAnswer

log = logging.getLogger(__name__)


class OutboxClosed(KafkaguardError):
    """Passing a relayed answer on failed, so the connection is ending; the message says why."""


class _Queue:
    """The relayed answers waiting, and the events that tell when they are out (made with the first relayed answer:
    a connection that never relays, as every connection of ``kafkaguard serve``, holds none of this)."""

    __slots__ = ("answers", "flushed", "room")

    def __init__(self) -> None:
        self.answers: deque[RelayedAnswer] = deque()
        #: Set while nothing is queued (every answer before now is out).
        self.flushed = asyncio.Event()
        self.flushed.set()
        #: Set while fewer than the limit are queued.
        self.room = asyncio.Event()
        self.room.set()

    def settle(self) -> None:
        """Nothing is passed on any more (the queue ran out, failed or was stopped): release every waiter."""
        self.answers.clear()
        self.flushed.set()
        self.room.set()


class Outbox:
    __slots__ = ("_close", "_failure", "_limit", "_peer", "_queue", "_task", "_writer")

    def __init__(self, writer: ClientWriter, *, limit: int, close: Callable[[], None], peer: str) -> None:
        """``writer`` is the client's socket; ``close`` closes it (on a failed relay); ``peer`` names the client in
        the log."""
        self._writer = writer
        self._limit = limit
        self._close = close
        self._peer = peer
        self._queue: _Queue | None = None
        self._task: asyncio.Task[None] | None = None
        self._failure: OutboxClosed | None = None

    async def send(self, data: bytes) -> None:
        """Write ``data`` after every answer queued before it.

        :raises OutboxClosed: a relayed answer before it failed.
        """
        if self._task is not None or self._failure is not None:
            await self.flushed()
        self._writer.write(data)
        await self._writer.drain()

    def relay(self, answer: RelayedAnswer) -> None:
        """Queue a relayed answer: ``answer.pass_on(writer)`` runs once the answers before it are out."""
        if self._failure is not None:
            raise self._failure
        queue = self._queue
        if queue is None:
            queue = self._queue = _Queue()
        queue.answers.append(answer)
        queue.flushed.clear()
        if len(queue.answers) >= self._limit:
            queue.room.clear()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._pass_answers_on(queue), name=f"answers to {self._peer}"
            )

    async def flushed(self) -> None:
        """Wait until every queued answer is out.

        :raises OutboxClosed: passing one on failed.
        """
        queue = self._queue
        if queue is not None and not queue.flushed.is_set():
            await queue.flushed.wait()
        if self._failure is not None:
            raise self._failure

    @property
    def full(self) -> bool:
        """Whether ``limit`` relayed answers are queued (``room()`` would wait)."""
        queue = self._queue
        return queue is not None and not queue.room.is_set()

    async def room(self) -> None:
        """Wait until fewer than ``limit`` relayed answers are queued."""
        queue = self._queue
        if queue is not None and not queue.room.is_set():
            await queue.room.wait()

    async def stop(self) -> None:
        """The connection is ending: stop passing answers on (and wait until the task has ended, so that nothing of
        it touches a socket its owner closes next)."""
        task = self._task
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._queue is not None:
            self._queue.settle()

    async def _pass_answers_on(self, queue: _Queue) -> None:
        answers = queue.answers
        try:
            while answers:
                await answers[0].pass_on(self._writer)
                answers.popleft()
                if len(answers) < self._limit:
                    queue.room.set()
        except (OSError, asyncio.IncompleteReadError, KafkaguardError) as e:
            self._fail(f"{e.__class__.__name__}: {e}")
        except Exception as e:  # never leave a waiter hanging: whatever went wrong ends this connection
            log.exception("passing an answer on to %s failed", self._peer)
            self._fail(e.__class__.__name__)
        finally:
            self._task = None
            queue.settle()

    def _fail(self, reason: str) -> None:
        self._failure = OutboxClosed(f"passing an answer on failed: {reason}")
        log.warning("closing connection from %s: %s", self._peer, self._failure)
        self._close()
