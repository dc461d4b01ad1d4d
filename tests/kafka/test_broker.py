"""The fixture gives a real, SCRAM-protected broker with Kafka's StandardAuthorizer and its authorizer log."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclBinding, AclBindingFilter, AclOperation, AclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType

from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker


def admin_client(kafka: KafkaBroker, user: str = ADMIN, password: str = ADMIN_PASSWORD) -> AdminClient:
    config: dict[str, str | int | float | bool] = {
        "bootstrap.servers": kafka.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": password,
    }
    return AdminClient(config)


def topic_filter(name: str) -> AclBindingFilter:
    anyone: Any = None  # librdkafka's filters take None for "any principal / host"; its stubs say str
    return AclBindingFilter(
        ResourceType.TOPIC, name, ResourcePatternType.LITERAL, anyone, anyone, AclOperation.ANY, AclPermissionType.ANY
    )


def test_the_super_user_manages_acls_and_the_authorizer_logs_decisions(kafka: KafkaBroker):
    admin = admin_client(kafka)
    acl = AclBinding(
        ResourceType.TOPIC, "fixture-smoke", ResourcePatternType.LITERAL, "User:smoke", "*",
        AclOperation.READ, AclPermissionType.ALLOW,
    )  # fmt: skip
    admin.create_acls([acl])[acl].result(timeout=30)
    assert admin.describe_acls(topic_filter("fixture-smoke")).result(timeout=30) == [acl]
    for future in admin.delete_acls([topic_filter("fixture-smoke")]).values():
        future.result(timeout=30)
    assert admin.describe_acls(topic_filter("fixture-smoke")).result(timeout=30) == []
    log = kafka.authorizer_log.read_text()
    assert "Principal = User:admin is Allowed operation = ALTER from host = 127.0.0.1" in log


def test_kafkas_own_acl_command_runs_against_it(kafka: KafkaBroker, tmp_path: Path):
    config = kafka.client_properties(tmp_path / "admin.properties")
    command = kafka.java_command(
        "kafka.admin.AclCommand", "--bootstrap-server", kafka.bootstrap, "--command-config", str(config), "--list"
    )
    listed = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert listed.returncode == 0, listed.stderr
