"""Login statistics: successful and failed authentications, counted per listener and mechanism.

Kafka exports ``successful-authentication-total`` and ``failed-authentication-total`` per listener; kafkaguard
keeps the same counts in one :class:`LoginStatistics` per process (``Services.logins``), shared by the Kafka
server and the console in that process, and the console's ``/metrics`` exports them. Standard library only and
thread-safe: any thread may record, any thread may read.

Only counts are kept: never a user name, never anything a client sent. Label values are the caller's (a
listener such as ``SASL_PLAINTEXT://0.0.0.0:9092`` or ``console``, a mechanism such as ``SCRAM-SHA-256``), so
callers must pass values from a small fixed set, never client input.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from enum import Enum


class LoginResult(Enum):
    """How a login ended; the value is the metric label."""

    OK = "ok"
    FAILED = "failed"


@dataclass(frozen=True, slots=True, order=True)
class LoginKey:
    """What a count is kept for: a listener, a mechanism and a result (``result`` is a ``LoginResult`` value)."""

    listener: str
    mechanism: str
    result: str


class LoginStatistics:
    """Counts of logins by (listener, mechanism, result). Thread-safe; counts only grow."""

    __slots__ = ("_counts", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[LoginKey, int] = {}

    def __repr__(self) -> str:
        return f"LoginStatistics(ok={self.ok}, failed={self.failed})"

    def record(self, listener: str, mechanism: str, *, succeeded: bool) -> None:
        """Count one finished login on ``listener`` with ``mechanism``."""
        result = LoginResult.OK if succeeded else LoginResult.FAILED
        key = LoginKey(listener, mechanism, result.value)
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + 1

    def counts(self) -> dict[LoginKey, int]:
        """A copy of every count recorded so far, sorted by key."""
        with self._lock:
            return dict(sorted(self._counts.items()))

    def total(self, result: LoginResult, *, listener: str | None = None, mechanism: str | None = None) -> int:
        """The number of logins that ended with ``result``, on ``listener`` and with ``mechanism`` when given."""
        return sum(
            count
            for key, count in self.counts().items()
            if key.result == result.value
            and (listener is None or key.listener == listener)
            and (mechanism is None or key.mechanism == mechanism)
        )

    @property
    def ok(self) -> int:
        """Successful logins, on every listener with every mechanism."""
        return self.total(LoginResult.OK)

    @property
    def failed(self) -> int:
        """Failed logins, on every listener with every mechanism."""
        return self.total(LoginResult.FAILED)
