"""Keeping the cyclic garbage collector's pauses short however many connections are open.

CPython's full collection walks every tracked object that is not frozen, and runs whenever the objects that survived
younger collections since the last one reach a quarter of the old ones. A served connection holds ~43 tracked objects:
with thousands of connections open (16 addresses, each sending one ApiVersions and then nothing until its login
deadline) full collections came every few seconds, and every other client waited through each (``bench_abuse``,
``idle-hello``; see docs/benchmarks.md, "Figures from the code"). Thousands of logged-in clients cost the same.

The policy: every ``FREEZE_INTERVAL`` what is alive is frozen (``gc.freeze``: O(1), it moves the generations'
lists into the permanent one, which collections skip). Young collections still find the cycles of requests in
flight; the open connections, sessions and caches are out of every collection's reach, so a full collection walks
at most one interval's survivors. A frozen object is still freed by its reference count; what the freeze holds back
is a frozen object that later becomes part of a garbage cycle. kafkaguard's request and connection paths leave none
(``tests/node/test_collector.py`` counts the server's, ``tests/proxy/test_no_garbage_cycles.py`` the proxy's relay
paths; asyncio's own transport cycle is broken by ``break_transport_cycles``); whatever another path leaves is
reclaimed (``gc.unfreeze()`` and a full collection: the one pause in proportion to the heap) every
``RECLAIM_INTERVAL``, or sooner when the process's resident memory has grown by ``RECLAIM_AFTER_GROWTH`` since the
last reclaim. Nothing a client does triggers a reclaim short of that growth, which the connection limits keep far
off.

Why not count the frozen objects: ``gc.get_freeze_count()`` walks the permanent generation's list, O(frozen objects)
on every tick, which showed in the quiet p99 (see docs/benchmarks.md, "Figures from the code").

Cost model: a tick O(1) (a freeze and one read of ``/proc/self/statm``); a reclaim O(live objects), once an hour.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import time
from asyncio import selector_events
from collections.abc import Callable

log = logging.getLogger(__name__)

#: How often what is alive is frozen: a full collection walks at most this long's survivors.
FREEZE_INTERVAL = 0.1
#: Frozen garbage cycles are reclaimed this often …
RECLAIM_INTERVAL = 3600.0
#: … or once resident memory has grown this much since the last reclaim.
RECLAIM_AFTER_GROWTH = 1024 * 1024 * 1024
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes() -> int | None:
    """This process's resident memory (Linux's ``/proc/self/statm``), or None where there is none to read."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def break_transport_cycles() -> None:
    """Make asyncio's socket transports drop their one reference cycle when their connection is lost.

    CPython 3.11's ``_SelectorSocketTransport`` stores a bound method of itself (``_read_ready_cb``) and never drops
    it: every closed connection left its transport, socket wrapper, extra-info dict and their tuples (7 objects) as
    cyclic garbage per closed connection, and frozen they would wait for the next reclaim. This
    wraps ``_call_connection_lost`` (asyncio's last call on a transport; it has stopped reading before it) to drop
    the method after it: the server's connections, their TLS transports' sockets and the proxy's upstream links
    alike. Idempotent; a Python whose transport has no such attribute is left alone. Why here and by hand: the
    cycle is asyncio's, and the transports are made inside asyncio (``connect_accepted_socket``,
    ``open_connection``), where no subclass can be put.
    """
    cls = getattr(selector_events, "_SelectorSocketTransport", None)
    lost = getattr(cls, "_call_connection_lost", None)
    if cls is None or lost is None or getattr(lost, _PATCHED, False):
        return

    def _call_connection_lost(self: object, exc: BaseException | None) -> None:
        try:
            lost(self, exc)
        finally:
            if getattr(self, _READ_CALLBACK, None) is not None:
                setattr(self, _READ_CALLBACK, None)

    setattr(_call_connection_lost, _PATCHED, True)
    # A function's __wrapped__ is undeclared in typeshed, but it is the attribute inspect.unwrap follows.
    _call_connection_lost.__wrapped__ = lost  # type: ignore[attr-defined]
    cls._call_connection_lost = _call_connection_lost


_PATCHED = "_kafkaguard_breaks_cycle"
_READ_CALLBACK = "_read_ready_cb"


class Collector:
    """The policy above, on the running loop from ``start`` to ``stop`` (``clock`` and ``resident`` for tests)."""

    def __init__(
        self, *, clock: Callable[[], float] = time.monotonic, resident: Callable[[], int | None] = resident_bytes
    ) -> None:
        self._clock = clock
        self._resident = resident
        self._task: asyncio.Task[None] | None = None
        self._reclaimed_at = 0.0
        self._resident_after_reclaim: int | None = None
        #: Reclaims done, for tests and logs.
        self.reclaims = 0

    def start(self) -> None:
        break_transport_cycles()
        self._reclaim()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="gc-freeze")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def tick(self) -> None:
        """Freeze what is alive; reclaim when it is time, or when memory has grown enough."""
        gc.freeze()
        due = self._clock() - self._reclaimed_at >= RECLAIM_INTERVAL
        resident = self._resident()
        if resident is not None and self._resident_after_reclaim is not None:
            due = due or resident - self._resident_after_reclaim >= RECLAIM_AFTER_GROWTH
        if due:
            started = time.perf_counter()
            found = self._reclaim()
            self.reclaims += 1
            log.info(
                "garbage collector: reclaimed %d unreachable objects in %.0f ms",
                found,
                (time.perf_counter() - started) * 1000,
            )

    def _reclaim(self) -> int:
        gc.unfreeze()
        found = gc.collect()
        gc.freeze()
        self._reclaimed_at = self._clock()
        self._resident_after_reclaim = self._resident()
        return found

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(FREEZE_INTERVAL)
            self.tick()
