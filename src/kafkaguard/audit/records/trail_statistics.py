"""Counts of the audit trail's sinks: records sent, spooled and dropped per sink, the spool's drops per principal and
category, and the spool's bytes on disk.

One ``AuditTrailStatistics`` per process (``Services.audit_trail``), like ``LoginStatistics``: the audit writer and
the Kafka sink's sender thread count into it, the console's ``/metrics`` reads it when the console runs in the same
process (``kafkaguard_audit_records_total{sink,outcome}``, ``kafkaguard_audit_spool_dropped_records_total{principal,
category}``, ``kafkaguard_audit_spool_bytes``), and anything else can read ``counts()`` and ``spool_drops()``.
Outcomes:

* ``sent``: acknowledged by the cluster (the Kafka sink) or written to the file (the file sink);
* ``spooled``: records that waited in the spool because the cluster could not take them (a failed delivery, or
  arriving while the cluster was unreachable);
* ``dropped``: lost on purpose, each also logged with its count: the spool was full, the writer fell behind, or a
  routing rule said ``drop`` (outcome ``routed_drop``, which is configuration, not loss).

**Who lost records** (``DropCounts``): the spool's drops are counted per (principal, category) for at most
``TRACKED_PRINCIPALS`` principals (the first to lose records; the drops of any later one count under ``OTHERS``), so
client-chosen names cannot grow it without bound. ``spool_drops`` names the ``TOP_PRINCIPALS`` that lost the most
and puts the rest together under ``OTHERS``: a principal that rises into the top moves its count out of ``OTHERS``
into a series of its own. Worked example: User:noisy lost 5,790 authorization records and User:quiet 2
authentication ones; with a top of 1, ``spool_drops(1)`` is ``{("User:noisy", "authorization"): 5790,
("(others)", "authentication"): 2}``.

Standard library only, thread-safe; counts only grow.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

SENT = "sent"
SPOOLED = "spooled"
DROPPED = "dropped"
ROUTED_DROP = "routed_drop"

#: Principals whose spool drops are counted by name (the first to lose records); any later one's under ``OTHERS``.
TRACKED_PRINCIPALS = 1000
#: Principals named in the metric (those that lost the most); the rest together under ``OTHERS``.
TOP_PRINCIPALS = 10
#: The principal name of the drops counted together.
OTHERS = "(others)"


class DropCounts:
    """Records dropped per (principal, category), by name for at most ``max_principals`` principals. Not
    thread-safe: its owner locks."""

    __slots__ = ("_counts", "_max_principals", "_principals")

    def __init__(self, max_principals: int = TRACKED_PRINCIPALS) -> None:
        self._max_principals = max_principals
        self._counts: dict[tuple[str, str], int] = {}
        self._principals: dict[str, int] = {}  # principal → its drops, all categories

    def add(self, principal: str, category: str, records: int) -> None:
        if records <= 0:
            return
        if principal not in self._principals and len(self._principals) >= self._max_principals:
            principal = OTHERS
        self._principals[principal] = self._principals.get(principal, 0) + records
        self._counts[principal, category] = self._counts.get((principal, category), 0) + records

    @property
    def total(self) -> int:
        return sum(self._principals.values())

    def top(self, count: int = TOP_PRINCIPALS) -> dict[tuple[str, str], int]:
        """(principal, category) → records for the ``count`` principals that lost the most (ties by name), and the
        rest per category under ``OTHERS``; the most first, ``OTHERS`` last."""
        ranked = sorted((p for p in self._principals if p != OTHERS), key=lambda p: (-self._principals[p], p))
        named = set(ranked[:count])
        result: dict[tuple[str, str], int] = {}
        for principal in ranked[:count]:
            for (owner, category), records in sorted(self._counts.items()):
                if owner == principal:
                    result[principal, category] = records
        for (owner, category), records in sorted(self._counts.items()):
            if owner not in named:
                result[OTHERS, category] = result.get((OTHERS, category), 0) + records
        return result

    def principals(self, count: int) -> list[tuple[str, int]]:
        """The ``count`` principals that lost the most, with their drops (``OTHERS`` among them if it did)."""
        return sorted(self._principals.items(), key=lambda entry: (-entry[1], entry[0]))[:count]

    def of(self, principal: str) -> dict[str, int]:
        """category → records of one principal."""
        return {category: n for (owner, category), n in sorted(self._counts.items()) if owner == principal}


class AuditTrailStatistics:
    __slots__ = ("_counts", "_lock", "_spool_bytes", "_spool_drops")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], int] = {}
        self._spool_drops = DropCounts()
        self._spool_bytes: Callable[[], int] | None = None

    def __repr__(self) -> str:
        return f"AuditTrailStatistics({self.counts()})"

    def count(self, sink: str, outcome: str, records: int = 1) -> None:
        if records <= 0:
            return
        with self._lock:
            self._counts[sink, outcome] = self._counts.get((sink, outcome), 0) + records

    def counts(self) -> dict[tuple[str, str], int]:
        """A copy: (sink, outcome) → records."""
        with self._lock:
            return dict(sorted(self._counts.items()))

    def get(self, sink: str, outcome: str) -> int:
        with self._lock:
            return self._counts.get((sink, outcome), 0)

    def count_spool_drops(self, counts: Mapping[tuple[str, str], int]) -> None:
        """Records the spool lost, per (principal, category)."""
        with self._lock:
            for (principal, category), records in counts.items():
                self._spool_drops.add(principal, category, records)

    def spool_drops(self, top: int = TOP_PRINCIPALS) -> dict[tuple[str, str], int]:
        """(principal, category) → records the spool lost: the ``top`` principals that lost the most by name, the
        rest per category under ``OTHERS``."""
        with self._lock:
            return self._spool_drops.top(top)

    def watch_spool(self, size: Callable[[], int] | None) -> None:
        """Where the spool's bytes on disk are read (the Kafka sink's spool), or None when there is none."""
        self._spool_bytes = size

    @property
    def spool_bytes(self) -> int | None:
        """The spool's bytes on disk now, or None without a spool."""
        size = self._spool_bytes
        return None if size is None else size()
