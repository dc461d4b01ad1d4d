"""Running until the process is told to stop: what every long-running command (``serve``, ``proxy``, ``console``,
and both with ``--http-listener``) waits on between its start and its clean shutdown.

Worked example: ``kafkaguard serve`` starts its listeners (``run_until_signalled(server)``), serves, and on SIGTERM
logs "shutting down" and stops them; a listener that cannot be bound stops what was started, and the error goes on.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Protocol

log = logging.getLogger(__name__)

#: The signals that end a service: ``kill``'s default and Ctrl-C.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM or SIGINT (their handlers on the running loop, replacing Python's KeyboardInterrupt
    for SIGINT, so that the caller's shutdown runs in the loop). Cost: two handlers, no task."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    return stop


async def until_signalled() -> None:
    """Return once the process gets SIGTERM or SIGINT."""
    await stop_on_signals().wait()
    log.info("shutting down")


class Service(Protocol):
    """What runs until signalled: a Kafka listener's server, the console."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


async def run_until_signalled(service: Service) -> None:
    """Start ``service``, wait for SIGTERM or SIGINT, then stop it; stopped too when its start fails part-way (what
    it started is undone) or the wait is cancelled. The handlers are in place before the start: a service listens
    before its start returns (the proxy then asks its cluster), and a SIGTERM in between killed the process
    without its clean shutdown (exit 143; seen stopping ``scripts/run-proxy`` right after its port opened)."""
    stop = stop_on_signals()
    try:
        await service.start()
        await stop.wait()
        log.info("shutting down")
    finally:
        await service.stop()
