"""Running until the process is told to stop: what every long-running command (``serve``, ``proxy``, ``console``,
and both with ``--http-listener``) waits on between its start and its clean shutdown.

Worked example: ``kafkaguard serve`` starts its listeners (``run_until_signalled(server)``), serves, and on SIGTERM
logs "shutting down" and drains them (``Service.drain``: /healthz turns 503, the listeners stop accepting, requests
in flight are answered, idle connections closed; at most ``shutdown_grace_seconds``), then stops what is left; a
second SIGTERM (or Ctrl-C) during the drain is logged and ends it at once (``Service.hurry``): what is still open is
closed, and the shutdown goes on (the audit trail is still flushed). A listener that cannot be bound stops what was
started, and the error goes on.

Cost model: two or three signal handlers on the loop, no task; a stop signal costs one event set (the first) or one
call (each later one).
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


class StopSignals:
    """SIGTERM and SIGINT on the running loop (their handlers replace Python's KeyboardInterrupt for SIGINT, so that
    the caller's shutdown runs in the loop): the first sets ``requested``; each later one is logged and calls
    ``hurry`` (set once the shutdown has begun: ``hurry_with``)."""

    def __init__(self) -> None:
        self.requested = asyncio.Event()
        self._hurry: Callable[[], None] | None = None
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self._signalled, sig)

    def hurry_with(self, hurry: Callable[[], None]) -> None:
        """What a stop signal after the first calls: the shutdown under way is to end at once."""
        self._hurry = hurry

    def _signalled(self, sig: signal.Signals) -> None:
        if not self.requested.is_set():
            self.requested.set()
            return
        log.warning("%s again during the shutdown: stopping at once (what is still open is closed)", sig.name)
        if self._hurry is not None:
            self._hurry()


def stop_on_signals(on_hangup: Callable[[], None] | None = None) -> StopSignals:
    """The stop signals' handlers (``StopSignals``); ``on_hangup`` is called on the loop at each SIGHUP (without it
    SIGHUP keeps its default: the process ends)."""
    signals = StopSignals()
    if on_hangup is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, on_hangup)
    return signals


def _forget_hangup(on_hangup: Callable[[], None] | None) -> None:
    if on_hangup is not None:
        asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)


async def until_signalled(on_hangup: Callable[[], None] | None = None) -> None:
    """Return once the process gets SIGTERM or SIGINT (``on_hangup`` at each SIGHUP meanwhile)."""
    try:
        await stop_on_signals(on_hangup).requested.wait()
    finally:
        _forget_hangup(on_hangup)
    log.info("shutting down")


class Service(Protocol):
    """What runs until signalled: a Kafka listener's server, the console, both."""

    async def start(self) -> None: ...

    async def drain(self) -> None:
        """The graceful part of the shutdown, within the service's ``shutdown_grace_seconds``: take nothing new,
        finish what is in flight."""

    def hurry(self) -> None:
        """End a drain under way at once (a second stop signal)."""

    async def stop(self) -> None:
        """Release everything (after ``drain``, or instead of it: a failed start, a cancelled wait)."""


async def run_until_signalled(service: Service, *, on_hangup: Callable[[], None] | None = None) -> None:
    """Start ``service``, wait for SIGTERM or SIGINT (``on_hangup`` at each SIGHUP), drain it, then stop it; stopped
    too (undrained) when its start fails part-way (what it started is undone) or the wait is cancelled. The handlers
    are in place before the start: a service listens before its start returns (the proxy then asks its cluster), and
    a SIGTERM or SIGHUP in between ended the process with the signal's default, without its clean shutdown (exit 143;
    seen stopping ``scripts/run-proxy`` right after its port opened). They stay in place through the drain: a second
    stop signal hurries it (``Service.hurry``)."""
    signals = stop_on_signals(on_hangup)
    try:
        await service.start()
        await signals.requested.wait()
        log.info("shutting down")
        signals.hurry_with(service.hurry)
        await service.drain()
    finally:
        _forget_hangup(on_hangup)
        await service.stop()
