"""Sessions end with their user (issue 24, finding 5), against a real server and real clients.

Before this change a connection that had logged in stayed authorized after its user's credentials were deleted or
its password changed (with ``Group:`` ACLs and ``User:*`` rules, indefinitely): every test below that expects a
connection to be closed failed on that code (the connection kept answering).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ScramCredentialInfo,
    UserScramCredentialUpsertion,
)
from confluent_kafka.admin import ScramMechanism as ConfluentMechanism  # type: ignore[attr-defined]

from kafkaguard.scram import ScramMechanism
from kafkaguard.service import CredentialService
from kafkaguard.store import MemoryCredentialStore
from tests.actors import ACTOR
from tests.server.session_clients import (
    SLACK_SECONDS,
    alter_credentials,
    answers,
    change_in_another_process,
    logged_in,
    seconds_until_closed,
)
from tests.server.test_cli_serve import KAFKAGUARD, free_port, wait_until_listening
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle, sasl_server
from tests.wire import Wire

with warnings.catch_warnings():  # kafka-python's import warns on Python 3.11 (as in test_e2e_kafka_python)
    warnings.filterwarnings("ignore", message=r"(read_text|open_text) is deprecated", category=DeprecationWarning)
    from kafka import KafkaAdminClient  # type: ignore[import-untyped]
    from kafka.errors import KafkaError  # type: ignore[import-untyped]

pytestmark = pytest.mark.integration

SYNC_SECONDS = 0.3
PASSWORD = "session-secret"  # noqa: S105 - a test password
SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    with sasl_server(tmp_path_factory.mktemp("sessions"), sync_interval_seconds=SYNC_SECONDS) as handle:
        yield handle


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def new_user(handle: ServerHandle, prefix: str, *mechanisms: ScramMechanism) -> str:
    name = unique(prefix)
    for mechanism in mechanisms or tuple(ScramMechanism):
        assert handle.services.credentials.upsert_password(name, mechanism, PASSWORD, 4096, actor=ACTOR).succeeded
    return name


def cannot_log_in(handle: ServerHandle, user: str, password: str = PASSWORD) -> bool:
    with Wire(handle.sasl) as wire:
        try:
            wire.login(user, password)
        except AssertionError:
            return True
        return False


def session_lines(caplog: pytest.LogCaptureFixture, user: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "kafkaguard.protocol.sessions" and f"User:{user} " in r.getMessage()
    ]


def kafka_python_admin(handle: ServerHandle, user: str, password: str) -> Any:
    host, port = handle.sasl
    return KafkaAdminClient(
        bootstrap_servers=f"{host}:{port}",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username=user,
        sasl_plain_password=password,
        request_timeout_ms=3000,
        bootstrap_timeout_ms=3000,
    )


def confluent_admin(handle: ServerHandle, user: str, password: str, **extra: Any) -> AdminClient:
    host, port = handle.sasl
    return AdminClient({
        "bootstrap.servers": f"{host}:{port}", "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": password, **extra,
    })  # fmt: skip


# --------------------------------------------------------------------------------------- this process's writes


def test_deleting_a_user_closes_its_sessions_at_once_and_no_one_elses(
    served: ServerHandle, caplog: pytest.LogCaptureFixture
) -> None:
    """AlterUserScramCredentials from the admin deletes alice: her raw connection and her kafka-python client's are
    closed at once, bob's stays, alice cannot log in again, and each closed session is logged once at INFO."""
    caplog.set_level(logging.INFO, logger="kafkaguard.protocol.sessions")
    alice, bob = new_user(served, "alice"), new_user(served, "bob")
    client = kafka_python_admin(served, alice, PASSWORD)
    try:
        assert client.describe_cluster()["controller_id"] == 1
        with (
            logged_in(served.sasl, alice, PASSWORD) as alice_wire,
            logged_in(served.sasl, bob, PASSWORD) as bob_wire,
            logged_in(served.sasl, ADMIN, ADMIN_PASSWORD) as admin,
        ):
            assert alter_credentials(admin, deletions=[(alice, 1), (alice, 2)]) == [(alice, 0)]
            closed_after = seconds_until_closed(alice_wire, timeout=SLACK_SECONDS)
            assert closed_after is not None, "alice's connection stayed open after her user was deleted"
            assert answers(bob_wire), "an unrelated user's connection was closed"
        deadline = time.monotonic() + SLACK_SECONDS
        while served.server.sessions.sessions_of(alice) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert served.server.sessions.sessions_of(alice) == frozenset()
        with pytest.raises(KafkaError):  # its connection is gone and it cannot log in again
            client.describe_cluster()
    finally:
        client.close()
    assert cannot_log_in(served, alice)
    lines = session_lines(caplog, alice)
    assert len(lines) == 2  # one per closed session: the raw connection and kafka-python's
    assert lines[0] == (
        f"closing the session of User:{alice} from /127.0.0.1 (listener SASL_PLAINTEXT://127.0.0.1:0): "
        "its SCRAM-SHA-256 credential was deleted"
    )
    assert session_lines(caplog, bob) == []


def test_a_password_change_by_a_real_admin_client_ends_the_session(
    served: ServerHandle, caplog: pytest.LogCaptureFixture
) -> None:
    """confluent-kafka's alter_user_scram_credentials gives alice a new SCRAM-SHA-256 password: her connections
    (raw and confluent-kafka's) are closed, her old password no longer logs in, the new one does."""
    caplog.set_level(logging.INFO, logger="kafkaguard.protocol.sessions")
    alice = new_user(served, "alice")
    client = confluent_admin(served, alice, PASSWORD, **{"reconnect.backoff.max.ms": 200})
    admin = confluent_admin(served, ADMIN, ADMIN_PASSWORD)
    assert client.list_topics(timeout=10).controller_id == 1
    with logged_in(served.sasl, alice, PASSWORD) as alice_wire:
        upsertion = UserScramCredentialUpsertion(
            alice, ScramCredentialInfo(ConfluentMechanism.SCRAM_SHA_256, 4096), b"new-password", b"0123456789abcdef"
        )
        for future in admin.alter_user_scram_credentials([upsertion]).values():
            future.result(10)
        assert seconds_until_closed(alice_wire, timeout=SLACK_SECONDS) is not None
    with pytest.raises(KafkaException):  # librdkafka reconnects with the old password: refused
        client.list_topics(timeout=3)
    del client  # destroyed now: librdkafka would go on retrying the old password in the background
    assert cannot_log_in(served, alice)
    assert not cannot_log_in(served, alice, "new-password")
    assert any(line.endswith("its SCRAM-SHA-256 credential was changed") for line in session_lines(caplog, alice))


def test_adding_a_mechanism_leaves_the_session_open(served: ServerHandle) -> None:
    """alice logged in with SCRAM-SHA-256; a SCRAM-SHA-512 credential is added for her: her session goes on."""
    alice = new_user(served, "alice", SHA256)
    with logged_in(served.sasl, alice, PASSWORD) as alice_wire, logged_in(served.sasl, ADMIN, ADMIN_PASSWORD) as admin:
        assert alter_credentials(admin, upsertions=[(alice, 2, "another-password")]) == [(alice, 0)]
        time.sleep(SYNC_SECONDS * 2)
        assert answers(alice_wire)
        # Deleting that added mechanism leaves it open too; deleting the one she logged in with closes it.
        assert alter_credentials(admin, deletions=[(alice, 2)]) == [(alice, 0)]
        assert answers(alice_wire)
        assert alter_credentials(admin, deletions=[(alice, 1)]) == [(alice, 0)]
        assert seconds_until_closed(alice_wire, timeout=SLACK_SECONDS) is not None


# ------------------------------------------------------------------------------------- another process's writes


@pytest.mark.parametrize("action", ["delete", "password"])
def test_a_change_by_another_process_ends_the_session_within_the_sync_interval(
    served: ServerHandle, action: str
) -> None:
    """Another process sharing the SQLite store deletes alice, or changes her password: her session is closed at
    the next poll (within ``sync_interval_seconds`` plus slack); bob's stays."""
    alice, bob = new_user(served, "alice"), new_user(served, "bob")
    with logged_in(served.sasl, alice, PASSWORD) as alice_wire, logged_in(served.sasl, bob, PASSWORD) as bob_wire:
        committed = change_in_another_process(served.data_dir, action, alice, "changed-elsewhere")
        closed_after = seconds_until_closed(alice_wire, timeout=SYNC_SECONDS + SLACK_SECONDS)
        assert closed_after is not None, f"alice's session outlived the {action} by another process"
        assert time.monotonic() - committed < SYNC_SECONDS + SLACK_SECONDS
        assert answers(bob_wire)
    assert cannot_log_in(served, alice)


def test_a_real_serve_process_ends_sessions_changed_by_the_cli(tmp_path: Path) -> None:
    """``kafkaguard serve`` as a process: ``kafkaguard users add`` (another process) gives alice a new password, and
    ``kafkaguard configs --alter --delete-config`` (over the wire) deletes bob: both sessions are closed, carol's
    stays, and the server's log says why."""
    data_dir, port = tmp_path / "data", free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
    env["KAFKAGUARD_SYNC_INTERVAL_SECONDS"] = str(SYNC_SECONDS)

    def cli(*args: str) -> None:
        done = subprocess.run([str(KAFKAGUARD), *args], capture_output=True, text=True, timeout=60, env=env,
                              check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr

    for name, password in ((ADMIN, ADMIN_PASSWORD), ("alice", PASSWORD), ("bob", PASSWORD), ("carol", PASSWORD)):
        cli("users", "add", name, "--password", password, "--iterations", "4096", "--data-dir", str(data_dir))
    process = subprocess.Popen(
        [str(KAFKAGUARD), "serve", "--data-dir", str(data_dir), "--listener", f"SASL_PLAINTEXT://127.0.0.1:{port}",
         "--super-users", f"User:{ADMIN}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    try:
        wait_until_listening(process, port)
        address = ("127.0.0.1", port)
        properties = tmp_path / "admin.properties"
        properties.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{ADMIN}" password="{ADMIN_PASSWORD}";\n'
        )
        with (
            logged_in(address, "alice", PASSWORD) as alice,
            logged_in(address, "bob", PASSWORD) as bob,
            logged_in(address, "carol", PASSWORD) as carol,
        ):
            cli("users", "add", "alice", "--password", "rotated", "--iterations", "4096", "--data-dir", str(data_dir))
            assert seconds_until_closed(alice, timeout=SYNC_SECONDS + SLACK_SECONDS) is not None
            cli(
                "configs",
                "--bootstrap-server",
                f"127.0.0.1:{port}",
                "--command-config",
                str(properties),
                "--alter",
                "--entity-type",
                "users",
                "--entity-name",
                "bob",
                "--delete-config",
                "SCRAM-SHA-256,SCRAM-SHA-512",
            )
            assert seconds_until_closed(bob, timeout=SLACK_SECONDS) is not None
            assert answers(carol)
    finally:
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=30)
    log = err.decode()
    assert "closing the session of User:alice from /127.0.0.1" in log and "credential was changed" in log
    assert "closing the session of User:bob from /127.0.0.1" in log and "credential was deleted" in log
    assert "User:carol" not in log and "Traceback" not in log


# ------------------------------------------------------------------------------------------ the registry's cost


def test_a_change_checks_only_the_sessions_of_the_users_it_changed() -> None:
    """One check per change, O(affected sessions): 1,000 sessions of other users are not even compared."""
    from kafkaguard.protocol.sessions import Session, SessionRegistry  # here: the other tests also run without it

    credentials = CredentialService(MemoryCredentialStore())
    for n in range(1001):
        assert credentials.upsert_password(f"user-{n}", SHA256, PASSWORD, 4096, actor=ACTOR).succeeded
    registry = SessionRegistry(credentials)
    closed: list[str] = []
    sessions: list[Session] = []

    def closer(user: str) -> Callable[[], None]:
        return lambda: closed.append(user)

    for n in range(1001):
        credential = credentials.lookup(f"user-{n}", SHA256)
        assert credential is not None
        session = Session(f"user-{n}", SHA256.mechanism_name, credential, host="10.0.0.1", listener="SASL_PLAINTEXT://:9092",
                          lifetime_ms=None, now=0.0, close=closer(f"user-{n}"))  # fmt: skip
        registry.add(session)
        sessions.append(session)
    compared: list[str] = []
    original = credentials.is_current

    def counting(user: str, mechanism: ScramMechanism, credential: Any) -> bool:
        compared.append(user)
        return original(user, mechanism, credential)

    credentials.is_current = counting  # type: ignore[method-assign]
    assert credentials.upsert_password("user-7", SHA512, PASSWORD, 4096, actor=ACTOR).succeeded  # a mechanism added
    assert registry.check({"user-7"}) == 0 and compared == ["user-7"] and closed == []
    assert credentials.upsert_password("user-7", SHA256, "new", 4096, actor=ACTOR).succeeded  # her password changed
    assert registry.check({"user-7", "nobody-logged-in"}) == 1 and closed == ["user-7"]
    assert compared == ["user-7", "user-7"]
    assert sessions[7].ended == "its SCRAM-SHA-256 credential was changed"
    assert len(registry) == 1001  # ended, not yet discarded: its connection discards it when it closes


def test_a_change_that_reaches_many_sessions_is_checked_in_slices_that_let_the_loop_serve_others() -> None:
    """A bulk change (here one user with 2,000 open sessions, all made stale) never holds the event loop for the
    whole check: other work runs between slices of ``CHECK_SLICE`` sessions, and every session ends."""
    from kafkaguard.protocol.sessions import CHECK_SLICE, Session, SessionRegistry

    credentials = CredentialService(MemoryCredentialStore())
    assert credentials.upsert_password("bulk", SHA256, PASSWORD, 4096, actor=ACTOR).succeeded
    credential = credentials.lookup("bulk", SHA256)
    assert credential is not None
    registry = SessionRegistry(credentials)
    sessions = [Session("bulk", SHA256.mechanism_name, credential, host="10.0.0.1", listener="SASL_PLAINTEXT://:9092",
                        lifetime_ms=None, now=0.0, close=lambda: None) for _ in range(2000)]  # fmt: skip
    for session in sessions:
        registry.add(session)
    assert credentials.upsert_password("bulk", SHA256, "rotated", 4096, actor=ACTOR).succeeded

    async def run() -> tuple[int, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        other = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        ended = await registry.check_in_slices({"bulk"})
        other.cancel()
        return ended, ticks

    ended, ticks = asyncio.run(run())
    assert ended == 2000 and all(s.ended == "its SCRAM-SHA-256 credential was changed" for s in sessions)
    assert ticks >= 2000 // CHECK_SLICE  # the other task ran between the slices
