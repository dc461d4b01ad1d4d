"""The PostgreSQL store beyond the shared contract (``test_ports``, ``test_topics``): migrations, versions committed in
order under concurrent writers on several nodes, change propagation through LISTEN/NOTIFY, and no password in
anything it shows."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator

import psycopg
import pytest

from kafkaguard import StandardAuthorizer
from kafkaguard.model import AclId, StoredAcl
from kafkaguard.scram import ScramCredential, ScramMechanism
from kafkaguard.service import AclService
from kafkaguard.store import (
    QuotaChange,
    SchemaVersionError,
    StoreError,
    StoreUnavailableError,
    TopicRecord,
    UserAlteration,
)
from kafkaguard.store.ports import quota_entity
from kafkaguard.store.postgres import PostgresStore
from kafkaguard.store.postgres.schema import MIGRATIONS
from tests.postgres import PASSWORD, PostgresServer
from tests.store.helpers import acl, acl_filter


@pytest.fixture
def two_nodes(postgres_url: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    """Two stores on one database, as two kafkaguard nodes open it."""
    a = PostgresStore(postgres_url, password=PASSWORD)
    b = PostgresStore(postgres_url, password=PASSWORD)
    yield a, b
    a.close()
    b.close()


def _conninfo(server: PostgresServer, url: str) -> str:
    return server.conninfo(url.rsplit("/", 1)[1])


def test_a_new_database_is_migrated_once_and_a_newer_one_refused(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    PostgresStore(postgres_url, password=PASSWORD).close()
    PostgresStore(postgres_url, password=PASSWORD).close()  # already at the latest version: nothing to do
    with psycopg.connect(_conninfo(postgres_server, postgres_url), autocommit=True) as conn:
        row = conn.execute("SELECT version FROM schema_version").fetchone()
        assert row == (len(MIGRATIONS),)
        conn.execute("UPDATE schema_version SET version = 99")
    with pytest.raises(SchemaVersionError, match="upgrade kafkaguard"):
        PostgresStore(postgres_url, password=PASSWORD)


def test_a_wrong_password_is_a_store_error_that_does_not_show_it(postgres_url: str) -> None:
    with pytest.raises(StoreError) as raised:
        PostgresStore(postgres_url, password="not-the-password-xyz", connect_timeout=2)  # noqa: S106
    assert "not-the-password-xyz" not in str(raised.value)
    assert postgres_url in str(raised.value)
    assert "password authentication failed" in str(raised.value)
    assert not isinstance(raised.value, StoreUnavailableError), "a wrong password is not worth retrying"


def test_a_server_that_is_not_there_is_unavailable() -> None:
    with pytest.raises(StoreUnavailableError, match="retry"):
        PostgresStore("postgresql://kafkaguard@127.0.0.1:1/none", password=PASSWORD, connect_timeout=1)


def test_the_repr_shows_the_url_without_the_password(two_nodes: tuple[PostgresStore, PostgresStore]) -> None:
    a, _ = two_nodes
    assert PASSWORD not in repr(a)
    assert repr(a).startswith("PostgresStore(url='postgresql://kafkaguard@127.0.0.1:")


def test_a_write_on_one_node_wakes_the_other_within_100_ms(two_nodes: tuple[PostgresStore, PostgresStore]) -> None:
    a, b = two_nodes
    assert b.wait_for_change(0.05) is True  # the first call connects the listener: it may have missed changes
    b.wait_for_change(0.05)
    woke: list[float] = []

    def follower() -> None:
        start = time.monotonic()
        assert b.wait_for_change(5.0) is True
        woke.append(time.monotonic() - start)

    for _ in range(5):
        thread = threading.Thread(target=follower)
        thread.start()
        time.sleep(0.05)
        written = time.monotonic()
        a.create_acls([acl(f"t{time.monotonic_ns()}")])
        thread.join(timeout=10)
        latency = time.monotonic() - written
        assert woke[-1] < 1.0, "the wait ran to its timeout instead of returning at the notification"
        assert latency < 0.1, f"the follower woke {latency * 1000:.0f} ms after the write"
    assert b.changes_since(0) is not None


def test_an_idle_wait_lasts_its_timeout(two_nodes: tuple[PostgresStore, PostgresStore]) -> None:
    _, b = two_nodes
    b.wait_for_change(0.05)
    start = time.monotonic()
    assert b.wait_for_change(0.3) is False
    assert 0.28 <= time.monotonic() - start < 1.0


def test_a_change_made_while_nobody_waits_is_not_slept_over(two_nodes: tuple[PostgresStore, PostgresStore]) -> None:
    a, b = two_nodes
    b.wait_for_change(0.05)
    a.alter_credentials([UserAlteration("alice", upsertions=(_credential(4096),))])
    start = time.monotonic()
    b.wait_for_change(5.0)
    assert time.monotonic() - start < 0.1


def test_every_kind_of_change_notifies(two_nodes: tuple[PostgresStore, PostgresStore]) -> None:
    a, b = two_nodes
    writes: list[Callable[[], object]] = [
        lambda: a.create_acls([acl("x")]),
        lambda: a.alter_credentials([UserAlteration("u", upsertions=(_credential(4096),))]),
        lambda: a.create_topics([TopicRecord(name="t", topic_id=_uuid(), num_partitions=1, replication_factor=1)]),
        lambda: a.alter_quotas([QuotaChange(quota_entity([("user", "u")]), "producer_byte_rate", 1.0)]),
    ]
    b.wait_for_change(0.05)
    for write in writes:
        b.wait_for_change(0.05)  # drain
        write()
        start = time.monotonic()
        b.wait_for_change(5.0)
        assert time.monotonic() - start < 0.1


def test_concurrent_writers_on_two_nodes_get_contiguous_versions_and_followers_miss_none(
    two_nodes: tuple[PostgresStore, PostgresStore],
) -> None:
    a, b = two_nodes
    per_writer = 60
    failures: list[BaseException] = []

    def write(store: PostgresStore, prefix: str) -> None:
        try:
            for n in range(per_writer):
                store.create_acls([acl(f"{prefix}{n}")])
                if n % 4 == 3:
                    store.delete_acls([acl_filter(f"{prefix}{n - 1}")])
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            failures.append(e)

    # A follower applying deltas as they come must end where a full load ends.
    follower = AclService(b, StandardAuthorizer("", False, ready=False))
    threads = [threading.Thread(target=write, args=(s, p)) for s, p in ((a, "a"), (b, "b"), (a, "c"))]
    for thread in threads:
        thread.start()
    while any(t.is_alive() for t in threads):
        follower.poll()
    for thread in threads:
        thread.join()
    assert failures == []
    follower.poll()
    snapshot = a.load_acls()
    assert snapshot.version == 3 * (per_writer + per_writer // 4)
    delta = a.changes_since(0)
    assert delta is not None
    assert {x.id for x in delta.added} == {x.id for x in snapshot.acls}
    assert {x.id for x in follower.describe_acls()} == {x.id for x in snapshot.acls}


def test_the_same_binding_created_on_two_nodes_at_once_is_stored_once(
    two_nodes: tuple[PostgresStore, PostgresStore],
) -> None:
    a, b = two_nodes
    ids: list[AclId] = []
    barrier = threading.Barrier(2)

    def create(store: PostgresStore) -> None:
        barrier.wait()
        ids.append(store.create_acls([acl("same")]).acls[0].id)

    threads = [threading.Thread(target=create, args=(s,)) for s in (a, b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(ids)) == 1
    assert len(a.load_acls().acls) == 1


def test_stored_acls_are_imported_under_their_own_ids(postgres_url: str) -> None:
    with PostgresStore(postgres_url, password=PASSWORD) as store:
        acls = [StoredAcl(AclId("id-1"), acl("a")), StoredAcl(AclId("id-2"), acl("b"))]
        delta = store.import_stored_acls(acls)
        assert delta.version == 2
        assert {x.id: x.binding for x in store.load_acls().acls} == {"id-1": acl("a"), "id-2": acl("b")}


def _credential(iterations: int) -> ScramCredential:
    return ScramCredential(ScramMechanism.SCRAM_SHA_256, b"s" * 16, b"k" * 32, b"v" * 32, iterations)


def _uuid() -> uuid.UUID:
    return uuid.uuid4()


def test_every_node_gets_the_server_secret_the_first_one_made(two_nodes: tuple[PostgresStore, PostgresStore]) -> None:
    a, b = two_nodes
    first = a.server_secret(lambda: b"a" * 32)
    assert first == b"a" * 32
    assert b.server_secret(lambda: b"b" * 32) == first
