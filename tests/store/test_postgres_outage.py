"""A node on a PostgreSQL store while PostgreSQL is down: it keeps authorizing from its last snapshot, writes fail
per item with Kafka's retriable REQUEST_TIMED_OUT on the wire and 503 over REST, ``/healthz`` says degraded, and
everything works again by itself when PostgreSQL returns."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclBinding, AclOperation, AclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType

from tests.console.conftest import ADMIN, ADMIN_PASSWORD, start_console
from tests.postgres import PASSWORD, PostgresServer


def eventually(probe: Callable[[], Any], expected: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while (value := probe()) != expected:
        assert time.monotonic() < deadline, f"still {value!r}, expected {expected!r}"
        time.sleep(0.2)  # waiting for the pool to notice PostgreSQL's state, bounded by the deadline


def grant(topic: str) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:someone", "*",
                      AclOperation.READ, AclPermissionType.ALLOW)  # fmt: skip


def create(admin: AdminClient, topic: str) -> int:
    """0 when the ACL was created, else the Kafka error code the item got."""
    binding = grant(topic)
    try:
        admin.create_acls([binding])[binding].result(30)
    except KafkaException as e:
        return int(e.args[0].code())
    return 0


def test_an_outage_is_retriable_on_the_wire_503_over_rest_and_recovers(
    postgres_server: PostgresServer, postgres_url: str, tmp_path: Path
):
    handle = start_console(tmp_path / "data", with_kafka=True, store=postgres_url, store_password=PASSWORD)
    try:
        admin = AdminClient({"bootstrap.servers": handle.kafka_bootstrap, "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": ADMIN,
                             "sasl.password": ADMIN_PASSWORD})  # fmt: skip
        with handle.client(None) as anonymous, handle.client() as rest:
            assert create(admin, "before") == 0
            assert anonymous.get("/healthz").json()["status"] == "ok"
            postgres_server.stop()
            try:
                assert create(admin, "during") == KafkaError.REQUEST_TIMED_OUT
                assert anonymous.get("/healthz").json() == {"status": "degraded", "store": "unreachable",
                                                            "acls": handle.services.authorizer.acl_count,
                                                            "enforcement": "enforcing",
                                                            "shadow_acls": None}  # fmt: skip
                refused = rest.put("/api/users/carol", json={"password": "carol-pw"})
                assert refused.status_code == 503
                assert "REQUEST_TIMED_OUT" in refused.json()["detail"]
                # authorization goes on from the last snapshot: the admin still logs in and is answered
                assert handle.kafka_bootstrap and admin.list_topics(timeout=10) is not None
            finally:
                postgres_server.start()
            eventually(lambda: create(admin, "after"), 0)
            eventually(lambda: anonymous.get("/healthz").json()["status"], "ok")
        acls = {acl.binding.pattern.name for acl in handle.services.acls.describe_acls()}
        assert {"before", "after"} <= acls and "during" not in acls
    finally:
        handle.stop()
