"""Repeated failure lines collapsed per address and reason, with counts.

A misconfigured client retries every ~50 ms, and each attempt used to write one line (~900 lines in 20 s from two
mTLS clients with a certificate no rule maps). A line logged with ``extra=COLLAPSE`` passes once per ``window``
for its exact text (the sites put the client's address without its port and the reason in it, so the text *is*
the (address, reason) key); the copies within the window are counted, and their count is written as one line
when the window has passed (at the next collapsible line, or at ``flush`` when the process stops)::

    Failed authentication with /10.1.2.3 (listener SSL://:9093, SSL handshake failed): certificate required
    … 20 s later, or at shutdown:
    Failed authentication with /10.1.2.3 (…): certificate required [repeated 412 more times in 60 s]

Cost model: a dict lookup per collapsible line; a sweep of the open runs at most once a second; at most
``max_keys`` runs kept (the oldest reported early when a flood of distinct addresses fills it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

#: ``log.info(..., extra=COLLAPSE)``: this line is one of a run that may repeat (a client's failures).
COLLAPSE = {"kafkaguard_collapse": True}

_Key = tuple[str, int, str]


@dataclass(slots=True)
class _Run:
    record: logging.LogRecord
    started: float
    last: float
    repeats: int = 0


class RepeatedLines(logging.Filter):
    """A handler filter: the first line of a run passes, its repeats within ``window`` seconds are counted and
    reported as one line (through ``emit``, the handler's own ``handle``)."""

    def __init__(
        self,
        emit: Callable[[logging.LogRecord], object],
        *,
        window: float = 60.0,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self._emit, self._window, self._max_keys, self._clock = emit, window, max_keys, clock
        self._runs: dict[_Key, _Run] = {}
        self._next_sweep = 0.0
        # lines come from the event loop and from the audit writer's thread
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "kafkaguard_collapse", False):
            return True
        now = self._clock()
        key = (record.name, record.levelno, record.getMessage())
        with self._lock:
            ended = self._sweep(now)
            run = self._runs.get(key)
            if run is not None:
                run.repeats += 1
                run.last = now
                passes = False
            else:
                if len(self._runs) >= self._max_keys:
                    oldest = min(self._runs, key=lambda k: self._runs[k].started)
                    ended.append(self._runs.pop(oldest))
                self._runs[key] = _Run(record, now, now)
                passes = True
        self._report(ended)
        return passes

    def flush(self) -> None:
        """Report every open run's repeats (the process is stopping)."""
        with self._lock:
            ended = list(self._runs.values())
            self._runs.clear()
        self._report(ended)

    def _sweep(self, now: float) -> list[_Run]:
        if now < self._next_sweep:
            return []
        self._next_sweep = now + 1.0
        ended = [key for key, run in self._runs.items() if now - run.started >= self._window]
        return [self._runs.pop(key) for key in ended]

    def _report(self, ended: list[_Run]) -> None:
        for run in ended:
            if run.repeats:
                self._emit(_repeated(run))


def _repeated(run: _Run) -> logging.LogRecord:
    """The run's first line, with its count of repeats and the time from the first line to the last repeat."""
    first = run.record
    line = logging.LogRecord(
        first.name,
        first.levelno,
        first.pathname,
        first.lineno,
        f"{first.getMessage()} [repeated {run.repeats} more time{'s' if run.repeats != 1 else ''} in "
        f"{run.last - run.started:.0f} s]",
        None,
        None,
    )
    return line


def collapse_repeats(logger: logging.Logger | None = None, *, window: float = 60.0) -> list[RepeatedLines]:
    """Put a ``RepeatedLines`` on each handler of ``logger`` (the root's: ``logging.basicConfig``'s); returns them
    (``flush`` each when the process stops)."""
    filters = []
    for handler in (logger or logging.getLogger()).handlers:
        repeated = RepeatedLines(handler.handle, window=window)
        handler.addFilter(repeated)
        filters.append(repeated)
    return filters
