"""``run_until_signalled`` through a drain: the first stop signal drains the service, a second during the drain
hurries it (and is logged), and the service is stopped after."""

from __future__ import annotations

import asyncio
import logging
import os
import signal

import pytest

from kafkaguard.node.signals import run_until_signalled


class Draining:
    """A service whose drain lasts until it is hurried."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.hurried = asyncio.Event()

    async def start(self) -> None:
        self.calls.append("start")

    async def drain(self) -> None:
        self.calls.append("drain")
        await asyncio.wait_for(self.hurried.wait(), 10)

    def hurry(self) -> None:
        self.calls.append("hurry")
        self.hurried.set()

    async def stop(self) -> None:
        self.calls.append("stop")


def test_a_second_stop_signal_hurries_the_drain(caplog: pytest.LogCaptureFixture) -> None:
    service = Draining()

    async def main() -> None:
        running = asyncio.create_task(run_until_signalled(service))
        await asyncio.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)
        while "drain" not in service.calls:
            await asyncio.sleep(0.01)
        assert not running.done()  # draining: only a second signal (or the drain's end) goes on
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.wait_for(running, 5)

    with caplog.at_level(logging.WARNING, logger="kafkaguard.node.signals"):
        asyncio.run(main())
    assert service.calls == ["start", "drain", "hurry", "stop"]
    assert "SIGINT again during the shutdown: stopping at once" in caplog.text
