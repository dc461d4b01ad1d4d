"""The server's audit log: JSON lines of ``kafkaguard.audit`` records, written off the event loop.

Records are appended to an in-memory buffer (cheap, never blocks) and a background task writes the buffer in a
worker thread every ``flush_interval`` seconds, rotating the file by size (``audit.log`` → ``audit.log.1`` …). A
record may be queued unmade (``record_later``: a function that makes it): one request refusing 10,000 topics queued
20,000 decisions whose explanation and JSON took 0.4 s of the event loop; made in the writer thread, none of it.
The buffer is bounded: if the disk cannot keep up, the oldest unwritten entries (a record, or one request's
records) are dropped and counted, and the count is written into the log as a line of its own, so a gap is never
silent.

In ``usage`` mode (the default) every decision is queued as in ``all`` mode, and the writer thread folds them
(``kafkaguard.audit.usage``): allowed decisions into one record per access and window, repeated denials into one
record with a count. A window's records are written once it has ended (checked at every background flush) and
at ``stop``. The event loop's part stays one append per request; the folding is the writer thread's.

The log says who asked for what, from where, and the answer: its files are readable by their owner only. It is
created with mode 0600 (rotated files keep it), and on start the log and its numbered backups are set to 0600 if
they are wider (``store.files``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections import deque
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from glob import escape as glob_escape
from pathlib import Path

from kafkaguard.audit.record import AuditRecord, to_json_line
from kafkaguard.audit.usage import DEFAULT_MAX_KEYS, UsageAggregator
from kafkaguard.store.files import open_private_append, tighten

log = logging.getLogger(__name__)


class AuditLog:
    def __init__(
        self,
        path: Path,
        *,
        mode: str = "denied",
        max_bytes: int = 100 * 1024 * 1024,
        backups: int = 5,
        flush_interval: float = 0.2,
        max_buffered: int = 100_000,
        usage_window_seconds: float = 60.0,
        usage_max_keys: int = DEFAULT_MAX_KEYS,
    ) -> None:
        self.path = path
        self.log_allowed = mode in ("all", "usage")
        #: Folds decisions per window in ``usage`` mode (used by the writer thread only); None otherwise.
        self.usage = UsageAggregator(usage_window_seconds, usage_max_keys) if mode == "usage" else None
        self._max_bytes = max_bytes
        self._backups = backups
        self._flush_interval = flush_interval
        #: JSON lines, or functions that make records (called in the writer thread).
        self._buffer: deque[str | Callable[[], Sequence[AuditRecord]]] = deque()
        self._max_buffered = max_buffered
        self._dropped = 0
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        # One flush at a time, so that flush() returns only once everything recorded before it is written, even
        # when the background flush had already taken those lines and was still writing them.
        self._flushing = asyncio.Lock()

    def record(self, record: AuditRecord) -> None:
        """Queue one record; never blocks."""
        self.record_later(partial(tuple, (record,)))

    def record_later(self, make: Callable[[], Sequence[AuditRecord]]) -> None:
        """Queue the records ``make`` returns, made when they are written, off the event loop (``make`` must only
        read immutable state, such as one authorizer snapshot's decisions); never blocks. The buffer's bound counts
        each call once, however many records it makes."""
        if len(self._buffer) >= self._max_buffered:
            self._buffer.popleft()
            self._dropped += 1
        self._buffer.append(make)

    def start(self) -> None:
        """Create the log's directory, set the log and its backups to 0600 where they are wider, and start the
        background flush. Runs once at server start, before the first record is written.

        :raises OSError: the directory cannot be created.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for existing in (self.path, *self._backup_files()):
            tighten(existing)
        self._task = asyncio.create_task(self._run(), name="audit-log")

    async def stop(self) -> None:
        """Write everything still buffered (in usage mode, the open window's records too), then stop."""
        self._stopping.set()
        if self._task is not None:
            await self._task
            self._task = None
        await self.flush(end_window=True)

    async def flush(self, *, end_window: bool = False) -> None:
        """Write everything recorded so far; returns when it is in the file. In usage mode, decisions are held
        until their window ends (or ``end_window``: now)."""
        async with self._flushing:
            lines = self._take()
            # len() of the writer thread's dict: a racy read is harmless (worst case one flush later).
            if lines or (self.usage is not None and (end_window or len(self.usage))):
                await asyncio.to_thread(self._write, self._lines(lines, end_window))

    async def _run(self) -> None:
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self._flush_interval)
            try:
                await self.flush()
            except OSError as e:
                log.error("audit log %s cannot be written: %s", self.path, e)

    def _take(self) -> list[str | Callable[[], Sequence[AuditRecord]]]:
        lines = list(self._buffer)
        self._buffer.clear()
        if self._dropped:
            gap = {"time": datetime.now(UTC).isoformat(), "dropped_records": self._dropped}
            lines.insert(0, json.dumps(gap))
            log.warning("audit log fell behind: %d record(s) dropped", self._dropped)
            self._dropped = 0
        return lines

    def _lines(
        self, entries: list[str | Callable[[], Sequence[AuditRecord]]], end_window: bool
    ) -> Callable[[], list[str]]:
        """A function (run in the writer thread) making the JSON lines of ``entries``: each record as it is, or, in
        usage mode, folded, with the records of every window that has ended (all, with ``end_window``)."""

        def make() -> list[str]:
            usage = self.usage
            lines: list[str] = []
            for entry in entries:
                if isinstance(entry, str):
                    lines.append(entry)
                elif usage is None:
                    lines.extend(to_json_line(record) for record in entry())
                else:
                    lines.extend(to_json_line(record) for record in usage.add(entry()))
            if usage is not None:
                ended = usage.drain() if end_window else usage.expire(datetime.now(UTC))
                lines.extend(to_json_line(record) for record in ended)
            return lines

        return make

    def _write(self, lines: Callable[[], list[str]]) -> None:
        data = "".join(line + "\n" for line in lines()).encode("utf-8")
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
