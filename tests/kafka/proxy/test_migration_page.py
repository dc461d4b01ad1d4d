"""The migration page (docs/guides/migrate.md), run as it stands against the session's real Kafka broker (``kafka``):
every shell block of the page, verbatim, in order, in bash (``-euo pipefail``) in one temporary directory, each run
after the page's first block (``migrate-addresses``) as a reader's shell would have it. The one change: the three
values that block tells the reader to set (``KAFKA``, ``PROXY_HOST``, ``PROXY_PORT``) are this test's broker and a
free port on 127.0.0.1. The Python block (``migrate-app``) is written verbatim to ``app.py``, as the page calls it.

What the page takes as given is made on Kafka only, with Kafka's Admin API, before the first block: the topics
``invoices`` and ``payroll``, the SCRAM user ``invoicing`` (kafkaguard never stores it: its logins pass through), its
ACLs (READ, WRITE on ``invoices``), and ``admin-password`` holding the broker's super user's password. Between the
export and the move, the application's team grants its consumer group on Kafka (READ on group ``invoicing``), as it
did before kafkaguard: the ACL the export missed, which the permissive proxy has to find. The same ``app.py`` then
works straight on Kafka, and the page moves it.

The proxy is started by running the page's ``migrate-start`` block in the background, stopped with SIGTERM to its
process group (as Ctrl-C would), and started again from the same block once the page switched it to enforcing.
The page's own ``audit_usage_window_seconds: 10`` bounds the wait for the would-be denials (usage-mode records are
written when their window ends).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin._acl import AclBinding as KafkaAclBinding
from confluent_kafka.admin._acl import AclBindingFilter as KafkaAclBindingFilter
from confluent_kafka.admin._acl import AclOperation as KafkaAclOperation
from confluent_kafka.admin._acl import AclPermissionType as KafkaAclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType
from confluent_kafka.admin._resource import ResourceType as KafkaResourceType
from confluent_kafka.cimpl import NewTopic

from kafkaguard.cli.aclfile import load_acl_file
from kafkaguard.model import AclBinding, AclBindingFilter
from kafkaguard.scram import ScramMechanism as KafkaguardScram
from kafkaguard.store import SqliteStore
from tests.docs.blocks import marked_block
from tests.kafka.broker import ADMIN_PASSWORD, KafkaBroker
from tests.kafka.proxy.conftest import free_port_range
from tests.kafka.proxy.test_passthrough import (
    SHA512,
    admin,
    broker_principals,
    delete_user,
    kafka_allows,
    log_end,
    set_password,
    until_broker_agrees,
)

APP_USER, APP_PASSWORD = "invoicing", "invoicing-secret"  # the page's app.py logs in so
TIMEOUT = 30.0
#: The page's usage window (``audit_usage_window_seconds``) plus the flush after it, with room for a busy machine.
EVIDENCE_WAIT = 40.0
#: principal, resource type, name, pattern type, operation, permission, host
Acl = tuple[str, str, str, str, str, str, str]


def shell_text(name: str) -> str:
    block = marked_block(name)
    assert block.language == "bash", block.where()
    return block.text


def addresses(kafka: KafkaBroker, port: int) -> str:
    """The page's first block with this test's three values in place of the reader's."""
    text = shell_text("migrate-addresses")
    for variable, value in (("KAFKA", kafka.bootstrap), ("PROXY_HOST", "127.0.0.1"), ("PROXY_PORT", str(port))):
        text, found = re.subn(rf"^{variable}=\S+", f"{variable}={value}", text, flags=re.M)
        assert found == 1, f"the page's first block sets {variable} once ({found} found)"
    return text


class Reader:
    """The reader's shell: a directory, PATH with this checkout's kafkaguard and python, and the page's addresses."""

    def __init__(self, directory: Path, preamble: str) -> None:
        self.directory = directory
        self.preamble = preamble
        venv_bin = Path(sys.executable).parent
        env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}  # another shell
        env["PATH"] = f"{venv_bin}{os.pathsep}{env.get('PATH', '')}"
        self.env = env

    def script(self, name: str) -> list[str]:
        return ["bash", "-euo", "pipefail", "-c", f"{self.preamble}\n{shell_text(name)}"]

    def run(self, name: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(self.script(name), cwd=self.directory, env=self.env, capture_output=True, text=True,
                              timeout=120)  # fmt: skip
        assert done.returncode == 0, f"{name} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        return done

    def start_proxy(self, port: int, log: Path) -> subprocess.Popen[bytes]:
        """The page's migrate-start block, left running (its own process group, stopped as Ctrl-C would)."""
        with log.open("ab") as output:
            process = subprocess.Popen(self.script("migrate-start"), cwd=self.directory, env=self.env,
                                       stdout=output, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        try:
            for listening in (port, port + 2):  # the bootstrap port, and broker 1's (PROXY_PORT+1+N)
                wait_for_port(process, listening, log)
        except BaseException:
            stop(process)
            raise
        return process


def wait_for_port(process: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the proxy exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.1)  # polling for the listener, bounded by the deadline
    raise AssertionError(f"the proxy did not listen on {port}:\n{log.read_text()[-3000:]}")


def stop(process: subprocess.Popen[bytes]) -> int:
    """SIGTERM to the block's process group (bash and the proxy it started, both ours): the proxy drains, writes the
    open usage window and exits."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    try:
        return process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        raise


#: librdkafka's names that are not Kafka's: its resource type 4 is Kafka's CLUSTER.
LIBRDKAFKA_RESOURCE_NAMES = {"BROKER": "CLUSTER"}


def of_kafka(binding: Any) -> Acl:  # the stubs type its enums as str | int too
    resource_type = LIBRDKAFKA_RESOURCE_NAMES.get(binding.restype.name, binding.restype.name)
    return (binding.principal, resource_type, binding.name, binding.resource_pattern_type.name,
            binding.operation.name, binding.permission_type.name, binding.host)  # fmt: skip


def of_kafkaguard(binding: AclBinding) -> Acl:
    pattern, entry = binding.pattern, binding.entry
    return (entry.principal, pattern.resource_type.name, pattern.name, pattern.pattern_type.name,
            entry.operation.name, entry.permission_type.name, entry.host)  # fmt: skip


def every_acl(principal: Any = None) -> Any:
    """A filter matching every ACL (of ``principal``, when given); None means any (the stubs type them as str)."""
    anything: Any = None
    return KafkaAclBindingFilter(KafkaResourceType.ANY, anything, ResourcePatternType.ANY, principal, anything,
                                 KafkaAclOperation.ANY, KafkaAclPermissionType.ANY)  # fmt: skip


def cluster_acls(kafka: KafkaBroker) -> set[Acl]:
    """Every ACL the broker holds that librdkafka can represent (the export says it leaves the others, such as
    DELEGATION_TOKEN ones, out), read with its Admin API directly rather than through kafkaguard's code."""
    client = admin(kafka)
    described = client.describe_acls(every_acl()).result(TIMEOUT)
    found = {of_kafka(binding) for binding in described}
    return {acl for acl in found if "UNKNOWN" not in (acl[1], acl[4])}


def create_topics(kafka: KafkaBroker, *names: str) -> None:
    client = admin(kafka)
    for future in client.create_topics([NewTopic(name, 1, 1) for name in names]).values():
        try:
            future.result(TIMEOUT)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


def grant_group_on_kafka(kafka: KafkaBroker, principal: str, group: str) -> None:
    binding = KafkaAclBinding(KafkaResourceType.GROUP, group, ResourcePatternType.LITERAL, principal, "*",
                              KafkaAclOperation.READ, KafkaAclPermissionType.ALLOW)  # fmt: skip
    client = admin(kafka)
    for future in client.create_acls([binding]).values():
        future.result(TIMEOUT)


def audit_records(log: Path) -> list[dict[str, object]]:
    """The authorization records of the proxy's audit log (CloudEvents envelopes: their ``data``)."""
    records = []
    for line in log.read_text().splitlines():
        event = json.loads(line)
        data = event.get("data") if isinstance(event, dict) else None
        if isinstance(data, dict) and "decision" in data:
            records.append(data)
    return records


def would_be_denials(log: Path) -> set[tuple[object, ...]]:
    return {(r["principal"], r["operation"], r["resource_type"], r["resource_name"])
            for r in audit_records(log) if r.get("enforced") is False}  # fmt: skip


@pytest.fixture
def reader(kafka: KafkaBroker, tmp_path: Path) -> Iterator[tuple[Reader, int]]:
    port = free_port_range()
    (tmp_path / "admin-password").write_text(ADMIN_PASSWORD + "\n")
    (tmp_path / "admin-password").chmod(0o600)
    (tmp_path / "app.py").write_text(marked_block("migrate-app").text + "\n")
    try:
        yield Reader(tmp_path, addresses(kafka, port)), port
    finally:
        forget_on_kafka(kafka)


def forget_on_kafka(kafka: KafkaBroker) -> None:
    """The session's broker as the other modules found it: the application's ACLs, user and topics gone."""
    ours = every_acl(f"User:{APP_USER}")
    client = admin(kafka)
    for future in client.delete_acls([ours]).values():
        future.result(TIMEOUT)
    with contextlib.suppress(KafkaException):  # never made, if the test failed early
        delete_user(kafka, APP_USER, SHA512)
    for future in client.delete_topics(["invoices", "payroll"]).values():
        with contextlib.suppress(KafkaException):
            future.result(TIMEOUT)


def test_the_migration_page_runs_as_written(kafka: KafkaBroker, reader: tuple[Reader, int]) -> None:
    shell, port = reader
    directory = shell.directory
    principal = f"User:{APP_USER}"
    broker_log_start = log_end(kafka)
    # the cluster as the page finds it: the application's topic, its user and ACLs, on Kafka only
    create_topics(kafka, "invoices", "payroll")
    set_password(kafka, APP_USER, APP_PASSWORD, SHA512)
    until_broker_agrees(kafka, "SCRAM-SHA-512", APP_USER, APP_PASSWORD, ok=True)
    kafka_allows(kafka, principal, "invoices", KafkaAclOperation.READ, KafkaAclOperation.WRITE)

    # 1. the export holds the cluster's ACLs, the application's among them
    exported = shell.run("migrate-export")
    assert "Exported" in exported.stderr and "acls.yaml" in exported.stderr
    in_file = {of_kafkaguard(b) for b in load_acl_file(directory / "acls.yaml")}
    assert in_file == cluster_acls(kafka)
    for operation in ("READ", "WRITE"):
        assert (principal, "TOPIC", "invoices", "LITERAL", operation, "ALLOW", "*") in in_file
    excerpt = marked_block("migrate-export-excerpt").text
    assert (
        excerpt.startswith("principals:\n")
        and excerpt.removeprefix("principals:") in (directory / "acls.yaml").read_text()
    )

    # after the export, the application's team grants its consumer group on Kafka, as it always did
    grant_group_on_kafka(kafka, principal, "invoicing")
    today = subprocess.run([sys.executable, "app.py", kafka.bootstrap], cwd=directory, env=shell.env,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert today.returncode == 0, today.stderr  # the application works straight on Kafka

    # 2. the proxy: passthrough, permissive
    shell.run("migrate-config")
    settings = (directory / "kafkaguard.yaml").read_text()
    assert f"upstream: {kafka.bootstrap}\n" in settings and "enforcement: permissive\n" in settings
    proxy_log = directory / "proxy.log"
    proxy = shell.start_proxy(port, proxy_log)
    try:
        assert _eventually(lambda: "PERMISSIVE" in proxy_log.read_text()), proxy_log.read_text()[-3000:]

        # 3. the store gets exactly the export, and plan says so
        stored = shell.run("migrate-store")
        assert re.search(rf"Plan: 0 to add, 0 to remove, {len(in_file)} unchanged\.", stored.stdout), stored.stdout
        store = SqliteStore(directory / "data" / "kafkaguard.db")
        try:
            assert {of_kafkaguard(acl.binding) for acl in store.find_acls(AclBindingFilter.ANY)} == in_file
            # the application's login passed through: its credential is on Kafka only
            assert all(store.get_credential(APP_USER, mechanism) is None for mechanism in KafkaguardScram)
        finally:
            store.close()

        # 4. the application, moved: it works through the permissive proxy, its group's ACL missing in kafkaguard
        moved = shell.run("migrate-move")
        assert "invoices: wrote and read back invoice " in moved.stdout

        # 5. the would-be denials, once the page's usage window has ended
        audit_log = directory / "data" / "audit.log"
        wanted = (principal, "READ", "GROUP", "invoicing")
        assert _eventually(lambda: audit_log.is_file() and wanted in would_be_denials(audit_log), EVIDENCE_WAIT), (
            "no would-be denial of READ on group invoicing in the audit log"
        )
        evidence = shell.run("migrate-evidence")
        counted = dict(line.rsplit(" x", 1) for line in evidence.stdout.splitlines() if line.startswith("User:"))
        assert int(counted[f"{principal} READ GROUP:invoicing"]) >= 2, evidence.stdout  # JoinGroup, SyncGroup at least
        assert int(counted[f"{principal} DESCRIBE GROUP:invoicing"]) >= 1, evidence.stdout  # FindCoordinator
        assert not [key for key in counted if "TOPIC:invoices" in key], evidence.stdout  # exported: allowed
        # explain: the last would-be denial of the principal, on its group, still denied by the store
        assert re.search(r"^request +User:invoicing from \S+: (READ|DESCRIBE) on GROUP:invoicing ", evidence.stdout,
                         re.M), evidence.stdout  # fmt: skip
        assert "not enforced" in evidence.stdout and re.search(r"^now +DENIED", evidence.stdout, re.M)

        # 6. the missing ACL granted, enforcement switched
        shell.run("migrate-grant")
        regranted = {of_kafkaguard(b) for b in load_acl_file(directory / "acls.yaml")}
        assert regranted == in_file | {(principal, "GROUP", "invoicing", "LITERAL", "READ", "ALLOW", "*")}
        assert "enforcement: enforcing\n" in (directory / "kafkaguard.yaml").read_text()
    finally:
        stopped = stop(proxy)  # a failure above stays the one reported
    assert stopped == 0, proxy_log.read_text()[-3000:]

    proxy = shell.start_proxy(port, proxy_log)
    try:
        enforced = shell.run("migrate-enforced")
    finally:
        stopped = stop(proxy)
    assert stopped == 0, proxy_log.read_text()[-3000:]
    assert "invoices: wrote and read back invoice " in enforced.stdout
    assert "payroll: refused" in enforced.stdout
    assert "not delivered to payroll" in enforced.stderr and "TOPIC_AUTHORIZATION_FAILED" in enforced.stderr
    # kafkaguard refused it (the stop wrote the open window): a denial, enforced
    refused = [r for r in audit_records(directory / "data" / "audit.log")
               if r["principal"] == principal and r["resource_name"] == "payroll"]  # fmt: skip
    assert refused, "no record of the refused payroll request"
    assert all(r["decision"] == "DENIED" and "enforced" not in r for r in refused), refused
    # ... before it reached the broker: the broker's authorizer never decided anything of the app's on payroll
    assert not [seen for seen in broker_principals(kafka, "payroll", broker_log_start) if seen.startswith(principal)]
    assert f"{principal} WRITE" in broker_principals(kafka, "invoices", broker_log_start)  # it does log the app's


def _eventually(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)  # polling a file the proxy writes, bounded by the deadline
    return False
