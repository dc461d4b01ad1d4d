"""Following the store: what every long-running process (server, proxy, console) does to pick up the changes other
processes make to the same store.

Wait for the store's change feed (PostgreSQL: a notification from the committing node, at most
``sync_interval_seconds``; SQLite: that interval), then poll each kind's version (cheap when nothing changed). The
polls read the store, so they run in a worker thread, and they catch up from versions: a wake-up for nothing, or a
notification missed, loses nothing and applies nothing twice.

While the store is unreachable each kind's poll fails: that is logged once (a WARNING, then one INFO line when it
works again) and the process goes on authorizing from its last snapshot.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from kafkaguard.bootstrap import Services
from kafkaguard.store import StoreUnavailableError

log = logging.getLogger(__name__)

#: The change feed waits on a worker thread, which cancelling the task cannot interrupt: it waits in slices of at
#: most this, so stopping a process never waits for a sleeping thread longer than one slice.
WAIT_SLICE_SECONDS = 0.25

Poll = tuple[str, Callable[[], object]]


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
    failing: set[str] = set()
    while True:
        await wait_for_change(services)
        for what, poll in chosen:
            try:
                await asyncio.to_thread(poll)
            except StoreUnavailableError as e:
                if what not in failing:
                    log.warning("syncing %s from the store failed, keeping the last snapshot: %s", what, e)
                    failing.add(what)
                continue
            except Exception:
                log.exception("syncing %s from the store failed; retrying", what)
                continue
            if what in failing:
                log.info("syncing %s from the store works again", what)
                failing.discard(what)


async def wait_for_change(services: Services) -> None:
    """Until the store's change feed reports a change, or ``sync_interval_seconds`` have passed."""
    store, loop = services.store, asyncio.get_running_loop()
    deadline = loop.time() + services.settings.sync_interval_seconds
    while (remaining := deadline - loop.time()) > 0:
        if await asyncio.to_thread(store.wait_for_change, min(remaining, WAIT_SLICE_SECONDS)):
            return
