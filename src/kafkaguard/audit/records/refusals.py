"""Refused connections: counted per listener and reason, and logged once per address, reason and interval.

Kafka logs every refused connection (``Rejected connection from /10.0.0.7, address already has the configured
maximum of 500 connections.``): 10,000 attempts write 10,000 lines, and a flood of attempts becomes a flood of log.
Here the first refusal of an address for a reason in an interval (60 s) is logged at WARNING with what to change;
later ones in that interval are only counted, and at most ``max_lines`` addresses are logged per interval. What was
not logged is summed into one line when the next interval's first refusal comes (or at ``flush``, when the server
stops). Whatever the flood, from one address or from a million: at most ``max_lines + 1`` lines per interval.

Worked example (interval 60 s, ``max_lines`` 20): 10.0.0.7 opens 10,001 connections in 30 s and 10,000 are refused
(``max_connections_per_ip``). At t=0 one line, ``Refused a connection from /10.0.0.7 on SASL_PLAINTEXT://…
[max_connections_per_ip]: 500 connections open from this address …``; the other 9,999 are counted. At t=75 s the
next refusal (any address) first writes ``9999 more refused connection(s) in the last 60 s were not logged one by
one: max_connections_per_ip 9999 …``, then its own line. ``counts()`` says 10,000 throughout.

Counts are kept like ``LoginStatistics``' (one ``ConnectionRefusals`` per process, ``Services.refusals``), and the
console's ``/metrics`` exports them as ``kafkaguard_connections_refused_total{listener,reason}``. Labels are the
caller's: a listener from the configuration and a ``RefusalReason`` — never client input; the client's address is in
log lines only, never a label (one series per address would be the attacker's to create).

Cost model: ``record`` is O(1) (two dict updates under a lock); memory is O(``max_lines`` + reasons × listeners),
whatever the number of addresses, since only the addresses logged in the current interval are remembered.
Standard library only and thread-safe.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

log = logging.getLogger(__name__)

#: How long a logged (address, reason) stays quiet, and the span of one summary line.
DEFAULT_INTERVAL_SECONDS = 60.0
#: Addresses logged per interval at most; refusals beyond that are in the interval's summary line.
DEFAULT_MAX_LINES = 20


class RefusalReason(Enum):
    """Why a connection was refused or closed before login; the value is the metric label and names the setting."""

    MAX_CONNECTIONS = "max_connections"
    MAX_CONNECTIONS_PER_LISTENER = "max_connections_per_listener"
    MAX_CONNECTIONS_PER_IP = "max_connections_per_ip"
    CONNECTION_CREATION_RATE = "connection_creation_rate"
    SASL_LOGIN_TIMEOUT = "sasl_login_timeout"
    PRE_LOGIN_FRAME_SIZE = "pre_login_frame_size"
    PROTOCOL_VIOLATION = "protocol_violation"
    PROXY_PROTOCOL = "proxy_protocol"
    #: A login refused unchecked by the failed-login budget (``login_failures_per_address_*``, ``…_per_user_*``).
    LOGIN_FAILURES = "login_failures"


@dataclass(frozen=True, slots=True, order=True)
class RefusalKey:
    """What a count is kept for: a listener (as configured) and a reason (a ``RefusalReason`` value)."""

    listener: str
    reason: str


class ConnectionRefusals:
    """Counts of refused connections by (listener, reason), and their rate-limited log. Thread-safe."""

    __slots__ = ("_clock", "_counts", "_interval", "_lock", "_logged", "_max_lines", "_unlogged", "_window_start")

    def __init__(
        self,
        *,
        interval_seconds: float = DEFAULT_INTERVAL_SECONDS,
        max_lines: int = DEFAULT_MAX_LINES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._interval = interval_seconds
        self._max_lines = max_lines
        self._clock = clock
        self._lock = threading.Lock()
        self._counts: dict[RefusalKey, int] = {}
        self._window_start: float | None = None
        #: (address, reason) logged in the current interval.
        self._logged: set[tuple[str, RefusalReason]] = set()
        #: Refusals of the current interval that got no line of their own, by reason.
        self._unlogged: Counter[RefusalReason] = Counter()

    def __repr__(self) -> str:
        return f"ConnectionRefusals(total={self.total()})"

    def record(self, listener: str, reason: RefusalReason, address: str, detail: str) -> None:
        """Count one refusal on ``listener``; log it unless ``address`` was logged for ``reason`` in this interval
        (or this interval's lines are used up). ``detail`` says what was exceeded and what to change."""
        key = RefusalKey(listener, reason.value)
        now = self._clock()
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + 1
            summary = self._roll(now)
            seen = (address, reason)
            if seen in self._logged or len(self._logged) >= self._max_lines:
                self._unlogged[reason] += 1
                line = False
            else:
                self._logged.add(seen)
                line = True
        if summary is not None:
            log.warning("%s", summary)
        if line:
            log.warning(
                "Refused a connection from /%s on %s [%s]: %s; further refusals of this address for this "
                "reason in the next %g s are counted (kafkaguard_connections_refused_total), not logged",
                address,
                listener,
                reason.value,
                detail,
                self._interval,
            )

    def flush(self) -> None:
        """Log the current interval's summary now (the server calls it when it stops), if anything went unlogged."""
        with self._lock:
            summary = self._summary()
            self._unlogged.clear()
        if summary is not None:
            log.warning("%s", summary)

    def counts(self) -> dict[RefusalKey, int]:
        """A copy of every count recorded so far, sorted by key."""
        with self._lock:
            return dict(sorted(self._counts.items()))

    def total(self, reason: RefusalReason | None = None, *, listener: str | None = None) -> int:
        """Refusals for ``reason`` on ``listener`` when given; every refusal otherwise."""
        return sum(
            count
            for key, count in self.counts().items()
            if (reason is None or key.reason == reason.value) and (listener is None or key.listener == listener)
        )

    def _roll(self, now: float) -> str | None:
        """Start a new interval if the current one is over; the ended interval's summary line, if any. Called with
        the lock held."""
        if self._window_start is not None and now - self._window_start < self._interval:
            return None
        summary = self._summary() if self._window_start is not None else None
        self._window_start = now
        self._logged.clear()
        self._unlogged.clear()
        return summary

    def _summary(self) -> str | None:
        if not self._unlogged:
            return None
        by_reason = ", ".join(
            f"{reason.value} {count}"
            for reason, count in sorted(self._unlogged.items(), key=lambda item: item[0].value)
        )
        return (
            f"{sum(self._unlogged.values())} more refused connection(s) in the last {self._interval:g} s were not "
            f"logged one by one: {by_reason} (kafkaguard_connections_refused_total counts every one)"
        )
