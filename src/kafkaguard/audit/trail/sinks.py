"""Where the audit trail's envelopes go: the JSON lines file (the embedded default) and other sinks (a Kafka topic,
``audit.trail.kafka_sink``). The audit writer (``audit.trail.writer``) makes each event's envelope and JSON line once,
in its thread, and hands the batch to every sink in that thread: a sink's ``write`` may do I/O but must not wait on
anything remote (the Kafka sink only appends to its spool; its own thread talks to the cluster).

The file sink is today's audit log file: appended to, rotated by size (``audit.log`` → ``audit.log.1`` …), created
with mode 0600 (rotated files keep it), and on start the log and its numbered backups are set to 0600 if they are
wider (``store.files``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from glob import escape as glob_escape
from pathlib import Path
from typing import Protocol

from kafkaguard.audit.records.trail_statistics import SENT, AuditTrailStatistics
from kafkaguard.model.json_value import JsonObject
from kafkaguard.store.files import open_private_append, tighten


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One event as the sinks get it: its category (None: a note for the file only, such as a gap), subject, data,
    JSON line (the envelope, without the newline) and the principal who caused it (``audit.records.event_principal``,
    bounded; "" for a note): the Kafka sink's spool shares its room out by it."""

    category: str | None
    subject: str
    data: JsonObject
    line: str
    principal: str = ""


class Sink(Protocol):
    """A destination of the audit trail. ``write`` runs in the audit writer's thread."""

    name: str

    def start(self) -> None:
        """Open what the sink writes to (before the first ``write``)."""

    def write(self, events: Sequence[Outgoing]) -> None:
        """Take a batch, in order. :raises OSError: it cannot be written (logged by the writer; other sinks go on)."""

    def close(self) -> None:
        """Finish (after the last ``write``); may block for a bounded time."""


class FileSink:
    """The JSON lines file, rotated by size, owner-only."""

    name = "file"

    def __init__(
        self, path: Path, *, max_bytes: int, backups: int, statistics: AuditTrailStatistics | None = None
    ) -> None:
        self.path = path
        self._max_bytes = max_bytes
        self._backups = backups
        self._statistics = statistics

    def start(self) -> None:
        """:raises OSError: the directory cannot be created."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for existing in (self.path, *self._backup_files()):
            tighten(existing)

    def write(self, events: Sequence[Outgoing]) -> None:
        data = "".join(event.line + "\n" for event in events).encode("utf-8")
        if not data:
            return
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            size = 0
        if size and size + len(data) > self._max_bytes:
            self._rotate()
        with os.fdopen(open_private_append(self.path), "ab") as out:
            out.write(data)
        if self._statistics is not None:
            self._statistics.count(self.name, SENT, sum(1 for event in events if event.category is not None))

    def close(self) -> None:
        pass

    def _backup_files(self) -> list[Path]:
        """``audit.log.1``, ``audit.log.2`` …: every rotated file of this log, also those beyond ``backups``."""
        prefix = self.path.name + "."
        return [
            path
            for path in self.path.parent.glob(glob_escape(prefix) + "*")
            if path.name[len(prefix) :].isdigit() and path.is_file()
        ]

    def _rotate(self) -> None:
        for index in range(self._backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{index}")
            if older.exists():
                older.replace(self.path.with_name(f"{self.path.name}.{index + 1}"))
        self.path.replace(self.path.with_name(f"{self.path.name}.1"))
