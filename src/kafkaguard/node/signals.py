"""Running until the process is told to stop: what every long-running command (``serve``, ``proxy``, ``console``,
and both with ``--http-listener``) waits on between its start and its clean shutdown."""

from __future__ import annotations

import asyncio
import logging
import signal

log = logging.getLogger(__name__)

#: The signals that end a service: ``kill``'s default and Ctrl-C.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


async def until_signalled() -> None:
    """Return once the process gets SIGTERM or SIGINT (their handlers on the running loop, replacing Python's
    KeyboardInterrupt for SIGINT, so that the caller's shutdown runs in the loop). Cost: two handlers, no task."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down")
