"""Logins cannot starve the Kafka listener in the same process: PBKDF2 runs on a small executor of its own behind
a bound on derivations in flight, and each client address has a budget of failed logins. Past either, the answer
is 429 with ``Retry-After`` at once (nothing queues without bound); cached logins use neither."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

import httpx
import pytest

from kafkaguard.model import AclOperation
from kafkaguard.passwords.checker import PasswordChecker
from kafkaguard.scram import ScramMechanism
from tests.actors import ACTOR
from tests.console.conftest import ADMIN, ADMIN_PASSWORD, TIMEOUT, ConsoleHandle, cluster_acl, start_console

WRONG = "not-the-password"
FAILURE_DELAY_MS = 150


def authenticator(console: ConsoleHandle) -> PasswordChecker:
    found: PasswordChecker = console.console.app.state.console.authenticator
    return found


def logins(console: ConsoleHandle, result: str) -> float:
    with console.client(None) as anonymous:
        text = anonymous.get("/metrics").text
    found = re.search(rf'^kafkaguard_console_logins_total{{result="{result}"}} ([0-9.e+]+)$', text, re.MULTILINE)
    assert found is not None, text
    return float(found.group(1))


def get(console: ConsoleHandle, user: str, password: str, client: str | None = None) -> httpx.Response:
    headers = {"X-Forwarded-For": client} if client is not None else {}
    with console.client(user, password) as http:
        return http.get("/api/acls", headers=headers)


def assert_throttled(response: httpx.Response) -> int:
    assert response.status_code == 429, response.text
    retry_after = int(response.headers["retry-after"])
    assert retry_after >= 1
    assert "retry" in response.json()["detail"].lower()
    return retry_after


# ------------------------------------------------------------------------------------------ the PBKDF2 executor


class Occupied:
    """The console's derivation pool kept busy by a task that waits for ``release``: a stand-in for PBKDF2 that
    takes as long as the test wants."""

    def __init__(self, console: ConsoleHandle, count: int) -> None:
        self.release = threading.Event()
        pool = authenticator(console).pool
        self.futures: list[Future[bool]] = [
            asyncio.run_coroutine_threadsafe(pool.run(self.release.wait, TIMEOUT), console.loop) for _ in range(count)
        ]

    def __enter__(self) -> Occupied:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        for future in self.futures:
            assert future.result(TIMEOUT) is True


@pytest.fixture(scope="module")
def one_at_a_time(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleHandle]:
    """One PBKDF2 thread, at most two derivations running or waiting; a failure budget too big to matter here."""
    handle = start_console(
        tmp_path_factory.mktemp("pool"),
        console_login_workers=1,
        console_login_max_pending=2,
        login_failures_per_address_burst=10_000,
    )
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the console logged errors: {handle.errors}"


def test_pbkdf2_runs_on_the_console_pool_not_the_default_executor(one_at_a_time: ConsoleHandle) -> None:
    # The pool's only thread is taken: a derivation waits (it is the second of two allowed)...
    with Occupied(one_at_a_time, 1), one_at_a_time.client(ADMIN, WRONG) as client, pytest.raises(httpx.ReadTimeout):
        client.get("/api/acls", timeout=0.5)
    # ... and once the pool is free, logins are answered again.
    assert get(one_at_a_time, ADMIN, WRONG).status_code == 401
    assert get(one_at_a_time, ADMIN, ADMIN_PASSWORD).status_code == 200


def _own_nice() -> tuple[str, int]:
    return threading.current_thread().name, os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice values are Linux's")
def test_derivations_run_on_the_pools_own_threads_at_the_lowest_priority(one_at_a_time: ConsoleHandle) -> None:
    """When PBKDF2 and the event loop want the same core, the event loop (Kafka requests too) goes first."""
    pool = authenticator(one_at_a_time).pool
    name, nice = asyncio.run_coroutine_threadsafe(pool.run(_own_nice), one_at_a_time.loop).result(TIMEOUT)
    assert name.startswith("console-pbkdf2") and nice == 19
    assert os.getpriority(os.PRIO_PROCESS, one_at_a_time.thread.native_id or 0) == 0  # the event loop's thread


def test_a_full_pool_answers_429_at_once_for_known_and_unknown_users(one_at_a_time: ConsoleHandle) -> None:
    throttled_before = logins(one_at_a_time, "throttled")
    with Occupied(one_at_a_time, 2):
        for user in (ADMIN, "no-such-user"):  # the decoy derivation for an unknown user takes the same path
            start = time.perf_counter()
            assert_throttled(get(one_at_a_time, user, WRONG))
            assert time.perf_counter() - start < 2.0  # not queued behind the busy pool
    assert logins(one_at_a_time, "throttled") == throttled_before + 2
    assert get(one_at_a_time, "no-such-user", WRONG).status_code == 401


def test_a_cached_login_passes_while_the_pool_is_full(one_at_a_time: ConsoleHandle) -> None:
    one_at_a_time.add_user("regular", "regular-pw", (ScramMechanism.SCRAM_SHA_512,))
    one_at_a_time.services.acls.create_acls([cluster_acl("User:regular", AclOperation.DESCRIBE)], actor=ACTOR)
    assert get(one_at_a_time, "regular", "regular-pw").status_code == 200  # derived once, now cached
    derivations = authenticator(one_at_a_time).derivations
    with Occupied(one_at_a_time, 2):
        start = time.perf_counter()
        for _ in range(5):
            assert get(one_at_a_time, "regular", "regular-pw").status_code == 200
        assert time.perf_counter() - start < 2.0
        assert_throttled(get(one_at_a_time, "regular", "a-wrong-one"))
    assert authenticator(one_at_a_time).derivations == derivations


def test_concurrent_wrong_passwords_never_exceed_the_bound(one_at_a_time: ConsoleHandle) -> None:
    """24 clients at once against a pool of two: each is answered (401 or 429, nothing hangs), and the pool never
    holds more than two derivations."""
    pool = authenticator(one_at_a_time).pool
    peak = 0
    stop = threading.Event()

    def watch() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, pool.pending)
            time.sleep(0.0005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    statuses: list[int] = []

    def hammer() -> None:
        for _ in range(5):
            statuses.append(get(one_at_a_time, ADMIN, WRONG).status_code)

    workers = [threading.Thread(target=hammer) for _ in range(24)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(TIMEOUT * 4)
    stop.set()
    watcher.join(TIMEOUT)
    assert len(statuses) == 24 * 5
    assert set(statuses) <= {401, 429}
    assert 1 <= peak <= 2
    assert pool.pending == 0


# ------------------------------------------------------------------------------------------ per-client budget


@pytest.fixture(scope="module")
def budgeted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleHandle]:
    """Three failed logins per client address, then one a minute; client addresses set through a trusted proxy;
    failed logins answered FAILURE_DELAY_MS after they arrived."""
    handle = start_console(
        tmp_path_factory.mktemp("budget"),
        login_failures_per_address_burst=3,
        login_failures_per_address_per_minute=1,
        trusted_proxies=["127.0.0.1"],
        console_login_failure_seconds=FAILURE_DELAY_MS / 1000,
    )
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the console logged errors: {handle.errors}"


def test_failed_logins_past_the_budget_are_429_per_client(budgeted: ConsoleHandle) -> None:
    client = "10.1.0.1"
    assert get(budgeted, ADMIN, ADMIN_PASSWORD, client).status_code == 200  # cached from now on
    derivations = authenticator(budgeted).derivations
    for _ in range(3):
        assert get(budgeted, ADMIN, WRONG, client).status_code == 401
    start = time.perf_counter()
    retry_after = assert_throttled(get(budgeted, ADMIN, WRONG, client))
    assert time.perf_counter() - start >= FAILURE_DELAY_MS / 1000  # answered after the delay a 401 gets
    assert 30 <= retry_after <= 60  # one failure a minute: the next one is due within the minute
    assert_throttled(get(budgeted, "no-such-user", WRONG, client))  # the same answer: existence is not revealed
    assert authenticator(budgeted).derivations == derivations + 3  # refused before any PBKDF2
    assert get(budgeted, ADMIN, ADMIN_PASSWORD, client).status_code == 200  # a cached login is not throttled
    assert get(budgeted, ADMIN, WRONG, "10.1.0.2").status_code == 401  # another client has its own budget
    assert get(budgeted, ADMIN, WRONG).status_code == 401  # and so has the proxy itself


def test_a_successful_login_does_not_use_up_the_budget(budgeted: ConsoleHandle) -> None:
    client = "10.1.0.3"
    budgeted.add_user("budget-user", "budget-pw", (ScramMechanism.SCRAM_SHA_256,))
    for _ in range(2):
        assert get(budgeted, ADMIN, WRONG, client).status_code == 401
    assert get(budgeted, "budget-user", "budget-pw", client).status_code == 403  # derived, logged in (no ACL)
    assert get(budgeted, ADMIN, WRONG, client).status_code == 401  # still the third failure of three
    assert_throttled(get(budgeted, ADMIN, WRONG, client))


def test_throttled_answers_are_counted_but_not_audited(
    budgeted: ConsoleHandle, caplog: pytest.LogCaptureFixture
) -> None:
    """A flood of 429s must not become a flood of audit lines: they are counted in the metrics instead (each
    client's first failures, the ones that were checked, are audited as before)."""
    client = "10.1.0.4"
    caplog.set_level(logging.INFO, "kafkaguard.audit")
    for _ in range(3):
        assert get(budgeted, ADMIN, WRONG, client).status_code == 401
    assert len([r for r in caplog.records if r.name == "kafkaguard.audit"]) == 3
    before = logins(budgeted, "throttled")
    assert_throttled(get(budgeted, ADMIN, WRONG, client))
    assert_throttled(get(budgeted, ADMIN, WRONG, client))
    assert logins(budgeted, "throttled") == before + 2
    assert len([r for r in caplog.records if r.name == "kafkaguard.audit"]) == 3


def routed(console: ConsoleHandle) -> float:
    """Requests that reached the ``GET /api/acls`` route (its latency histogram's count)."""
    with console.client(None) as anonymous:
        text = anonymous.get("/metrics").text
    pattern = r'^kafkaguard_console_request_duration_seconds_count\{method="GET",route="/api/acls"\} ([0-9.e+]+)$'
    found = re.search(pattern, text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_a_throttled_login_is_refused_before_routing(budgeted: ConsoleHandle) -> None:
    """The cheap path: a flood of refused logins never reaches FastAPI's routing and dependencies."""
    client = "10.1.0.5"
    for _ in range(3):
        assert get(budgeted, ADMIN, WRONG, client).status_code == 401
    before = routed(budgeted)
    for _ in range(3):
        assert_throttled(get(budgeted, ADMIN, WRONG, client))
    assert routed(budgeted) == before
    assert get(budgeted, ADMIN, WRONG, "10.1.0.6").status_code == 401
    assert routed(budgeted) == before + 1


def test_the_pool_future_of_a_cancelled_request_still_frees_its_slot(one_at_a_time: ConsoleHandle) -> None:
    """A client that hangs up while its derivation waits does not leak a slot of the bound."""
    pool = authenticator(one_at_a_time).pool
    with Occupied(one_at_a_time, 1), one_at_a_time.client(ADMIN, WRONG) as client, pytest.raises(httpx.ReadTimeout):
        client.get("/api/acls", timeout=0.3)
    deadline = time.monotonic() + TIMEOUT
    while pool.pending and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pool.pending == 0
    waited: Future[bool] = asyncio.run_coroutine_threadsafe(pool.run(lambda: True), one_at_a_time.loop)
    try:
        assert waited.result(TIMEOUT) is True
    except FutureTimeout:  # pragma: no cover - the assertion message is the point
        raise AssertionError("the pool did not run a derivation after a cancelled one") from None
