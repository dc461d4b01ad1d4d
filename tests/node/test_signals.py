"""``node.signals.until_signalled``: a service runs until SIGTERM or SIGINT, then its caller shuts it down."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from kafkaguard.node.signals import STOP_SIGNALS, until_signalled


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
