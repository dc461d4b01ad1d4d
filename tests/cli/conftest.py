"""A kafkaguard server per test module for the CLI tests (real SASL/SCRAM over loopback), the CLI runner, and a
second client (kafka-python) to check the cluster's state independently of the CLI's own client."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkaguard.config import SecurityProtocol
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle, sasl_server

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"(read_text|open_text) is deprecated", category=DeprecationWarning)
    from kafka.admin import (  # type: ignore[import-untyped]
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePatternFilter,
        ResourceType,
    )

CLI_USER = "operator"
CLI_PASSWORD = "operator-secret"  # noqa: S105 - a test password


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    """A server with one SASL_PLAINTEXT listener; User:admin is a super user."""
    with sasl_server(tmp_path_factory.mktemp("kafkaguard-cli")) as handle:
        yield handle


@pytest.fixture(scope="module")
def bootstrap(server: ServerHandle) -> str:
    return server.bootstrap(SecurityProtocol.SASL_PLAINTEXT)


def write_properties(path: Path, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> Path:
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        f"sasl.mechanism={mechanism}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        f'    username="{user}" password="{password}";\n',
        "utf-8",
    )
    return path


@pytest.fixture(scope="module")
def admin_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kafka-acls.sh-style --command-config for the super user (SCRAM-SHA-512 through sasl.jaas.config)."""
    return write_properties(
        tmp_path_factory.mktemp("props") / "admin.properties", ADMIN, ADMIN_PASSWORD, "SCRAM-SHA-512"
    )


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture(scope="module")
def checker(server: ServerHandle) -> Iterator[KafkaAdminClient]:
    """kafka-python's admin client as the super user: the second opinion on the cluster's state."""
    host, port = server.sasl
    client = KafkaAdminClient(
        bootstrap_servers=f"{host}:{port}",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username=ADMIN,
        sasl_plain_password=ADMIN_PASSWORD,
        request_timeout_ms=10000,
    )
    try:
        yield client
    finally:
        client.close()


def cluster_acls(
    checker: KafkaAdminClient, resource_name: str | None = None
) -> set[tuple[str, str, str, str, str, str, str]]:
    """Every ACL on the cluster as (type, name, pattern, principal, host, operation, permission) strings."""
    acl_filter = ACLFilter(
        principal=None,
        host=None,
        operation=ACLOperation.ANY,
        permission_type=ACLPermissionType.ANY,
        resource_pattern=ResourcePatternFilter(ResourceType.ANY, resource_name, ACLResourcePatternType.ANY),
    )
    found, error = checker.describe_acls(acl_filter)
    assert error.errno == 0, error
    return {
        (
            acl.resource_pattern.resource_type.name,
            acl.resource_pattern.resource_name,
            acl.resource_pattern.pattern_type.name,
            acl.principal,
            acl.host,
            acl.operation.name,
            acl.permission_type.name,
        )
        for acl in found
    }


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"
