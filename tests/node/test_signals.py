"""``node.signals.until_signalled``: a service runs until SIGTERM or SIGINT, then its caller shuts it down."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from kafkaguard.node.signals import STOP_SIGNALS, run_until_signalled, until_signalled


@pytest.mark.parametrize("sig", STOP_SIGNALS)
def test_returns_once_the_process_is_signalled(sig: signal.Signals) -> None:
    async def main() -> bool:
        waiting = asyncio.create_task(until_signalled())
        await asyncio.sleep(0.05)
        assert not waiting.done()  # nothing but the signal ends the wait
        os.kill(os.getpid(), sig)  # handled by the loop: no KeyboardInterrupt, no termination
        await asyncio.wait_for(waiting, 5)
        return waiting.done()

    assert asyncio.run(main())  # the loop's close removes its handlers: the test process keeps Python's own


class Recorded:
    """A service that records what was done to it (``fail``: its start raises after starting part of it)."""

    def __init__(self, *, fail: bool = False) -> None:
        self.calls: list[str] = []
        self.fail = fail

    async def start(self) -> None:
        self.calls.append("start")
        if self.fail:
            raise OSError("address in use")

    async def drain(self) -> None:
        self.calls.append("drain")

    def hurry(self) -> None:
        self.calls.append("hurry")

    async def stop(self) -> None:
        self.calls.append("stop")


def test_a_service_runs_until_signalled_then_stops() -> None:
    service = Recorded()

    async def main() -> None:
        running = asyncio.create_task(run_until_signalled(service))
        await asyncio.sleep(0.05)
        assert service.calls == ["start"]
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(running, 5)

    asyncio.run(main())
    assert service.calls == ["start", "drain", "stop"]


def test_a_service_whose_start_fails_is_stopped_and_the_error_goes_on() -> None:
    service = Recorded(fail=True)
    with pytest.raises(OSError, match="address in use"):
        asyncio.run(run_until_signalled(service))
    assert service.calls == ["start", "stop"]
