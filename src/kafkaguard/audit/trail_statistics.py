"""Counts of the audit trail's sinks: records sent, spooled and dropped per sink, and the spool's bytes on disk.

One ``AuditTrailStatistics`` per process (``Services.audit_trail``), like ``LoginStatistics``: the audit writer and
the Kafka sink's sender thread count into it, the console's ``/metrics`` reads it when the console runs in the same
process (``kafkaguard_audit_records_total{sink,outcome}``, ``kafkaguard_audit_spool_bytes``), and anything else can
read ``counts()``. Outcomes:

* ``sent``: acknowledged by the cluster (the Kafka sink) or written to the file (the file sink);
* ``spooled``: records that waited in the spool because the cluster could not take them (a failed delivery, or
  arriving while the cluster was unreachable);
* ``dropped``: lost on purpose, each also logged with its count: the spool was full, the writer fell behind, or a
  routing rule said ``drop`` (outcome ``routed_drop``, which is configuration, not loss).

Standard library only, thread-safe; counts only grow.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

SENT = "sent"
SPOOLED = "spooled"
DROPPED = "dropped"
ROUTED_DROP = "routed_drop"


class AuditTrailStatistics:
    __slots__ = ("_counts", "_lock", "_spool_bytes")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], int] = {}
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

    def watch_spool(self, size: Callable[[], int] | None) -> None:
        """Where the spool's bytes on disk are read (the Kafka sink's spool), or None when there is none."""
        self._spool_bytes = size

    @property
    def spool_bytes(self) -> int | None:
        """The spool's bytes on disk now, or None without a spool."""
        size = self._spool_bytes
        return None if size is None else size()
