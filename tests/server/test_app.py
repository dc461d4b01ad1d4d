"""KafkaServer and the store: the event loop never calls the store (every read it answers comes from the services'
in-memory snapshots; every write runs in a worker thread), Metadata and DescribeAcls answer while the store is
locked, another process's topics reach Metadata through the background sync, and every file a server run writes is
readable by its owner only."""

from __future__ import annotations

import asyncio
import functools
import inspect
import sqlite3
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.static.primitive import i8

from kafkaguard.config import SecurityProtocol
from kafkaguard.store import SqliteStore
from tests.modes import PRIVATE, file_modes, umask
from tests.service.children import Lines
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle, TlsFiles, start_server
from tests.wire import AUTO_CREATE, Wire, create_acl, metadata

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"(read_text|open_text) is deprecated", category=DeprecationWarning)
    import kafka.errors as Errors  # type: ignore[import-untyped]
    from kafka.admin import (  # type: ignore[import-untyped]
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        NewTopic,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )
    from kafka.admin._users import ScramMechanism, UserScramCredentialUpsertion  # type: ignore[import-untyped]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings(r"ignore:(read_text|open_text) is deprecated:DeprecationWarning"),
]

ROOT = Path(__file__).resolve().parents[2]
#: PLAINTEXT clients are User:ANONYMOUS; made a super user here so that these tests need no SASL.
SUPER_USERS = f"User:{ADMIN};User:ANONYMOUS"
TOPIC, CLUSTER, LITERAL, PREFIXED, ALLOW = 2, 4, 3, 4, 3
READ, ALTER = 3, 7


def running_on_an_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@dataclass
class StoreCalls:
    """The store methods called, by whether the calling thread was running an event loop."""

    on_loop: list[str] = field(default_factory=list)
    off_loop: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, name: str) -> None:
        with self._lock:
            (self.on_loop if running_on_an_event_loop() else self.off_loop).append(name)


@pytest.fixture
def store_calls(monkeypatch: pytest.MonkeyPatch) -> StoreCalls:
    """Every public method of SqliteStore, recorded (on or off an event loop's thread) before it runs."""
    calls = StoreCalls()

    def recorded(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def call(self: SqliteStore, *args: Any, **kwargs: Any) -> Any:
            calls.record(name)
            return method(self, *args, **kwargs)

        return call

    # Its own methods and those of the SQL store it is built on (plain functions: not the classmethod).
    for name in dir(SqliteStore):
        method = inspect.getattr_static(SqliteStore, name)
        if not name.startswith("_") and inspect.isfunction(method):
            monkeypatch.setattr(SqliteStore, name, recorded(name, method))
    return calls


@pytest.fixture
def server(tmp_path: Path, tls_files: TlsFiles) -> Iterator[ServerHandle]:
    handle = start_server(tmp_path, tls_files, super_users=SUPER_USERS, create_admin=False)
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the server logged errors: {handle.errors}"


def describe_every_acl() -> DescribeAclsRequest:
    return DescribeAclsRequest(
        resource_type_filter=i8(1),  # ANY
        resource_name_filter=None,
        pattern_type_filter=i8(1),  # ANY
        principal_filter=None,
        host_filter=None,
        operation=i8(1),  # ANY
        permission_type=i8(1),  # ANY
    )


def topic_names(response: Any) -> list[str]:
    return sorted(str(t.name) for t in response.topics if t.error_code.value == 0)


def test_no_store_call_runs_on_the_event_loop(tmp_path: Path, tls_files: TlsFiles, store_calls: StoreCalls) -> None:
    handle = start_server(tmp_path, tls_files, super_users=SUPER_USERS)  # writes User:admin's credentials
    try:
        # SASL logins and the SCRAM APIs.
        scram_admin = KafkaAdminClient(
            bootstrap_servers=handle.bootstrap(SecurityProtocol.SASL_PLAINTEXT),
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-256",
            sasl_plain_username=ADMIN,
            sasl_plain_password=ADMIN_PASSWORD,
            request_timeout_ms=10_000,
            bootstrap_timeout_ms=10_000,
        )
        try:
            upsert = UserScramCredentialUpsertion("alice", ScramMechanism.SCRAM_SHA_512, "alice-secret")
            assert scram_admin.alter_user_scram_credentials([upsert]) == {"alice": None}
            described = scram_admin.describe_user_scram_credentials(["alice"])
            assert described["alice"]["error"] is None
        finally:
            scram_admin.close()
        admin = KafkaAdminClient(
            bootstrap_servers=handle.bootstrap(SecurityProtocol.PLAINTEXT),
            security_protocol="PLAINTEXT",
            request_timeout_ms=10_000,
            bootstrap_timeout_ms=10_000,
        )
        try:
            admin.create_topics([NewTopic("orders", 3, 1)])  # CreateTopics
            assert [t["name"] for t in admin.describe_topics(["orders"])] == ["orders"]  # Metadata, by name
            assert "orders" in admin.list_topics()  # Metadata, every topic
            binding = ACL(
                "User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                ResourcePattern(ResourceType.TOPIC, "orders", ACLResourcePatternType.LITERAL),
            )  # fmt: skip
            assert admin.create_acls([binding])["failed"] == []  # CreateAcls
            everything = ACLFilter(
                None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY),
            )  # fmt: skip
            acls, error = admin.describe_acls(everything)  # DescribeAcls
            assert error is Errors.NoError
            assert [a.resource_pattern.resource_name for a in acls] == ["orders"]
            admin.delete_topics(["orders"])  # DeleteTopics
        finally:
            admin.close()
        with Wire(handle.plaintext) as wire:
            assert topic_names(metadata(wire, ["auto-created"])) == ["auto-created"]  # Metadata's auto-creation
        time.sleep(3 * handle.services.settings.sync_interval_seconds)  # the background sync polls meanwhile
    finally:
        handle.stop()
    assert handle.errors == []
    assert store_calls.on_loop == []
    # Not vacuous: the writes and the background sync did reach the store, from worker threads.
    assert {
        "create_topics",
        "delete_topics",
        "create_acls",
        "alter_credentials",
        "acl_version",
        "topic_version",
    } <= set(store_calls.off_loop)


def test_metadata_and_describe_acls_answer_while_the_store_is_locked(server: ServerHandle) -> None:
    store = server.services.store
    assert isinstance(store, SqliteStore)
    with Wire(server.plaintext) as wire, Wire(server.plaintext, timeout=10) as writer:
        assert create_acl(wire, resource_type=TOPIC, name="locked", pattern_type=LITERAL, principal="User:a",
                          operation=READ) == 0  # fmt: skip
        assert topic_names(metadata(wire, ["locked"])) == ["locked"]
        held, hold_seconds = threading.Event(), 1.0

        def hold() -> None:
            # This process's store lock, as a long write holds it, and SQLite's write lock, as another process's
            # write holds it.
            with store._lock:
                other = sqlite3.connect(store.path, isolation_level=None)
                other.execute("BEGIN IMMEDIATE")
                held.set()
                time.sleep(hold_seconds)
                other.execute("ROLLBACK")
                other.close()

        holder = threading.Thread(target=hold)
        holder.start()
        assert held.wait(5)
        # A write queues behind the locks, in a worker thread: it must not hold up the reads below.
        created: list[list[str]] = []
        write = threading.Thread(target=lambda: created.append(topic_names(metadata(writer, ["written"]))))
        write.start()
        try:
            time.sleep(0.05)
            start = time.monotonic()
            every_topic = topic_names(metadata(wire, None))
            by_name = topic_names(metadata(wire, ["locked"], allow_auto_topic_creation=False))
            described = wire.request(describe_every_acl())
            took = time.monotonic() - start
            still_held = holder.is_alive()
        finally:
            holder.join()
            write.join(10)
    assert still_held, "the store was unlocked before the reads were answered: the test proves nothing"
    assert took < 0.5 * hold_seconds, f"reads took {took:.3f} s while the store was locked"
    assert every_topic == by_name == ["locked"]
    assert [str(r.resource_name) for r in described.resources] == ["locked"]
    assert created == [["written"]]


def test_a_topic_created_by_another_process_reaches_metadata_within_the_sync_interval(server: ServerHandle) -> None:
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.service.topic_follower_child", str(server.services.settings.database_path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        Lines(child).wait_for("ready", timeout=20)
        start = time.monotonic()
        with Wire(server.plaintext) as wire:
            while "from-child" not in topic_names(metadata(wire, None)):
                assert time.monotonic() - start < 1.0, "Metadata did not show the other process's topic within 1 s"
                time.sleep(0.02)
    finally:
        child.kill()
        child.wait(timeout=10)
        assert child.stdout is not None
        child.stdout.close()


def test_every_file_a_server_run_writes_is_private(tmp_path: Path, tls_files: TlsFiles) -> None:
    data_dir = tmp_path / "data"
    with umask(0o022):
        handle = start_server(data_dir, tls_files, audit_max_bytes=1024)  # creates User:admin's credentials
        try:
            handle.add_user("alice", "alice-secret")
            with Wire(handle.sasl) as wire:
                wire.login(ADMIN, ADMIN_PASSWORD)
                for i in range(10):
                    assert create_acl(wire, resource_type=TOPIC, name=f"t{i}", pattern_type=PREFIXED,
                                      principal="User:alice", operation=AUTO_CREATE) == 0  # fmt: skip
                    assert topic_names(metadata(wire, [f"t{i}"])) == [f"t{i}"]
                    # one flush per round: the log rotates at 1 KiB (so audit.log alone may be empty just after)
                    handle.audit_envelopes()
                assert create_acl(wire, resource_type=CLUSTER, name="kafka-cluster", pattern_type=LITERAL,
                                  principal="User:alice", operation=ALTER, permission=ALLOW) == 0  # fmt: skip
            modes = file_modes(data_dir)
        finally:
            handle.stop()
    expected = {"kafkaguard.db", "kafkaguard.db-wal", "kafkaguard.db-shm", "server.secret", "audit/audit.log",
                "audit/audit.log.1"}  # fmt: skip
    assert expected <= set(modes), modes
    assert {name: oct(m) for name, m in modes.items() if m != PRIVATE} == {}
