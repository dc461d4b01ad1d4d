"""The server's audit trail: CloudEvents envelopes (``audit.records.cloudevents``) of authorization decisions,
management changes and logins, made and written off the event loop, to every sink (``audit.trail.sinks``: the JSON lines
file, the embedded default; a Kafka topic, ``audit.trail.kafka_sink``).

Records are appended to an in-memory buffer (cheap, never blocks) and a background task writes the buffer in a worker
thread every ``flush_interval`` seconds. A record may be queued unmade (``record_later``: a function that makes it): one
request refusing 10,000 topics queued 20,000 decisions whose explanation and JSON held the event loop for a large
fraction of a second (see docs/benchmarks.md, "Figures from the code"); made in the writer thread, none of it. The
envelope and its JSON line are made there too, once for all sinks. The buffer is bounded: if the sinks cannot keep up,
the oldest unwritten entries (a record, or one request's records) are dropped and counted, and the count is written into
the file as a line of its own (and logged), so a gap is never silent.

In ``usage`` mode (the default) every decision is queued as in ``all`` mode, and the writer thread folds them
(``kafkaguard.audit.records.usage``): allowed decisions into one record per access and window, repeated denials into one
record with a count. A window's records are written once it has ended (checked at every background flush) and
at ``stop``. The event loop's part stays one append per request; the folding is the writer thread's.

Management and authentication events come through ``record_event(category, subject, data)`` (any thread). Failed
logins are collapsed per window (``audit.records.login_failures``): a flood of identical failures is one event with a
count.

Each event goes to the sinks with the principal who caused it (``audit.records.event_principal``: the request's, the
actor's, the login's; bounded), found once here: the Kafka sink's spool shares its room out by it when the cluster is
away.

The log says who asked for what, from where, and the answer: its files are readable by their owner only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from kafkaguard.audit.records.cloudevents import (
    AUTHENTICATION,
    AUTHORIZATION,
    CATEGORIES,
    SHADOW,
    envelope,
    source_of,
    to_json,
)
from kafkaguard.audit.records.event_principal import event_principal
from kafkaguard.audit.records.login_failures import FailureWindows
from kafkaguard.audit.records.record import AuditRecord, to_dict
from kafkaguard.audit.records.shadow import shadow_subject
from kafkaguard.audit.records.trail_statistics import DROPPED, AuditTrailStatistics
from kafkaguard.audit.records.usage import DEFAULT_MAX_KEYS, UsageAggregator
from kafkaguard.audit.trail.sinks import FileSink, Outgoing, Sink
from kafkaguard.authorizer.decision_memo import DecisionMemo
from kafkaguard.model.json_value import JsonObject, JsonValue

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Event:
    """One event for the sinks, before its envelope: category, subject, data and when it happened."""

    category: str
    subject: str
    data: JsonObject
    time: datetime | str


@dataclass(frozen=True, slots=True)
class _Decisions:
    """A function making one request's authorization records (in the writer thread, where usage mode folds them)."""

    make: Callable[[], Sequence[AuditRecord | Mapping[str, JsonValue]]]


#: What the buffer holds: a note line for the file (a gap), a request's decisions, or a function that makes events
#: (all made in the writer thread).
_Entry = str | _Decisions | Callable[[], Sequence[Event]]


class AuditLog:
    def __init__(
        self,
        path: Path | None,
        *,
        mode: str = "denied",
        max_bytes: int = 100 * 1024 * 1024,
        backups: int = 5,
        flush_interval: float = 0.2,
        max_buffered: int = 100_000,
        sinks: Sequence[Sink] = (),
        source: str | None = None,
        statistics: AuditTrailStatistics | None = None,
        login_failure_window_seconds: float = 60.0,
        usage_window_seconds: float = 60.0,
        usage_max_keys: int = DEFAULT_MAX_KEYS,
    ) -> None:
        """``path``: the JSON lines file (None: no file sink, only ``sinks``); ``source``: the envelopes' source
        (default ``kafkaguard://<hostname>``)."""
        self.path = path
        self.log_allowed = mode in ("all", "usage")
        #: Folds decisions per window in ``usage`` mode (used by the writer thread only); None otherwise.
        self.usage = UsageAggregator(usage_window_seconds, usage_max_keys) if mode == "usage" else None
        #: The deciding rules of repeated decisions (used by the writer thread only, where records are made).
        self.memo = DecisionMemo()
        self.statistics = statistics if statistics is not None else AuditTrailStatistics()
        file_sink: list[Sink] = (
            [FileSink(path, max_bytes=max_bytes, backups=backups, statistics=self.statistics)]
            if path is not None
            else []
        )
        #: Every sink, the file first.
        self.sinks: tuple[Sink, ...] = (*file_sink, *sinks)
        self.source = source if source is not None else source_of()
        self._flush_interval = flush_interval
        #: Note lines, or functions that make events (called in the writer thread).
        self._buffer: deque[_Entry] = deque()
        self._max_buffered = max_buffered
        self._dropped = 0
        self._failures = FailureWindows(login_failure_window_seconds)
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        # One flush at a time, so that flush() returns only once everything recorded before it is written, even
        # when the background flush had already taken those lines and was still writing them.
        self._flushing = asyncio.Lock()
        self._started: list[Sink] = []

    def record(self, record: AuditRecord) -> None:
        """Queue one record; never blocks."""
        self.record_later(partial(tuple, (record,)))

    def record_later(self, make: Callable[[], Sequence[AuditRecord | Mapping[str, JsonValue]]]) -> None:
        """Queue the records ``make`` returns, made when they are written, off the event loop (``make`` must only
        read immutable state, such as one authorizer snapshot's decisions); never blocks. A mapping among them is
        a shadow event's data (``audit.records.shadow.shadow_data``): never folded. The buffer's bound counts each call
        once, however many records it makes."""
        self._queue(_Decisions(make))

    def record_events_later(self, make: Callable[[], Sequence[Event]]) -> None:
        """Queue the events ``make`` returns, made in the writer thread (as ``record_later``'s records: ``make``
        reads only immutable state); never blocks. The broker's refusals come this way
        (``proxy.broker_refusals``)."""
        self._queue(make)

    # Any: the events relayed from the services carry ``Mapping[str, object]`` (``ManagementEvent.data``), which
    # json.dumps checks when the line is written; the EventRelay's listener type fixes this parameter's.
    def record_event(self, category: str, subject: str, data: Mapping[str, Any]) -> None:
        """Queue one management or authentication event (``data`` as issue 27's spec says: never a password, a
        token, a salt or a key); never blocks, callable from any thread. A failed login (authentication, result
        FAILURE) is collapsed with identical ones in its window and written when the window ends.

        :raises ValueError: ``category`` is not one of ``audit.records.cloudevents.CATEGORIES``.
        """
        if category not in CATEGORIES:
            raise ValueError(f"unknown audit event category {category!r}; known: {', '.join(CATEGORIES)}")
        now = datetime.now(UTC)
        if category == AUTHENTICATION and data.get("result") == "FAILURE":
            at_once = self._failures.add(subject, data, now)
            if at_once is None:
                return
            data, now = at_once.data, at_once.time
        self._queue(partial(tuple, (Event(category, subject, dict(data), now),)))

    def _queue(self, entry: _Entry) -> None:
        # deque's append and popleft are atomic: record_event may come from another thread than the loop's
        if len(self._buffer) >= self._max_buffered:
            with contextlib.suppress(IndexError):  # emptied by a flush meanwhile
                self._buffer.popleft()
                self._dropped += 1
        self._buffer.append(entry)

    def start(self) -> None:
        """Start every sink (the file's directory is created, the log and its backups set to 0600 where they are
        wider; the Kafka sink opens its spool and starts its sender) and the background flush. Runs once at server
        start, before the first record is written.

        :raises OSError: the file's directory cannot be created.
        :raises InvalidConfigError: a sink cannot start (the spool directory cannot be written).
        """
        try:
            for sink in self.sinks:
                sink.start()
                self._started.append(sink)
        except BaseException:
            self._close_sinks()
            raise
        self._task = asyncio.create_task(self._run(), name="audit-log")

    async def stop(self) -> None:
        """Write everything still buffered (the failed logins of open windows, and in usage mode the open window's
        records too), then close the sinks."""
        self._stopping.set()
        if self._task is not None:
            await self._task
            self._task = None
        await self.flush(end_windows=True)
        await asyncio.to_thread(self._close_sinks)

    async def flush(self, *, end_windows: bool = False) -> None:
        """Write everything recorded so far (failed logins: those whose window ended; with ``end_windows``, every
        open window too); returns when the sinks have it (the file: written; the Kafka sink: in its spool). In usage
        mode, decisions are held until their window ends (or ``end_windows``: now)."""
        async with self._flushing:
            self._queue_failures(None if end_windows else datetime.now(UTC))
            lines = self._take()
            # len() of the writer thread's dict: a racy read is harmless (worst case one flush later).
            if lines or (self.usage is not None and (end_windows or len(self.usage))):
                await asyncio.to_thread(self._write, lines, end_windows)

    async def _run(self) -> None:
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self._flush_interval)
            try:
                await self.flush()
            except OSError as e:
                log.error("audit log %s cannot be written: %s", self.path, e)

    def _queue_failures(self, now: datetime | None) -> None:
        for done in self._failures.take(now):
            self._queue(partial(tuple, (Event(AUTHENTICATION, done.subject, done.data, done.time),)))

    def _take(self) -> list[_Entry]:
        lines = list(self._buffer)
        self._buffer.clear()
        if self._dropped:
            gap = {"time": datetime.now(UTC).isoformat(), "dropped_records": self._dropped}
            lines.insert(0, json.dumps(gap))
            log.warning("audit log fell behind: %d record(s) dropped", self._dropped)
            for sink in self.sinks:
                self.statistics.count(sink.name, DROPPED, self._dropped)
            self._dropped = 0
        return lines

    def _write(self, entries: list[_Entry], end_windows: bool = False) -> None:
        """In the writer thread: make the events (in usage mode, fold the decisions and add the records of every
        window that has ended; all of them with ``end_windows``), their envelopes and JSON lines, and hand them to
        every sink (a sink that fails is logged; the others still get the batch)."""
        outgoing: list[Outgoing] = []

        def add(events: Sequence[Event]) -> None:
            for event in events:
                made = envelope(event.category, event.subject, event.data, source=self.source, time=event.time)
                principal = event_principal(event.category, event.subject, event.data)
                outgoing.append(Outgoing(event.category, event.subject, event.data, to_json(made), principal))

        usage = self.usage
        for entry in entries:
            if isinstance(entry, str):
                outgoing.append(Outgoing(None, "", {}, entry))
            elif isinstance(entry, _Decisions):
                made = entry.make()
                records = [item for item in made if isinstance(item, AuditRecord)]
                add(_authorization_events(records if usage is None else usage.add(records)))
                add([_shadow_event(item) for item in made if not isinstance(item, AuditRecord)])
            else:
                add(entry())
        if usage is not None:
            add(_authorization_events(usage.drain() if end_windows else usage.expire(datetime.now(UTC))))
        if not outgoing:
            return
        failed: OSError | None = None
        for sink in self.sinks:
            try:
                sink.write(outgoing if sink.name == "file" else [o for o in outgoing if o.category is not None])
            except OSError as e:
                if sink.name == "file":
                    failed = e  # reported by the caller, as before
                else:
                    log.error("audit sink %s cannot take %d record(s): %s", sink.name, len(outgoing), e)
        if failed is not None:
            raise failed

    def _close_sinks(self) -> None:
        while self._started:
            sink = self._started.pop()
            try:
                sink.close()
            except OSError as e:
                log.error("audit sink %s did not close cleanly: %s", sink.name, e)


def authorization_subject(record: AuditRecord) -> str:
    """``RESOURCE_TYPE:name``: what an authorization record is about."""
    return f"{record.resource_type.name}:{record.resource_name}"


def _shadow_event(data: Mapping[str, JsonValue]) -> Event:
    time = data["time"]
    assert isinstance(time, str)  # noqa: S101 - shadow_data's time is record.to_dict's formatted text
    return Event(SHADOW, shadow_subject(data), dict(data), time)


def _authorization_events(records: Sequence[AuditRecord]) -> list[Event]:
    """The events of authorization records (made in the writer thread)."""
    return [Event(AUTHORIZATION, authorization_subject(r), to_dict(r), r.time) for r in records]
