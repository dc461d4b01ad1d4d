"""The connection's one writer (``protocol.outbox``) without sockets: order, the limit, failures, stopping."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from kafkaguard.protocol.outbox import Outbox, OutboxClosed
from kafkaguard.protocol.replies import ClientWriter


class Writer:
    def __init__(self) -> None:
        self.data: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.data.append(data)

    async def drain(self) -> None:
        await asyncio.sleep(0)


class Closing:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1


class Answer:
    """A ``RelayedAnswer`` whose passing on is ``pass_on``."""

    def __init__(self, pass_on: Callable[[ClientWriter], Awaitable[None]]) -> None:
        self._pass_on = pass_on

    async def pass_on(self, client: ClientWriter) -> None:
        await self._pass_on(client)


def answer(data: bytes, gate: asyncio.Event | None = None) -> Answer:
    async def pass_on(client: ClientWriter) -> None:
        if gate is not None:
            await gate.wait()
        client.write(data)
        await client.drain()

    return Answer(pass_on)


def failing(error: Exception) -> Answer:
    async def pass_on(client: ClientWriter) -> None:
        client.write(b"part of an answer")
        raise error

    return Answer(pass_on)


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_an_answer_with_nothing_queued_is_written_at_once_with_no_queue_or_task() -> None:
    async def scenario() -> None:
        writer = Writer()
        outbox = Outbox(writer, limit=5, close=Closing(), peer="p")
        await outbox.send(b"a")
        await outbox.send(b"b")
        assert writer.data == [b"a", b"b"]
        assert outbox._queue is None and outbox._task is None  # what a server connection never pays for
        await outbox.stop()

    run(scenario)


def test_answers_go_out_in_the_order_they_came_whoever_made_them() -> None:
    async def scenario() -> None:
        writer, gate = Writer(), asyncio.Event()
        outbox = Outbox(writer, limit=5, close=Closing(), peer="p")
        outbox.relay(answer(b"relayed 1", gate))
        outbox.relay(answer(b"relayed 2"))
        own = asyncio.create_task(outbox.send(b"own 3"))
        await asyncio.sleep(0.01)
        assert writer.data == [] and not own.done()  # the first relayed answer has not arrived: nothing may pass it
        gate.set()
        await own
        assert writer.data == [b"relayed 1", b"relayed 2", b"own 3"]
        await outbox.stop()

    run(scenario)


def test_room_waits_while_the_limit_of_answers_is_queued() -> None:
    async def scenario() -> None:
        writer, gate = Writer(), asyncio.Event()
        outbox = Outbox(writer, limit=2, close=Closing(), peer="p")
        outbox.relay(answer(b"1", gate))
        await asyncio.wait_for(outbox.room(), 1)  # one queued: room for another
        outbox.relay(answer(b"2"))
        waiting = asyncio.create_task(outbox.room())
        await asyncio.sleep(0.01)
        assert not waiting.done()
        gate.set()
        await asyncio.wait_for(waiting, 1)
        await outbox.flushed()
        assert writer.data == [b"1", b"2"]
        await outbox.stop()

    run(scenario)


@pytest.mark.parametrize("error", [ConnectionResetError("reset"), RuntimeError("a bug")], ids=["expected", "bug"])
def test_a_failed_relay_closes_the_socket_once_and_every_later_write_raises(error: Exception) -> None:
    async def scenario() -> None:
        writer, closing = Writer(), Closing()
        outbox = Outbox(writer, limit=5, close=closing, peer="p")
        outbox.relay(failing(error))
        outbox.relay(answer(b"never"))
        with pytest.raises(OutboxClosed, match="passing an answer on failed"):
            await outbox.flushed()
        assert closing.calls == 1
        assert writer.data == [b"part of an answer"]  # the answer after it was dropped
        with pytest.raises(OutboxClosed):
            await outbox.send(b"own")
        with pytest.raises(OutboxClosed):
            outbox.relay(answer(b"more"))
        await outbox.room()  # nobody is left waiting
        await outbox.stop()

    run(scenario)


def test_stop_cancels_an_answer_being_passed_on_and_releases_waiters() -> None:
    async def scenario() -> None:
        outbox = Outbox(Writer(), limit=1, close=Closing(), peer="p")
        outbox.relay(answer(b"never", asyncio.Event()))
        waiting = asyncio.create_task(outbox.room())
        await asyncio.sleep(0)
        await outbox.stop()
        await asyncio.wait_for(waiting, 1)
        assert outbox._task is None

    run(scenario)
