"""Usage records (``audit_mode: usage``): authorization records folded per window, an I/O-free aggregator.

A proxy in front of Produce and Fetch traffic decides the same few accesses thousands of times a second; one
record each (``audit_mode: all``) is too heavy to keep on, and denials alone (``denied``) say nothing about which
ACLs are used. Usage mode keeps every request counted and writes few records::

    usage = UsageAggregator(window_seconds=60, max_keys=50_000)
    usage.add(records)              # the records of one request, as ``record_from_decision`` makes them
    written = usage.expire(now)     # every window that ended before ``now``: its records, to write
    written = usage.drain()         # at shutdown: everything still held

With the window ``[09:26:00, 09:27:00)`` and three requests of ``User:orders-svc`` from 10.20.3.17 (two
Produce WRITEs to ``payments`` allowed by ACL ``a1`` at :10 and :40, one denied DESCRIBE of ``pii`` at :20)
and a second denied DESCRIBE of ``pii`` at :50, ``expire(09:27:00.1)`` returns two records::

    {"time": "…09:26:10.000Z", "last_time": "…09:26:40.000Z", "count": 2, "decision": "ALLOWED",
     "operation": "WRITE", "resource_name": "payments", "rule": "MatchingAcl(…, id=a1)", "api": "Produce", …}
    {"time": "…09:26:20.000Z", "last_time": "…09:26:50.000Z", "count": 2, "decision": "DENIED",
     "operation": "DESCRIBE", "resource_name": "pii", "rule": "DefaultDeny", "api": "Metadata", …}

* **Allowed** decisions are keyed by (principal, host, operation, resource type, resource name, deciding rule):
  the API is not in the key (Produce and Metadata both DESCRIBE a topic; what matters for usage is the ACL that
  allowed it); a record whose requests came through several APIs has ``api`` null.
* **Denied** decisions stay individual — their API is kept — but identical repeats (same principal, host, API,
  operation, resource and rule) within a window collapse into one record with a count (a consumer denied its group
  retries every second).
* Both keys also hold ``enforced`` (a permissive proxy's would-be denial is not a denial) and the login's groups,
  so nothing a record says is lost by folding.

Windows are aligned to multiples of ``window_seconds`` since the epoch (a record's window is known from its time
alone, on every node). A record older than the open window (a clock stepped back) is counted in the open window:
its count is never lost, and ``time`` is the earliest request seen.

**Bounded memory.** At most ``max_keys`` distinct keys are held; a record with a new key beyond that flushes the
open window early (``add`` returns its records) and a fresh one starts with the same bounds: more records than
one per key and window, never a silent drop. Counts are exact whatever the flushes: the sum of ``count`` over the
records of a key equals the number of decisions added for it.

**Cost model.** ``add`` costs one tuple build and one dict lookup per decision and no allocation for a key already seen:
an order of magnitude less than serializing one record as a JSON line, what ``all`` mode pays per decision (see
docs/benchmarks.md, "Figures from the code"). The state is the first record of each key plus ~240 bytes of key and
counters (tracemalloc over 50,000 keys), so ~0.5 KB per key and ~25 MB at the default bound. A window's output is one
record per key: for steady traffic, ``distinct accesses × (1 + denied APIs)`` records per window, whatever the request
rate. The aggregator runs in the audit writer's thread, never on the event loop.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime

from kafkaguard.audit.records.record import AuditRecord
from kafkaguard.model import AuthorizationResult

#: Default bound on distinct keys held per window.
DEFAULT_MAX_KEYS = 50_000

_Key = tuple[object, ...]


@dataclass(slots=True)
class _Folded:
    """The requests of one key so far: the first one's record (its fields are the key's), how many, the last."""

    first: AuditRecord
    count: int
    last: datetime
    api: str | None


def usage_key(record: AuditRecord) -> _Key:
    """The key a record is folded under (see the module docstring): the API only for denials."""
    allowed = record.decision is AuthorizationResult.ALLOWED
    return (
        record.decision,
        record.principal,
        record.host,
        None if allowed else record.api,
        record.operation,
        record.resource_type,
        record.resource_name,
        record.rule,
        record.enforced,
        record.login_groups,
    )


class UsageAggregator:
    """Folds authorization records per key and window (module docstring); not thread-safe (one writer thread)."""

    def __init__(self, window_seconds: float, max_keys: int = DEFAULT_MAX_KEYS) -> None:
        if not window_seconds > 0:
            raise ValueError(f"window_seconds must be > 0, got {window_seconds}")
        if max_keys < 1:
            raise ValueError(f"max_keys must be >= 1, got {max_keys}")
        self.window_seconds = window_seconds
        self.max_keys = max_keys
        self._folded: dict[_Key, _Folded] = {}
        #: The open window's start, as seconds since the epoch (None: no record held).
        self._start: float | None = None
        #: Windows flushed early because they held ``max_keys`` keys (a metric: the bound is too low if it grows).
        self.early_flushes = 0

    def __len__(self) -> int:
        """Distinct keys held now."""
        return len(self._folded)

    def add(self, records: Iterable[AuditRecord]) -> list[AuditRecord]:
        """Fold ``records`` in; returns the records of any window this closed (a record of a later window, or the
        key bound reached), to write now, in order."""
        out: list[AuditRecord] = []
        for record in records:
            at = record.time.timestamp()
            if self._start is None:
                self._start = self._window_of(at)
            elif at >= self._start + self.window_seconds:
                out += self.drain()
                self._start = self._window_of(at)
            key = usage_key(record)
            folded = self._folded.get(key)
            if folded is None:
                if len(self._folded) >= self.max_keys:
                    start = self._start
                    out += self.drain()
                    self._start = start
                    self.early_flushes += 1
                self._folded[key] = _Folded(record, record.count, record.last, record.api)
                continue
            folded.count += record.count
            if record.last > folded.last:
                folded.last = record.last
            if record.time < folded.first.time:
                folded.first = replace(folded.first, time=record.time)
            if folded.api != record.api:
                folded.api = None
        return out

    def expire(self, now: datetime) -> list[AuditRecord]:
        """The records of the open window if it ended at or before ``now`` (else none)."""
        if self._start is None or now.timestamp() < self._start + self.window_seconds:
            return []
        return self.drain()

    def drain(self) -> list[AuditRecord]:
        """Every record held, in the order their keys were first seen; the aggregator is then empty."""
        out = [_record(folded) for folded in self._folded.values()]
        self._folded = {}
        self._start = None
        return out

    def _window_of(self, at: float) -> float:
        return math.floor(at / self.window_seconds) * self.window_seconds


def _record(folded: _Folded) -> AuditRecord:
    first = folded.first
    last = folded.last if folded.last != first.time else None
    if folded.count == first.count and last == first.last_time and folded.api == first.api:
        return first
    return replace(first, count=folded.count, last_time=last, api=folded.api)
