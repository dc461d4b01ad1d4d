"""The server's audit log: JSON lines of ``kafkaguard.audit`` records, written off the event loop.

Records are appended to an in-memory buffer (cheap, never blocks) and a background task writes the buffer in a
worker thread every ``flush_interval`` seconds, rotating the file by size (``audit.log`` → ``audit.log.1`` …). A
record may be queued unmade (``record_later``: a function that makes it): one request refusing 10,000 topics queued
20,000 decisions whose explanation and JSON took 0.4 s of the event loop; made in the writer thread, none of it.
The buffer is bounded: if the disk cannot keep up, the oldest unwritten entries (a record, or one request's
records) are dropped and counted, and the count is written into the log as a line of its own, so a gap is never
silent.

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
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from glob import escape as glob_escape
from pathlib import Path
from typing import Any

from kafkaguard.audit.record import AuditRecord, to_json_line
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
    ) -> None:
        self.path = path
        self.log_allowed = mode == "all"
        self._max_bytes = max_bytes
        self._backups = backups
        self._flush_interval = flush_interval
        #: JSON lines, or functions that make one (called in the writer thread).
        self._buffer: deque[str | Callable[[], str]] = deque()
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

    def record_later(self, make: Callable[[], Sequence[AuditRecord | Mapping[str, Any]]]) -> None:
        """Queue the records ``make`` returns, made when they are written, off the event loop (``make`` must only
        read immutable state, such as one authorizer snapshot's decisions); never blocks. A mapping (an event
        envelope, ``audit.shadow``) is written as it is. The buffer's bound counts
        each call once, however many records it makes."""
        if len(self._buffer) >= self._max_buffered:
            self._buffer.popleft()
            self._dropped += 1
        self._buffer.append(partial(_json_lines, make))

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
        """Write everything still buffered, then stop."""
        self._stopping.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def flush(self) -> None:
        """Write everything recorded so far; returns when it is in the file."""
        async with self._flushing:
            lines = self._take()
            if lines:
                await asyncio.to_thread(self._write, lines)

    async def _run(self) -> None:
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self._flush_interval)
            try:
                await self.flush()
            except OSError as e:
                log.error("audit log %s cannot be written: %s", self.path, e)

    def _take(self) -> list[str | Callable[[], str]]:
        lines = list(self._buffer)
        self._buffer.clear()
        if self._dropped:
            gap = {"time": datetime.now(UTC).isoformat(), "dropped_records": self._dropped}
            lines.insert(0, json.dumps(gap))
            log.warning("audit log fell behind: %d record(s) dropped", self._dropped)
            self._dropped = 0
        return lines

    def _write(self, lines: list[str | Callable[[], str]]) -> None:
        made = (line if isinstance(line, str) else line() for line in lines)
        data = "".join(line + "\n" for line in made if line).encode("utf-8")
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


def _json_lines(make: Callable[[], Sequence[AuditRecord | Mapping[str, Any]]]) -> str:
    """The JSON lines of ``make``'s records, without the last newline ("" when it makes none)."""
    return "\n".join(
        to_json_line(record)
        if isinstance(record, AuditRecord)
        else json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        for record in make()
    )
