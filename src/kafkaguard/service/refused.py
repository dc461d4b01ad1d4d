"""Changes refused by authorization, as management events: who tried to change what, bounded so that refusing stays
cheap whatever a caller sends.

Every door that refuses a change because the caller may not make it (the Kafka wire's CreateAcls, DeleteAcls,
AlterUserScramCredentials, AlterClientQuotas, CreateTopics and DeleteTopics, on ``serve`` and on the proxy; the
console's 403 on a change) gives the refused items to ``RefusedChanges.events_for``, and the events it returns to
``record`` on a worker thread (``protocol.scope.RequestScope.refuse``, ``console.dependencies.require``). ``record``
stores them in the management history and passes them to the audit trail (``service.events``: ``store_refused`` +
``EventRelay.publish``), as the services do with the items they refuse for being invalid. Such a caller is exactly
the one that must not be able to fill the history, so two bounds apply:

* **per request**: the first ``per_request`` refused items get an event each, and one summary event counts the
  rest (``{"summary": {"request": "CreateAcls", "items": 10000, "recorded": 20, "not_recorded": 9980}}``);
* **per principal**: a token bucket of ``burst`` events that refills at ``per_minute`` a minute. A request takes a
  token per event it records; with fewer tokens left than it needs, it records as many items as the tokens allow
  but one, and a summary of the rest; with none, nothing. Items not recorded for the rate are counted, logged (the
  first such request of a principal in each ``log_interval``, at most ``max_log_lines`` principals an interval, then
  one line with the interval's totals) and exported (``counts()``: the console's
  ``kafkaguard_refused_changes_total{outcome}``) — never silently lost.

Every text in a refused event is cut to ``MAX_TEXT`` characters and every list or map to ``MAX_ENTRIES`` entries
(saying how many more there were): a refused request's names are the caller's, and a 1 MiB topic name must not
become 1 MiB of history.

Worked example (per_request 20, burst 100, 100/min): User:mallory sends CreateAcls with 10,000 bindings, five times
back to back (too fast for a token to come back). The first request records 20 events and a summary (21 tokens),
the second to fourth the same (84 tokens in all), the fifth has 16 tokens: 15 events and a summary counting 9,985.
A sixth finds the bucket empty: its 10,000 items are counted as rate-limited and one WARNING names User:mallory; 21
tokens are back 12.6 s later. ``counts()`` then says recorded 95, summarized 49,905, rate_limited 10,000.

Cost model: ``events_for`` admits in O(1) whatever the number of items (one bucket update under a lock) and makes
at most ``per_request + 1`` events, so it may run on an event loop; ``record`` is one store transaction, on a worker
thread (the doors' ``asyncio.to_thread``). Memory: one bucket per principal refused within the time its bucket takes
to refill (full buckets are dropped at each interval), plus at most ``max_log_lines`` logged principals. Standard
library only and thread-safe.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from kafkaguard.model import Actor, ManagementEvent
from kafkaguard.service.events import EventRelay, store_refused
from kafkaguard.store import HistoryStore

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_K = TypeVar("_K")

#: Characters kept of any text in a refused event (a name, a principal, a host); the rest is cut and counted.
MAX_TEXT = 512
#: Entries kept of any list or map in a refused event (an entity's quota keys ...); the rest is counted.
MAX_ENTRIES = 20
#: How long a principal's rate-limited refusals stay quiet in the log after the line that named it.
DEFAULT_LOG_INTERVAL_SECONDS = 60.0
#: Principals named in the log per interval at most; the rest are in the interval's summary line.
DEFAULT_MAX_LOG_LINES = 20

#: ``counts()`` keys: items with an event of their own, counted in their request's summary event, and not recorded
#: because their principal's bucket was empty.
RECORDED, SUMMARIZED, RATE_LIMITED = "recorded", "summarized", "rate_limited"
OUTCOMES = (RECORDED, SUMMARIZED, RATE_LIMITED)


@dataclass(frozen=True, slots=True)
class RefusalLimits:
    """``refused_changes_per_request``, ``refused_changes_burst``, ``refused_changes_per_minute`` (``config``)."""

    per_request: int = 20
    burst: int = 100
    per_minute: float = 100.0

    def __post_init__(self) -> None:
        if self.per_request < 1 or self.burst < 1 or not self.per_minute > 0:
            raise ValueError(f"refused-change limits must be positive, got {self}")


@dataclass(frozen=True, slots=True)
class Admitted:
    """What one request may record: ``individual`` items with an event each, then a summary of ``summarized``
    items (0: no summary); ``limited`` items recorded not at all."""

    individual: int
    summarized: int
    limited: int


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class RefusedChanges:
    """The process's recorder of changes refused by authorization (see the module docstring). Thread-safe."""

    def __init__(
        self,
        store: HistoryStore,
        events: EventRelay,
        limits: RefusalLimits | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        log_interval_seconds: float = DEFAULT_LOG_INTERVAL_SECONDS,
        max_log_lines: int = DEFAULT_MAX_LOG_LINES,
    ) -> None:
        self._store = store
        self._events = events
        self.limits = limits if limits is not None else RefusalLimits()
        self._clock = clock
        self._interval = log_interval_seconds
        self._max_lines = max_log_lines
        self._lock = threading.Lock()
        self._buckets: dict[str, _Bucket] = {}
        self._counts: Counter[str] = Counter()
        self._window_start: float | None = None
        #: Principals named in the log in the current interval, and the rate-limited items of the interval.
        self._logged: set[str] = set()
        self._limited: Counter[str] = Counter()

    def __repr__(self) -> str:
        return f"RefusedChanges({self.limits}, {dict(self.counts())})"

    @property
    def principals_tracked(self) -> int:
        """Principals whose bucket is kept now (the memory this takes; full buckets go at each interval)."""
        with self._lock:
            return len(self._buckets)

    def counts(self) -> dict[str, int]:
        """Refused items so far by outcome (``RECORDED``, ``SUMMARIZED``, ``RATE_LIMITED``), each key present."""
        with self._lock:
            return {outcome: self._counts[outcome] for outcome in OUTCOMES}

    # ------------------------------------------------------------------------------------------------ recording

    def events_for(
        self,
        actor: Actor,
        request: str,
        items: Sequence[_T],
        event_of: Callable[[_T], ManagementEvent],
    ) -> list[ManagementEvent]:
        """The events to ``record`` for a request's refused ``items``, admitted against ``actor``'s bucket now:
        O(1) admission, then ``event_of`` (one item's event) called for the admitted items only, at most
        ``per_request + 1`` times. ``request`` names the request in a summary (``CreateAcls``, ``POST /api/acls``).
        Cheap enough for an event loop; ``record`` is not."""
        if not items:
            return []
        admitted = self.admit(actor.principal, len(items), request)
        events = [bounded(event_of(item)) for item in items[: admitted.individual]]
        if admitted.summarized:
            first = bounded(event_of(items[admitted.individual]))
            events.append(summary_event(first, request, len(items), admitted.individual, admitted.summarized))
        return events

    def record(self, events: Sequence[ManagementEvent]) -> None:
        """Store the events (one transaction) and pass them to the audit trail. Blocks on the store: a worker
        thread's call (the doors use ``asyncio.to_thread``). A store that fails is logged (``store_refused``), never
        raised: the refusal is answered either way."""
        store_refused(self._store, events)
        self._events.publish(events)

    def admit(self, principal: str, items: int, request: str = "request") -> Admitted:
        """Take tokens of ``principal``'s bucket for a request of ``items`` refused items; O(1)."""
        limits = self.limits
        individual = min(items, limits.per_request)
        needed = individual + (1 if items > individual else 0)
        now = self._clock()
        with self._lock:
            lines = self._roll(now)
            bucket = self._buckets.get(principal)
            if bucket is None:
                bucket = self._buckets[principal] = _Bucket(float(limits.burst), now)
            else:
                refill = (now - bucket.at) * limits.per_minute / 60.0
                bucket.tokens, bucket.at = min(float(limits.burst), bucket.tokens + refill), now
            tokens = min(needed, int(bucket.tokens))
            bucket.tokens -= tokens
            if tokens == needed:
                admitted = Admitted(individual, items - individual, 0)
            elif tokens > 0:
                admitted = Admitted(tokens - 1, items - (tokens - 1), 0)
            else:
                admitted = Admitted(0, 0, items)
            self._counts[RECORDED] += admitted.individual
            self._counts[SUMMARIZED] += admitted.summarized
            if admitted.limited:
                self._counts[RATE_LIMITED] += admitted.limited
                self._limited[principal] += admitted.limited
                if principal not in self._logged and len(self._logged) < self._max_lines:
                    self._logged.add(principal)
                    lines.append(
                        f"{principal}'s refused changes are above refused_changes_burst {limits.burst} / "
                        f"refused_changes_per_minute {limits.per_minute:g}: the {items} refused item(s) of its "
                        f"{request} are not recorded in the management history, nor its further ones for now "
                        "(counted in kafkaguard_refused_changes_total, outcome rate_limited; next summary "
                        f"within {self._interval:g} s)"
                    )
        for line in lines:
            log.warning("%s", line)
        return admitted

    def flush(self) -> None:
        """Log the current interval's summary now (at shutdown), if anything was rate-limited in it."""
        with self._lock:
            line = self._summary()
            self._limited.clear()
        if line is not None:
            log.warning("%s", line)

    def _roll(self, now: float) -> list[str]:
        """Start a new interval when the current one is over: its summary line (if any) to log, and the full
        buckets dropped (a full bucket is what a new one would be). Called with the lock held."""
        if self._window_start is not None and now - self._window_start < self._interval:
            return []
        line = self._summary() if self._window_start is not None else None
        self._window_start = now
        self._logged.clear()
        self._limited.clear()
        limits = self.limits
        full = [
            principal
            for principal, bucket in self._buckets.items()
            if bucket.tokens + (now - bucket.at) * limits.per_minute / 60.0 >= limits.burst
        ]
        for principal in full:
            del self._buckets[principal]
        return [line] if line is not None else []

    def _summary(self) -> str | None:
        if not self._limited:
            return None
        top = ", ".join(f"{principal} {count}" for principal, count in self._limited.most_common(5))
        more = f" and {len(self._limited) - 5} more principal(s)" if len(self._limited) > 5 else ""
        return (
            f"{sum(self._limited.values())} refused item(s) were not recorded in the management history in the "
            f"last {self._interval:g} s (refused_changes_burst / refused_changes_per_minute): {top}{more}"
        )


def summary_event(
    first: ManagementEvent, request: str, items: int, recorded: int, not_recorded: int
) -> ManagementEvent:
    """The event that counts a request's refused items beyond those recorded one by one: the action, actor and
    error of the first of them, the request as its subject, and the counts."""
    return ManagementEvent(
        action=first.action,
        actor=first.actor,
        subject=request,
        result=first.result,
        error_message=first.error_message,
        details={"summary": {"request": request, "items": items, "recorded": recorded, "not_recorded": not_recorded}},
        time=first.time,
    )


def bounded(event: ManagementEvent) -> ManagementEvent:
    """The event with every text cut to ``MAX_TEXT`` characters and every list or map to ``MAX_ENTRIES`` entries
    (see the module docstring); the actor is the door's, never cut."""
    return replace(
        event,
        subject=_text(event.subject),
        error_message=None if event.error_message is None else _text(event.error_message),
        principal=None if event.principal is None else _text(event.principal),
        resource_name=None if event.resource_name is None else _text(event.resource_name),
        details=_entries(event.details),
    )


def _text(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return text
    return f"{text[:MAX_TEXT]}…[{len(text) - MAX_TEXT} more characters]"


def _entries(value: Mapping[_K, object]) -> dict[str, object]:
    out = {_text(str(key)): _value(item) for key, item in itertools.islice(value.items(), MAX_ENTRIES)}
    if len(value) > MAX_ENTRIES:
        out["…"] = f"{len(value) - MAX_ENTRIES} more entries"
    return out


def _value(value: object) -> object:
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, Mapping):
        return _entries(value)
    if isinstance(value, list | tuple):
        items = [_value(item) for item in value[:MAX_ENTRIES]]
        if len(value) > MAX_ENTRIES:
            items.append(f"… {len(value) - MAX_ENTRIES} more entries")
        return items
    return value
