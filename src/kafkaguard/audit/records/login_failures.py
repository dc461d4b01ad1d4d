"""Failed logins collapsed per window: a flood of identical failures becomes one authentication event with a count.

A client retrying a wrong password every second, or a scanner trying one name 10,000 times, would otherwise write
one event per attempt for as long as it goes on. Failures that are identical (same subject and the same data: the
mechanism, the attempted name, the address, the listener and the error) within ``seconds`` of the first of them are
one event: ``time`` the first, ``last_time`` the last, ``count`` how many (``count`` and ``last_time`` only when
more than one, as in authorization records v2). The event is written when its window ends (or at shutdown).

Worked example (window 60 s): mallory fails SCRAM from 10.0.0.9 at t=0, 1, …, 119 (120 attempts). Window one opens
at t=0 and closes at t=60: one event, count 60, time t=0, last_time t=59. The attempt at t=60 opens window two:
one event, count 60, at t=120. Two events instead of 120.

Cost model: ``add`` is one dict update under a lock; memory is one entry per distinct failure in the open windows
(bounded by ``max_keys``: beyond it a failure is not collapsed but passed on at once, so nothing is lost to the
bound). Standard library only, thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from kafkaguard.audit.records.cloudevents import event_time
from kafkaguard.model.json_value import JsonObject, JsonValue


@dataclass(slots=True)
class _Open:
    subject: str
    data: JsonObject
    first: datetime
    last: datetime
    count: int = 1
    ends: datetime = field(default_factory=datetime.now)


@dataclass(frozen=True, slots=True)
class Collapsed:
    """One event to write: its subject, data (with count and last_time when it stands for several) and time."""

    subject: str
    data: JsonObject
    time: datetime


class FailureWindows:
    def __init__(self, seconds: float, *, max_keys: int = 10_000) -> None:
        self.seconds = seconds
        self.max_keys = max_keys
        self._lock = threading.Lock()
        self._open: dict[tuple[str, tuple[tuple[str, str], ...]], _Open] = {}

    def add(self, subject: str, data: Mapping[str, JsonValue], now: datetime) -> Collapsed | None:
        """Count one failure; returns an event to write at once only when it cannot be collapsed (``seconds`` 0, or
        ``max_keys`` distinct failures already open)."""
        if self.seconds <= 0:
            return Collapsed(subject, dict(data), now)
        key = (subject, tuple(sorted((name, repr(value)) for name, value in data.items())))
        with self._lock:
            found = self._open.get(key)
            if found is not None:
                found.count += 1
                found.last = now
                return None
            if len(self._open) >= self.max_keys:
                return Collapsed(subject, dict(data), now)
            self._open[key] = _Open(subject, dict(data), now, now, ends=now + timedelta(seconds=self.seconds))
            return None

    def take(self, now: datetime | None = None) -> list[Collapsed]:
        """The events of the windows that ended by ``now`` (every open window when ``now`` is None), oldest first."""
        with self._lock:
            done = [key for key, entry in self._open.items() if now is None or entry.ends <= now]
            entries = [self._open.pop(key) for key in done]
        events = []
        for entry in sorted(entries, key=lambda e: e.first):
            data = dict(entry.data)
            if entry.count > 1:
                data["count"] = entry.count
                data["last_time"] = event_time(entry.last)
            events.append(Collapsed(entry.subject, data, entry.first))
        return events
