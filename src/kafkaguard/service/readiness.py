"""Whether this process takes new work: ready from its start, draining from its shutdown's first step for good.

A balancer asks ``/healthz`` (the console, same process): 200 while ready, 503 with ``"status": "draining"`` once
a SIGTERM started the drain (``node.drain``), so that it sends no new connection here while the open ones finish.
One per process (``Services.readiness``), shared by the Kafka listeners and the console.

Cost model: one attribute read per health check; nothing on the request path.
"""

from __future__ import annotations

import time


class Readiness:
    __slots__ = ("_draining_since",)

    def __init__(self) -> None:
        self._draining_since: float | None = None

    @property
    def draining(self) -> bool:
        """Whether the drain has begun (it never ends: the process exits after it)."""
        return self._draining_since is not None

    @property
    def draining_for(self) -> float | None:
        """Seconds since the drain began (None: not draining)."""
        since = self._draining_since
        return None if since is None else time.monotonic() - since

    def drain(self) -> bool:
        """Stop being ready; True the first time (the caller then says so in the log)."""
        if self._draining_since is not None:
            return False
        self._draining_since = time.monotonic()
        return True
