"""The Kafka server and the console in one process and one event loop, on one ``Services`` — as
``kafkaguard serve --http-listener`` runs them (``ServerWithConsole``): a change made through REST is visible to a
Kafka client at once, and a change made by a Kafka client is visible through REST at once (no polling involved:
``sync_interval_seconds`` is an hour here)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclBinding, AclBindingFilter, AclOperation, AclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType
from confluent_kafka.admin._scram import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from tests.console.conftest import ADMIN, ADMIN_PASSWORD, ConsoleHandle, start_console

pytestmark = pytest.mark.integration
TIMEOUT = 10.0


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleHandle]:
    handle = start_console(tmp_path_factory.mktemp("both"), with_kafka=True, sync_interval_seconds=3600)
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"logged errors: {handle.errors}"


def kafka_admin(both: ConsoleHandle, user: str = ADMIN, password: str = ADMIN_PASSWORD) -> AdminClient:
    conf: dict[str, Any] = {
        "bootstrap.servers": both.kafka_bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": password,
        "logger": logging.getLogger("rdkafka"),
        "socket.timeout.ms": 5000,
    }
    return AdminClient(conf)


def topic_filter(name: str) -> Any:
    anyone: Any = None  # the stubs say str; None is librdkafka's "any"
    return AclBindingFilter(
        ResourceType.TOPIC, name, ResourcePatternType.ANY, anyone, anyone, AclOperation.ANY, AclPermissionType.ANY
    )


def test_an_acl_created_through_rest_is_seen_by_a_kafka_client_and_deleted_back(both: ConsoleHandle) -> None:
    name = f"rest-{uuid.uuid4().hex[:8]}"
    admin = kafka_admin(both)
    with both.client() as rest:
        created = rest.post(
            "/api/acls",
            json={"principal": "User:alice", "resource_type": "Topic", "resource_name": name,
                  "pattern_type": "PREFIXED", "operation": "Write", "permission_type": "Deny"},
        )  # fmt: skip
        assert created.json()["created"] == 1
        seen = admin.describe_acls(topic_filter(name)).result(timeout=TIMEOUT)
        assert [(b.principal, b.resource_pattern_type, b.operation, b.permission_type) for b in seen] == [
            ("User:alice", ResourcePatternType.PREFIXED, AclOperation.WRITE, AclPermissionType.DENY)
        ]
        deleted = rest.request("DELETE", "/api/acls", json={"resource_name": name})
        assert deleted.json()["count"] == 1
    assert admin.describe_acls(topic_filter(name)).result(timeout=TIMEOUT) == []


def test_an_acl_created_by_a_kafka_client_is_seen_through_rest(both: ConsoleHandle) -> None:
    name = f"kafka-{uuid.uuid4().hex[:8]}"
    admin = kafka_admin(both)
    binding = AclBinding(
        ResourceType.GROUP, name, ResourcePatternType.LITERAL, "User:bob", "*", AclOperation.READ,
        AclPermissionType.ALLOW,
    )  # fmt: skip
    admin.create_acls([binding])[binding].result(timeout=TIMEOUT)
    with both.client() as rest:
        rows = rest.get("/api/acls", params={"resource_name": name}).json()["acls"]
        assert [(r["resource_type"], r["principal"], r["operation"]) for r in rows] == [("GROUP", "User:bob", "READ")]
        why = rest.post(
            "/api/authorize",
            json={"principal": "User:bob", "host": "10.1.1.1", "operation": "DESCRIBE", "resource_type": "GROUP",
                  "resource_name": name},
        ).json()  # fmt: skip
        assert why["decision"] == "ALLOWED" and why["rule"]["acl"]["id"] == rows[0]["id"]


def test_users_made_on_either_side_log_in_on_the_other(both: ConsoleHandle) -> None:
    rest_user, kafka_user = f"r-{uuid.uuid4().hex[:6]}", f"k-{uuid.uuid4().hex[:6]}"
    with both.client() as rest:
        assert rest.put(f"/api/users/{rest_user}", json={"password": "rest-pw"}).status_code == 200
    # The user made through REST logs in over SASL/SCRAM (and is refused with a wrong password).
    kafka_admin(both, rest_user, "rest-pw").list_topics(timeout=TIMEOUT)
    with pytest.raises(KafkaException):
        kafka_admin(both, rest_user, "wrong-pw").list_topics(timeout=2)
    # A user made by a Kafka client (it salts and derives) logs in to the console.
    admin = kafka_admin(both)
    upsertion = UserScramCredentialUpsertion(
        kafka_user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"kafka-pw"
    )
    admin.alter_user_scram_credentials([upsertion])[kafka_user].result(timeout=TIMEOUT)
    with httpx.Client(base_url=both.url, auth=(kafka_user, "kafka-pw"), timeout=TIMEOUT) as client:
        assert client.get("/api/acls").status_code == 403  # authenticated; no ACL lets it read
    with both.client() as rest:
        names = [u["name"] for u in rest.get("/api/users").json()["users"]]
    assert {rest_user, kafka_user} <= set(names)
