"""``wait_for_change`` on PostgreSQL: one dedicated ``LISTEN kafkaguard_changes`` connection per store.

Every write's transaction sends a notification (a trigger on ``counters``, ``schema``), which PostgreSQL delivers
to every listening connection when, and only when, the transaction commits. ``wait`` returns at the first
notification, or after its timeout. Notifications that arrive while nobody waits stay in the connection's socket
and make the next ``wait`` return at once, so a change committed while the caller was polling is not slept over.

The listening connection is not pooled: it may break (PostgreSQL restarting) and is then reopened with an
exponential backoff (0.1 s doubling to 5 s), while ``wait`` keeps the polling behaviour (it sleeps its timeout).
A (re)connection returns at once, since notifications may have been missed meanwhile: the caller's poll, which
reads versions, catches up, so nothing is lost and nothing applied twice.
"""

from __future__ import annotations

import logging
import threading
import time

import psycopg

from kafkaguard.store.postgres.schema import CHANNEL
from kafkaguard.store.url import StoreUrl

log = logging.getLogger(__name__)

_FIRST_BACKOFF = 0.1
_MAX_BACKOFF = 5.0


class ChangeListener:
    """Waits for the store's change notifications. Thread-safe: one caller waits at a time, others wait for the
    lock (within their timeout) and then for notifications."""

    def __init__(self, url: StoreUrl, *, connect_timeout: float) -> None:
        self._url = url
        self._connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None
        self._backoff = _FIRST_BACKOFF
        self._next_attempt = 0.0
        self._closed = False
        self._failing = False

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.closed

    def wait(self, timeout: float) -> bool:
        """True at a notification, or on (re)connecting (changes may have been missed while not listening);
        False after ``timeout`` seconds without, or when not connected (then it sleeps out the timeout, trying
        to reconnect when the backoff allows)."""
        deadline = time.monotonic() + max(0.0, timeout)
        if not self._lock.acquire(timeout=max(0.0, timeout)):
            return False
        try:
            if self._closed:
                time.sleep(max(0.0, deadline - time.monotonic()))
                return False
            if self._conn is None:
                if time.monotonic() >= self._next_attempt and self._connect():
                    return True
                time.sleep(max(0.0, deadline - time.monotonic()))
                return False
            try:
                for _ in self._conn.notifies(timeout=max(0.0, deadline - time.monotonic()), stop_after=1):
                    return True
            except psycopg.Error as e:
                self._lost(e)
                return True  # the caller's poll finds out what the broken connection may have hidden
            return False
        finally:
            self._lock.release()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _connect(self) -> bool:
        try:
            conn = psycopg.connect(
                self._url.conninfo(), autocommit=True, connect_timeout=max(1, round(self._connect_timeout))
            )
            conn.execute(f"LISTEN {CHANNEL}")
        except psycopg.Error as e:
            self._lost(e)
            return False
        self._conn = conn
        self._backoff = _FIRST_BACKOFF
        if self._failing:
            log.info("listening for changes on %s again", self._url)
        self._failing = False
        return True

    def _lost(self, e: psycopg.Error) -> None:
        """Drop the connection and schedule the next attempt; log the first failure of a run only."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if not self._failing:
            first_line = self._url.scrub(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
            log.warning(
                "listening for changes on %s failed (%s); polling every interval and reconnecting",
                self._url,
                first_line,
            )
        self._failing = True
        self._next_attempt = time.monotonic() + self._backoff
        self._backoff = min(_MAX_BACKOFF, self._backoff * 2)
