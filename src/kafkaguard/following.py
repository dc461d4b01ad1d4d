"""Following the store: what every long-running process (server, proxy, console) does to pick up the changes other
processes make to the same store.

Wait for the store's change feed (PostgreSQL: a notification from the committing node, at most
``sync_interval_seconds``; SQLite: that interval), then poll each kind's version (cheap when nothing changed). The
polls read the store, so they run in a worker thread, and they catch up from versions: a wake-up for nothing, or a
notification missed, loses nothing and applies nothing twice.

While the store is unreachable each kind's poll fails and the process goes on authorizing from its last snapshot.
A failing poll is logged when it starts failing (a WARNING; an unexpected error with its traceback), then again
only after ``FIRST_REPEAT_SECONDS``, twice that, and so on up to ``MAX_REPEAT_SECONDS``, each line saying how
many attempts failed; one INFO line when it works again. (Before: an unexpected error logged a traceback at every
attempt, two a second.)
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from kafkaguard.bootstrap import Services
from kafkaguard.store import StoreUnavailableError

log = logging.getLogger(__name__)

#: The change feed waits on a worker thread, which cancelling the task cannot interrupt: it waits in slices of at
#: most this, so stopping a process never waits for a sleeping thread longer than one slice.
WAIT_SLICE_SECONDS = 0.25

#: A failing poll's next log line comes this long after its first, then twice as long after that …
FIRST_REPEAT_SECONDS = 60.0
#: … up to this.
MAX_REPEAT_SECONDS = 3600.0

Poll = tuple[str, Callable[[], object]]


class FailureLog:
    """Logs a repeating failure when it starts, with back-off while it lasts, and when it ends."""

    def __init__(self, what: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._what = what
        self._clock = clock
        self._failures = 0
        self._next_at = 0.0
        self._gap = FIRST_REPEAT_SECONDS

    @property
    def failing(self) -> bool:
        return self._failures > 0

    def failed(self, error: Exception, *, expected: bool) -> None:
        """One attempt failed with ``error`` (``expected``: the store is unavailable; otherwise a traceback once)."""
        self._failures += 1
        now = self._clock()
        if self._failures == 1:
            if expected:
                log.warning("syncing %s from the store failed, keeping the last snapshot: %s", self._what, error)
            else:
                log.error("syncing %s from the store failed, keeping the last snapshot", self._what, exc_info=error)
            self._next_at, self._gap = now + FIRST_REPEAT_SECONDS, FIRST_REPEAT_SECONDS
        elif now >= self._next_at:
            log.warning(
                "syncing %s from the store still fails (%d attempts), keeping the last snapshot: %s",
                self._what,
                self._failures,
                error,
            )
            self._gap = min(2 * self._gap, MAX_REPEAT_SECONDS)
            self._next_at = now + self._gap

    def worked(self) -> None:
        if self._failures:
            log.info("syncing %s from the store works again (after %d failed attempts)", self._what, self._failures)
        self._failures = 0


def every_poll(services: Services) -> tuple[Poll, ...]:
    """What the server and the proxy follow: ACLs, principal groups, SCRAM credentials, topics and client quotas."""
    return (
        ("ACLs", services.acls.poll),
        ("principal groups", services.groups.poll),
        ("SCRAM credentials", services.credentials.poll),
        ("topics", services.topics.poll),
        ("client quotas", services.quotas.poll),
    )


async def follow_store(services: Services, polls: Sequence[Poll] | None = None) -> None:
    """Forever (until cancelled): wait for a change, then run ``polls`` (default: ``every_poll``)."""
    chosen = every_poll(services) if polls is None else tuple(polls)
    failures = {what: FailureLog(what) for what, _ in chosen}
    while True:
        await wait_for_change(services)
        for what, poll in chosen:
            try:
                await asyncio.to_thread(poll)
            except StoreUnavailableError as e:
                failures[what].failed(e, expected=True)
            except Exception as e:  # noqa: BLE001 - a bug or a corrupt row: this kind keeps its snapshot, others go on
                failures[what].failed(e, expected=False)
            else:
                failures[what].worked()


async def wait_for_change(services: Services) -> None:
    """Until the store's change feed reports a change, or ``sync_interval_seconds`` have passed."""
    store, loop = services.store, asyncio.get_running_loop()
    deadline = loop.time() + services.sections.store.sync_interval_seconds
    while (remaining := deadline - loop.time()) > 0:
        if await asyncio.to_thread(store.wait_for_change, min(remaining, WAIT_SLICE_SECONDS)):
            return
