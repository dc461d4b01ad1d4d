"""Running until the process is told to stop: what every long-running command (``serve``, ``proxy``, ``console``,
and both with ``--http-listener``) waits on between its start and its clean shutdown.

Worked example: ``kafkaguard serve`` starts its listeners (``run_until_signalled(server)``), serves, and on SIGTERM
logs "shutting down" and stops them; a listener that cannot be bound stops what was started, and the error goes on.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger(__name__)

#: The signals that end a service: ``kill``'s default and Ctrl-C.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def stop_on_signals(on_hangup: Callable[[], None] | None = None) -> asyncio.Event:
    """An event set by SIGTERM or SIGINT (their handlers on the running loop, replacing Python's KeyboardInterrupt
    for SIGINT, so that the caller's shutdown runs in the loop); ``on_hangup`` is called on the loop at each SIGHUP
    (without it SIGHUP keeps its default: the process ends). Cost: up to three handlers, no task."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    if on_hangup is not None:
        loop.add_signal_handler(signal.SIGHUP, on_hangup)
    return stop


def _forget_hangup(on_hangup: Callable[[], None] | None) -> None:
    if on_hangup is not None:
        asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)


async def until_signalled(on_hangup: Callable[[], None] | None = None) -> None:
    """Return once the process gets SIGTERM or SIGINT (``on_hangup`` at each SIGHUP meanwhile)."""
    try:
        await stop_on_signals(on_hangup).wait()
    finally:
        _forget_hangup(on_hangup)
    log.info("shutting down")


class Service(Protocol):
    """What runs until signalled: a Kafka listener's server, the console."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


async def run_until_signalled(service: Service, *, on_hangup: Callable[[], None] | None = None) -> None:
    """Start ``service``, wait for SIGTERM or SIGINT (``on_hangup`` at each SIGHUP), then stop it; stopped too when
    its start fails part-way (what it started is undone) or the wait is cancelled. The handlers are in place before
    the start: a service listens before its start returns (the proxy then asks its cluster), and a SIGTERM or SIGHUP
    in between ended the process with the signal's default, without its clean shutdown (exit 143; seen stopping
    ``scripts/run-proxy`` right after its port opened)."""
    stop = stop_on_signals(on_hangup)
    try:
        await service.start()
        await stop.wait()
        log.info("shutting down")
    finally:
        _forget_hangup(on_hangup)
        await service.stop()
