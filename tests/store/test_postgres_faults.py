"""The PostgreSQL store under faults: the server stopped and restarted under a steady writer and a follower, and a
writer killed with SIGKILL. Acknowledged writes are never lost, failed ones raise the retriable
``StoreUnavailableError``, and both the pool and the follower recover by themselves."""

from __future__ import annotations

import random
import threading
import time

import pytest

from kafkaguard import StandardAuthorizer
from kafkaguard.service import AclService
from kafkaguard.store import StoreUnavailableError
from kafkaguard.store.postgres import PostgresStore
from tests.postgres import PASSWORD, PostgresServer
from tests.store.durability import check_sigkilled_writers
from tests.store.helpers import acl


def test_a_restart_under_load_loses_no_acknowledged_write_and_everyone_recovers(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    with (
        PostgresStore(postgres_url, password=PASSWORD, connect_timeout=1.0) as writer_store,
        PostgresStore(postgres_url, password=PASSWORD, connect_timeout=1.0) as reader_store,
    ):
        _restart_under_load(postgres_server, writer_store, reader_store)


def _restart_under_load(server: PostgresServer, writer_store: PostgresStore, reader_store: PostgresStore) -> None:
    follower = AclService(reader_store, StandardAuthorizer("", False, ready=False))
    acknowledged: list[int] = []
    failed: list[BaseException] = []
    stop = threading.Event()

    def write() -> None:
        n = 0
        while not stop.is_set():
            try:
                writer_store.create_acls([acl(f"t{n}")])
                acknowledged.append(n)
            except Exception as e:  # noqa: BLE001 - every failure is checked below
                failed.append(e)
                time.sleep(0.05)
            n += 1

    reader_store.wait_for_change(0.05)  # the follower listens before the restart breaks its connection
    assert reader_store._listener.connected
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        _stop_and_start(server, writer_store, follower, acknowledged, failed)
    finally:
        stop.set()
        writer.join(timeout=30)
    # The follower catches up by itself, from its versions, with every acknowledged write.
    deadline = time.monotonic() + 10
    while True:
        try:
            follower.poll()
            break
        except StoreUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    present = {int(a.binding.pattern.name[1:]) for a in follower.describe_acls()}
    assert set(acknowledged) <= present, "an acknowledged write was lost"
    stored = {int(a.binding.pattern.name[1:]) for a in writer_store.load_acls().acls}
    assert present == stored
    _listener_reconnects(writer_store, reader_store)


def _listener_reconnects(writer_store: PostgresStore, reader_store: PostgresStore) -> None:
    """The follower's LISTEN connection broke with the restart: it is reopened (after its backoff) by the waits
    themselves, and a write wakes the follower at once again."""
    deadline = time.monotonic() + 15
    while not reader_store._listener.connected:
        assert time.monotonic() < deadline, "the listener did not reconnect"
        reader_store.wait_for_change(0.2)
    reader_store.wait_for_change(0.05)  # drain what came while it was away
    writer_store.create_acls([acl("wake-up")])
    start = time.monotonic()
    reader_store.wait_for_change(5.0)
    assert time.monotonic() - start < 0.1


def _stop_and_start(
    server: PostgresServer,
    writer_store: PostgresStore,
    follower: AclService,
    acknowledged: list[int],
    failed: list[BaseException],
) -> None:
    """Stop PostgreSQL under the writer, check the faults, start it again, then check that everything recovers."""
    try:
        time.sleep(0.5)
        follower.poll()
        before = len(acknowledged)
        server.stop()
        deadline = time.monotonic() + 10
        while not failed and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not writer_store.healthy()
        down_failures = len(failed)
        with pytest.raises(StoreUnavailableError) as raised:
            follower.poll()  # the follower's poll fails softly: the caller logs it and keeps its snapshot
        assert PASSWORD not in str(raised.value)
        assert "retry" in str(raised.value)
        assert follower.describe_acls(), "the follower's last snapshot is kept while the store is down"
    finally:
        server.start()
    deadline = time.monotonic() + 20
    resumed = len(acknowledged)
    while len(acknowledged) < resumed + 20 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert before > 0
    assert down_failures > 0
    assert len(acknowledged) >= resumed + 20, "the writer did not recover after PostgreSQL came back"
    assert all(isinstance(e, StoreUnavailableError) for e in failed), {type(e).__name__ for e in failed}
    assert all(PASSWORD not in str(e) for e in failed)
    assert writer_store.healthy()


def test_every_acknowledged_change_survives_a_sigkilled_writer(postgres_url: str) -> None:
    check_sigkilled_writers(
        postgres_url,
        lambda: PostgresStore(postgres_url, password=PASSWORD),
        rounds=8,
        rng=random.Random(20261123),
        pauses=(0.05, 0.4),
        env={"KAFKAGUARD_STORE_PASSWORD": PASSWORD},
    )
