"""Three real kafkaguard processes on one PostgreSQL store: two ``kafkaguard serve`` and one ``kafkaguard console``.
A change made through any of them (ACLs over the Kafka protocol, a user over REST) is seen by the others, and how
long that takes is measured; PostgreSQL restarted under a steady writer loses no acknowledged change on any node,
and no node crashes; a node killed with SIGKILL during writes loses none it acknowledged.

The servers' ``sync_interval_seconds`` is 5 s: a change they see well within that came by notification, not by
the interval's poll. The console still polls on its interval (0.2 s here)."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclBinding, AclBindingFilter, AclOperation, AclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType

from tests.postgres import PASSWORD, PostgresServer
from tests.server.test_cli_serve import free_port, wait_until_listening

pytestmark = pytest.mark.integration

KAFKAGUARD = Path(sys.executable).with_name("kafkaguard")
ADMIN_PASSWORD = "admin-pw-nodes"  # noqa: S105 - a test user's password
#: The longest a change may take to reach another node in these tests (measured values are printed).
BOUND_S = 2.0


@dataclass
class Node:
    name: str
    process: subprocess.Popen[bytes]
    port: int
    #: Where its log goes: a file, never an unread pipe (a node logging through a PostgreSQL outage would fill a
    #: pipe's 64 KiB and block on its next log line, event loop and all).
    log: Path
    killed: bool = False

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def admin(self, user: str = "admin", password: str = ADMIN_PASSWORD) -> AdminClient:
        return AdminClient(
            {
                "bootstrap.servers": f"127.0.0.1:{self.port}",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": user,
                "sasl.password": password,
            }
        )


def _env(url: str, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
    return {**env, "KAFKAGUARD_STORE": url, "KAFKAGUARD_STORE_PASSWORD": PASSWORD, **extra}


@pytest.fixture
def nodes(postgres_url: str, tmp_path: Path) -> Iterator[tuple[Node, Node, str]]:
    started: list[Node] = []
    try:
        for n in (1, 2):
            port = free_port()
            extra = {"KAFKAGUARD_SYNC_INTERVAL_SECONDS": "5"}
            if n == 1:  # the first node creates the admin user in the shared store
                extra |= {"KAFKAGUARD_ADMIN_USER": "admin", "KAFKAGUARD_ADMIN_PASSWORD": ADMIN_PASSWORD}
            log = tmp_path / f"serve{n}.log"
            with log.open("wb") as log_file:
                process = subprocess.Popen(
                    [str(KAFKAGUARD), "serve", "--data-dir", str(tmp_path / f"n{n}"), "--super-users", "User:admin",
                     "--listener", f"SASL_PLAINTEXT://127.0.0.1:{port}"],
                    env=_env(postgres_url, **extra), stdout=subprocess.DEVNULL, stderr=log_file,
                )  # fmt: skip
            started.append(Node(f"serve{n}", process, port, log))
            wait_until_listening(process, port)
        port = free_port()
        log = tmp_path / "console.log"
        with log.open("wb") as log_file:
            process = subprocess.Popen(
                [str(KAFKAGUARD), "console", "--data-dir", str(tmp_path / "n3"), "--super-users", "User:admin",
                 "--http-listener", f"127.0.0.1:{port}"],
                env=_env(postgres_url, KAFKAGUARD_SYNC_INTERVAL_SECONDS="0.2"), stdout=subprocess.DEVNULL,
                stderr=log_file,
            )  # fmt: skip
        started.append(Node("console", process, port, log))
        wait_until_listening(process, port)
        yield started[0], started[1], f"http://127.0.0.1:{port}"
        for node in started:
            if not node.killed:
                assert node.process.poll() is None, f"{node.name} exited with {node.process.returncode}"
    finally:
        for node in started:
            if node.process.poll() is None:
                node.process.send_signal(signal.SIGTERM)
        for node in started:
            try:
                node.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait()


def _binding(topic: str) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                      AclPermissionType.ALLOW)  # fmt: skip


EVERYTHING = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,  # type: ignore[arg-type]
                              AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip


def _topics(admin: AdminClient) -> set[str]:
    return {str(b.name) for b in admin.describe_acls(EVERYTHING).result(timeout=10)}


def _console_topics(console: str) -> set[str]:
    answer = httpx.get(f"{console}/api/acls", auth=("admin", ADMIN_PASSWORD), timeout=10)
    answer.raise_for_status()
    return {str(acl["resource_name"]) for acl in answer.json()["acls"]}


def _time_until(check: Callable[[], bool], bound: float = BOUND_S) -> float:
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > bound:
            raise AssertionError(f"not seen within {bound} s")
        time.sleep(0.005)
    return time.monotonic() - start


def test_a_change_through_any_node_is_seen_by_the_others(nodes: tuple[Node, Node, str]) -> None:
    serve1, serve2, console = nodes
    admin1, admin2 = serve1.admin(), serve2.admin()
    _topics(admin1), _topics(admin2)  # connected and logged in before the clock runs
    seen: dict[str, list[float]] = {"serve1→serve2": [], "serve2→serve1": [], "serve1→console": []}
    for n in range(5):
        admin1.create_acls([_binding(f"a{n}")])[_binding(f"a{n}")].result(timeout=10)
        seen["serve1→serve2"].append(_time_until(_has(f"a{n}", lambda: _topics(admin2))))
        seen["serve1→console"].append(_time_until(_has(f"a{n}", lambda: _console_topics(console))))
        admin2.create_acls([_binding(f"b{n}")])[_binding(f"b{n}")].result(timeout=10)
        seen["serve2→serve1"].append(_time_until(_has(f"b{n}", lambda: _topics(admin1))))
    # A user made over REST logs in on both servers.
    made = httpx.put(
        f"{console}/api/users/bob", json={"password": "bob-pw-123456"}, auth=("admin", ADMIN_PASSWORD), timeout=10
    )
    assert made.status_code == 200, made.text
    for name, node in (("console→serve1", serve1), ("console→serve2", serve2)):
        bob = node.admin("bob", "bob-pw-123456")
        seen[name] = [_time_until(functools.partial(_logs_in, bob), bound=5.0)]
    print({name: [round(s * 1000, 1) for s in values] for name, values in seen.items()})  # noqa: T201
    assert max(seen["serve1→serve2"] + seen["serve2→serve1"]) < 1.0, "servers must hear of changes, not poll"


def _logs_in(admin: AdminClient) -> bool:
    try:
        admin.list_topics(timeout=1)
    except Exception:  # noqa: BLE001 - a failed login is the answer "not yet"
        return False
    return True


def test_a_postgres_restart_under_writes_loses_nothing_acknowledged(
    nodes: tuple[Node, Node, str], postgres_server: PostgresServer
) -> None:
    serve1, serve2, console = nodes
    admin1, admin2 = serve1.admin(), serve2.admin()
    _topics(admin1), _topics(admin2)
    acknowledged: list[str] = []
    refused = 0
    stopped_at = started_at = 0.0
    start = time.monotonic()
    n = 0
    while time.monotonic() - start < 6.0:
        elapsed = time.monotonic() - start
        if not stopped_at and elapsed > 1.0:
            postgres_server.stop()
            stopped_at = elapsed
        if stopped_at and not started_at and elapsed > stopped_at + 1.5:
            postgres_server.start()
            started_at = elapsed
        binding = _binding(f"w{n}")
        try:
            admin1.create_acls([binding])[binding].result(timeout=10)
            acknowledged.append(f"w{n}")
        except Exception:  # noqa: BLE001 - a refused write is allowed while the store is down, a lost one is not
            refused += 1
            time.sleep(0.05)
        n += 1
    if not started_at:
        postgres_server.start()
    assert refused > 0, "PostgreSQL was stopped, yet no write failed"
    assert acknowledged, "no write succeeded"
    readers: list[tuple[str, Callable[[], set[str]]]] = [
        ("serve1", functools.partial(_topics, admin1)),
        ("serve2", functools.partial(_topics, admin2)),
        ("console", functools.partial(_console_topics, console)),
    ]
    logs = {"serve1": serve1, "serve2": serve2}
    for name, read in readers:
        try:
            _time_until(functools.partial(_holds_all, set(acknowledged), read), bound=15.0)
        except AssertionError as e:
            node = logs.get(name)
            raise AssertionError(f"{name}: {e}\n{node.log_tail() if node else ''}") from None
        assert set(acknowledged) <= read(), f"{name} lost an acknowledged write"


def _has(topic: str, read: Callable[[], set[str]]) -> Callable[[], bool]:
    return lambda: topic in read()


def _holds_all(wanted: set[str], read: Callable[[], set[str]]) -> bool:
    try:
        return wanted <= read()
    except Exception:  # noqa: BLE001 - a node still reconnecting answers later
        return False


def test_a_node_killed_during_writes_loses_nothing_it_acknowledged(nodes: tuple[Node, Node, str]) -> None:
    serve1, serve2, console = nodes
    admin1, admin2 = serve1.admin(), serve2.admin()
    _topics(admin1), _topics(admin2)
    acknowledged: list[str] = []
    start = time.monotonic()
    n = 0
    while serve2.process.poll() is None:
        if not serve2.killed and time.monotonic() - start > 1.0:
            serve2.killed = True
            serve2.process.kill()  # SIGKILL, while the next write may be in flight
        binding = _binding(f"k{n}")
        try:
            admin2.create_acls([binding])[binding].result(timeout=2)
            acknowledged.append(f"k{n}")
        except Exception:  # noqa: BLE001 - a write cut off by the kill may fail; an acknowledged one must last
            break
        n += 1
    serve2.process.wait(timeout=10)
    assert serve2.process.returncode == -signal.SIGKILL
    assert len(acknowledged) > 5, "the kill did not land during writes"
    for name, read in (("serve1", functools.partial(_topics, admin1)),
                       ("console", functools.partial(_console_topics, console))):  # fmt: skip
        _time_until(functools.partial(_holds_all, set(acknowledged), read), bound=5.0)
        assert set(acknowledged) <= read(), f"{name} misses a write serve2 acknowledged before it was killed"
