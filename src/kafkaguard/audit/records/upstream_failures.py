"""The proxy's failed upstream connections, counted by reason, for ``/metrics``.

``proxy.upstream`` counts each failed dial of an upstream broker (every address tried that did not answer) and each
upstream connection that failed while in use; the console exports them as
``kafkaguard_upstream_failures_total{reason}``. A client whose upstream fails has its connection closed and
reconnects (a retriable broker failure to every Kafka client), so a steady rate means clients are retrying and a
broker, the network or the proxy's upstream credential needs a look. One ``UpstreamFailures`` per process
(``Services.upstream_failures``); the labels are the ``UpstreamFailure`` values, never an address or client input
(the address is in the log line of the connection that failed).

Cost model: O(1) per failure under a lock; memory O(reasons). Standard library only, thread-safe.
"""

from __future__ import annotations

import threading
from collections import Counter
from enum import Enum


class UpstreamFailure(Enum):
    """Why an upstream connection failed; the value is the metric label."""

    #: Dialling failed: connection refused, no route, name not resolved.
    UNREACHABLE = "unreachable"
    #: ``upstream_timeout_seconds`` passed: dialling, logging in, or waiting for an answer.
    TIMEOUT = "timeout"
    #: The TLS handshake failed (the upstream's certificate not trusted, the proxy's refused, a protocol mismatch).
    TLS = "tls"
    #: The upstream refused the proxy's own login (its service credential, token or Kerberos ticket).
    LOGIN = "login"
    #: The upstream closed or reset a connection in use.
    CLOSED = "closed"
    #: The upstream sent a frame the proxy cannot take (a size out of bounds, a correlation id out of order).
    PROTOCOL = "protocol"


class UpstreamFailures:
    """Counts of failed upstream connections by ``UpstreamFailure``. Thread-safe; counts only grow."""

    __slots__ = ("_counts", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[UpstreamFailure] = Counter()

    def __repr__(self) -> str:
        return f"UpstreamFailures({sum(self._counts.values())})"

    def record(self, reason: UpstreamFailure) -> None:
        """Count one failed upstream connection."""
        with self._lock:
            self._counts[reason] += 1

    def counts(self) -> dict[UpstreamFailure, int]:
        """Every reason's count, zero included (a series that exists from the start can be rated at once)."""
        with self._lock:
            return {reason: self._counts[reason] for reason in UpstreamFailure}
