"""What an unauthenticated console login may cost: PBKDF2 on a small executor of its own, behind a bound on the
derivations running or waiting, and a budget of failed logins per client address.

Why: the console shares its process — with ``kafkaguard serve --http-listener`` its event loop and CPU too — with
the Kafka listener. A login that is not in the cache costs one PBKDF2 derivation (4096–16384 iterations,
milliseconds of CPU). On the shared default executor, 24 clients sending wrong passwords kept every worker thread
deriving and raised the Kafka listener's CreateAcls median from 2.1 ms to 156 ms. Here at most ``workers`` threads
derive, at most ``max_pending`` derivations run or wait, and a client address that has used up its failed logins is
refused before any work is done. Past either bound the answer is 429 with ``Retry-After`` at once: nothing queues
without bound. On Linux the derivation threads run at the lowest CPU priority, so when they compete with the event
loop for a core, the event loop — Kafka requests included — goes first.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from kafkaguard.errors import KafkaguardError

P = ParamSpec("P")
T = TypeVar("T")

#: Client addresses whose failed logins are remembered; the least recently seen is forgotten first.
DEFAULT_MAX_CLIENTS = 10_000
#: ``nice`` of the derivation threads: the lowest priority, so they take only the CPU the event loop leaves.
_DERIVATION_NICE = 19


class LoginThrottledError(KafkaguardError):
    """A login refused before it was checked (HTTP 429): ``retry_after_seconds`` until it may be tried again."""

    def __init__(self, message: str, retry_after_seconds: int) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


def _lower_priority() -> None:
    """Executor thread initializer: renice this thread (on Linux a thread's nice value is its own; elsewhere
    ``setpriority`` would renice the whole process, so it is left alone)."""
    if sys.platform == "linux":
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _DERIVATION_NICE)


class DerivationPool:
    """Runs PBKDF2 derivations on ``workers`` threads of its own; at most ``max_pending`` run or wait at once."""

    def __init__(self, workers: int, max_pending: int, *, name: str = "pbkdf2") -> None:
        """``name``: its threads' name prefix (``console-pbkdf2``, ``sasl-plain-pbkdf2``)."""
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix=name, initializer=_lower_priority)
        self._slots = threading.BoundedSemaphore(max_pending)
        self._in_flight: set[Future[Any]] = set()
        self.max_pending = max_pending

    @property
    def pending(self) -> int:
        """Derivations running or waiting for a thread now."""
        return len(self._in_flight)

    async def run(self, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``function(*args, **kwargs)`` on the pool's threads.

        :raises LoginThrottledError: ``max_pending`` derivations are already running or waiting.
        """
        if not self._slots.acquire(blocking=False):
            raise LoginThrottledError("Too many logins are being checked at once; retry after 1 s", 1)
        try:
            future = self._executor.submit(function, *args, **kwargs)
        except BaseException:
            self._slots.release()
            raise
        self._in_flight.add(future)
        # The slot is freed when the derivation ends, not when its caller stops waiting: a client that hangs up
        # cannot free a slot its derivation still occupies. (A derivation not yet started is cancelled with it.)
        future.add_done_callback(self._done)
        return await asyncio.wrap_future(future)

    def _done(self, future: Future[Any]) -> None:
        self._in_flight.discard(future)
        self._slots.release()

    def close(self) -> None:
        """Cancel derivations still waiting; running ones finish on their own (the threads do not block exit)."""
        self._executor.shutdown(wait=False, cancel_futures=True)


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


class FailedLoginBudget:
    """Per client address, a token bucket of failed logins: ``burst`` to start with, ``per_minute`` regained each
    minute. A login that needs a derivation takes a token first and gets it back if it succeeds, so only failures
    use the budget; a client with no token left is refused until its next token is due. At most ``max_clients``
    addresses are remembered (a forgotten one starts again with a full budget; the pool still bounds the CPU).
    For one event loop (no lock).

    Worked example, burst 3 and 1 per minute: three wrong passwords in a row are answered 401; the fourth, and any
    login that would need a derivation within the next minute, is answered 429 with ``Retry-After: 60``.
    """

    def __init__(
        self,
        burst: int,
        per_minute: float,
        *,
        max_clients: int = DEFAULT_MAX_CLIENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._burst = float(burst)
        self._per_second = per_minute / 60.0
        self._max_clients = max_clients
        self._clock = clock
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    def _bucket(self, client: str) -> _Bucket:
        now = self._clock()
        bucket = self._buckets.get(client)
        if bucket is None:
            bucket = self._buckets[client] = _Bucket(self._burst, now)
            while len(self._buckets) > self._max_clients:
                self._buckets.popitem(last=False)
        else:
            bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.updated) * self._per_second)
            bucket.updated = now
            self._buckets.move_to_end(client)
        return bucket

    def check(self, client: str) -> None:
        """:raises LoginThrottledError: ``client`` has no failed login left now."""
        bucket = self._bucket(client)
        if bucket.tokens < 1.0:
            retry_after = max(1, math.ceil((1.0 - bucket.tokens) / self._per_second))
            message = f"Too many failed logins from {client}; retry after {retry_after} s"
            raise LoginThrottledError(message, retry_after)

    def take(self, client: str) -> None:
        """Use one of ``client``'s failed logins (give it back with :meth:`give_back` if the login succeeds).

        :raises LoginThrottledError: none is left.
        """
        self.check(client)
        self._buckets[client].tokens -= 1.0

    def give_back(self, client: str) -> None:
        bucket = self._bucket(client)
        bucket.tokens = min(self._burst, bucket.tokens + 1.0)
