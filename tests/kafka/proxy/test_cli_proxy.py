"""``kafkaguard proxy`` as a process: the README's way to run it, against the real broker; and its clear refusals."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclBinding, AclBindingFilter, AclOperation, AclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType
from confluent_kafka.cimpl import NewTopic

from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker
from tests.kafka.proxy.conftest import free_port_range
from tests.kafka.proxy.processes import KAFKAGUARD, environment
from tests.kafka.proxy.test_proxy_clients import sasl, unique
from tests.server.test_cli_serve import wait_until_listening

PASSWORD = "cli-proxy-pw"  # noqa: S105 - a test password


def test_proxy_runs_from_the_command_line_and_stops_on_sigterm(kafka: KafkaBroker, tmp_path: Path):
    data_dir, name, topic = tmp_path / "data", unique("cli"), unique("cli-topic")
    broker_admin = AdminClient(sasl(kafka.bootstrap, ADMIN, ADMIN_PASSWORD))
    broker_admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    for user, password in ((name, PASSWORD), ("ops", "ops-pw")):
        subprocess.run([str(KAFKAGUARD), "users", "add", user, "--password", password, "--data-dir", str(data_dir)],
                       check=True, capture_output=True, timeout=60, env=environment())  # fmt: skip
    port = free_port_range()
    process = subprocess.Popen(
        [str(KAFKAGUARD), "proxy", "--data-dir", str(data_dir), "--listener", f"SASL_PLAINTEXT://127.0.0.1:{port}",
         "--upstream", kafka.bootstrap, "--upstream-security-protocol", "SASL_PLAINTEXT", "--upstream-user", ADMIN,
         "--super-users", "User:ops", "--log-level", "WARNING"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=environment(KAFKAGUARD_UPSTREAM_PASSWORD=ADMIN_PASSWORD),
    )  # fmt: skip
    try:
        wait_until_listening(process, port)
        wait_until_listening(process, port + 2)  # node 1 of the broker
        bootstrap = f"127.0.0.1:{port}"
        grant = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{name}", "*",
                           AclOperation.WRITE, AclPermissionType.ALLOW)  # fmt: skip
        ops = AdminClient(sasl(bootstrap, "ops", "ops-pw"))
        ops.create_acls([grant])[grant].result(30)  # answered by kafkaguard, kept in its store
        errors: list[KafkaError | None] = []
        producer = Producer(sasl(bootstrap, name, PASSWORD))
        producer.produce(topic, b"through the CLI", on_delivery=lambda err, _m: errors.append(err))
        assert producer.flush(30) == 0
        assert errors == [None]
        # the broker itself never got that ACL: the proxy decided, and the message is really on the broker
        assert not broker_admin.describe_acls(_filter(name)).result(30)
        low, high = Consumer(
            sasl(kafka.bootstrap, ADMIN, ADMIN_PASSWORD, **{"group.id": unique("g")})
        ).get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        assert high - low == 1
    finally:
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err.decode(errors="replace")
    assert ADMIN_PASSWORD.encode() not in err


def _filter(name: str) -> AclBindingFilter:
    anyone: Any = None
    return AclBindingFilter(ResourceType.ANY, anyone, ResourcePatternType.ANY, f"User:{name}", anyone,
                            AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip


def test_an_unreachable_upstream_is_a_clear_error(tmp_path: Path):
    port = free_port_range()
    done = subprocess.run(
        [str(KAFKAGUARD), "proxy", "--data-dir", str(tmp_path / "data"), "--listener",
         f"SASL_PLAINTEXT://127.0.0.1:{port}", "--upstream", "127.0.0.1:1"],
        capture_output=True, timeout=60, env=environment(),
    )  # fmt: skip
    assert done.returncode == 2
    assert b"cannot use the upstream 127.0.0.1:1" in done.stderr


def test_sasl_upstream_without_a_password_is_refused_before_dialing(tmp_path: Path):
    done = subprocess.run(
        [str(KAFKAGUARD), "proxy", "--data-dir", str(tmp_path / "data"), "--upstream", "127.0.0.1:1",
         "--upstream-security-protocol", "SASL_SSL", "--upstream-user", "svc"],
        capture_output=True, timeout=60, env=environment(),
    )  # fmt: skip
    assert done.returncode == 2
    assert b"needs upstream_user and a password" in done.stderr
