"""What an unauthenticated password check may cost (the console's HTTP Basic, SASL/PLAIN): PBKDF2 on a small
executor of its own, behind a bound on the derivations running or waiting. Which clients may still fail a login at
all is the process's ``identity.failure_budget.LoginFailureBudget``'s business (per address and per user name).

Why: the console shares its process — with ``kafkaguard serve --http-listener`` its event loop and CPU too — with the
Kafka listener. A login that is not in the cache costs one PBKDF2 derivation (4096–16384 iterations, milliseconds of
CPU). On the shared default executor, 24 clients sending wrong passwords kept every worker thread deriving and raised
the Kafka listener's CreateAcls median many times over (see docs/benchmarks.md, "Figures from the code"). Here at most
``workers`` threads derive, at most ``max_pending`` derivations run or wait, and a client that has used up its failed
logins is refused before any work is done (the budget). Past either bound the answer is 429 with ``Retry-After`` at
once: nothing queues without bound. On Linux the derivation threads run at the lowest CPU priority, so when they compete
with the event loop for a core, the event loop — Kafka requests included — goes first.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from kafkaguard.identity.failure_budget import LoginThrottledError

__all__ = ["DerivationPool", "LoginThrottledError"]

P = ParamSpec("P")
T = TypeVar("T")

#: ``nice`` of the derivation threads: the lowest priority, so they take only the CPU the event loop leaves.
_DERIVATION_NICE = 19


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
