"""The served TLS certificates' expiry and reloads, per TLS listener protocol, for ``/metrics``.

``node.tls_reload`` records each listener context's certificate notAfter when the context is built and again at each
reload it takes, and counts the reloads it took and refused; the console exports them as
``kafkaguard_tls_certificate_expiry_seconds{listener}`` (notAfter minus now, computed at scrape time, so it falls
between reloads as a clock would) and ``kafkaguard_tls_reloads_total{listener,result}`` (ok, refused). One
``TlsStatistics`` per process (``Services.tls``). Labels are the caller's: a listener protocol (``SSL``,
``SASL_SSL``), never anything a client sent. Nothing of a certificate but its notAfter is kept.

Cost model: O(1) per record under a lock; memory O(TLS listener protocols). Standard library only, thread-safe.
"""

from __future__ import annotations

import threading
from collections import Counter
from enum import Enum


class ReloadResult(Enum):
    """How a look at changed TLS files ended; the value is the metric label."""

    OK = "ok"
    #: The changed files did not load: the previous certificate is still served.
    REFUSED = "refused"


class TlsStatistics:
    """Per listener: the served certificate's notAfter (POSIX seconds) and the reloads taken and refused."""

    __slots__ = ("_lock", "_not_after", "_reloads")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._not_after: dict[str, float] = {}
        self._reloads: Counter[tuple[str, ReloadResult]] = Counter()

    def __repr__(self) -> str:
        return f"TlsStatistics(listeners={sorted(self._not_after)})"

    def serving(self, listener: str, not_after: float) -> None:
        """``listener`` now serves a certificate valid until ``not_after`` (POSIX seconds)."""
        with self._lock:
            self._not_after[listener] = not_after

    def reloaded(self, listener: str, result: ReloadResult) -> None:
        """Count one reload of ``listener``'s changed TLS files that ended with ``result``."""
        with self._lock:
            self._reloads[listener, result] += 1

    def not_after(self) -> dict[str, float]:
        """Each listener's served certificate's notAfter, sorted by listener."""
        with self._lock:
            return dict(sorted(self._not_after.items()))

    def reloads(self) -> dict[tuple[str, ReloadResult], int]:
        """Reloads per (listener, result), every listener that serves a certificate listed with both results."""
        with self._lock:
            listeners = sorted(self._not_after.keys() | {listener for listener, _ in self._reloads})
            return {(name, result): self._reloads[name, result] for name in listeners for result in ReloadResult}
