"""Every door writes the same management event for the same change (issue 27): an ACL created through the Kafka wire
(confluent-kafka's AdminClient), the console's REST API, ``kafkaguard acls --add`` and ``kafkaguard apply`` is in
the store's history with the same action, binding, actor principal and result, and the door's own interface and
request id; ``kafkaguard acls history`` and ``GET /api/history`` answer from that history. Refused items are events
too, and no event carries a secret."""

from __future__ import annotations

import base64
import json
import logging
import re
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclBinding as KafkaAclBinding
from confluent_kafka.admin._acl import AclOperation, AclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType
from typer.testing import CliRunner

from kafkaguard.cli.main import app
from kafkaguard.model import HistoryQuery
from kafkaguard.scram import ScramMechanism
from tests.cli.conftest import write_properties
from tests.console.conftest import ADMIN, ADMIN_PASSWORD, ConsoleHandle, start_console

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings(r"ignore:(read_text|open_text) is deprecated:DeprecationWarning"),
]


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleHandle]:
    handle = start_console(tmp_path_factory.mktemp("doors"), with_kafka=True)
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"logged errors: {handle.errors}"


@pytest.fixture(scope="module")
def admin_properties(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_properties(tmp_path_factory.mktemp("props") / "admin.properties", ADMIN, ADMIN_PASSWORD)


def kafka_admin(both: ConsoleHandle) -> AdminClient:
    conf: dict[str, Any] = {
        "bootstrap.servers": both.kafka_bootstrap, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": ADMIN, "sasl.password": ADMIN_PASSWORD,
        "client.id": "doors-test", "logger": logging.getLogger("rdkafka"), "socket.timeout.ms": 5000,
    }  # fmt: skip
    return AdminClient(conf)


def through_kafka(both: ConsoleHandle, _props: Path, _tmp: Path, topic: str) -> None:
    binding = KafkaAclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:bob", "*",
                              AclOperation.READ, AclPermissionType.ALLOW)  # fmt: skip
    admin = kafka_admin(both)  # held until the answer: a dropped client destroys its pending requests
    for future in admin.create_acls([binding], request_timeout=10).values():
        future.result()


def through_rest(both: ConsoleHandle, _props: Path, _tmp: Path, topic: str) -> None:
    binding = {"resource_type": "TOPIC", "resource_name": topic, "pattern_type": "LITERAL", "principal": "User:bob",
               "host": "*", "operation": "READ", "permission_type": "ALLOW"}  # fmt: skip
    with both.client() as rest:
        answer = rest.post("/api/acls", json=binding)
        assert answer.status_code == 200, answer.text
        assert answer.json()["created"] == 1


def through_cli(both: ConsoleHandle, props: Path, _tmp: Path, topic: str) -> None:
    result = CliRunner().invoke(app, ["acls", "--bootstrap-server", both.kafka_bootstrap, "--command-config",
                                      str(props), "--add", "--allow-principal", "User:bob", "--operation", "Read",
                                      "--topic", topic])  # fmt: skip
    assert result.exit_code == 0, result.output


def through_apply(both: ConsoleHandle, props: Path, tmp: Path, topic: str) -> None:
    acl_file = tmp / "acls.yaml"
    acl_file.write_text(f"principals:\n  User:bob:\n    acls:\n      - topic: {topic}\n        operations: [Read]\n")
    result = CliRunner().invoke(app, ["apply", "--bootstrap-server", both.kafka_bootstrap, "--command-config",
                                      str(props), "-f", str(acl_file)])  # fmt: skip
    assert result.exit_code == 0, result.output


Door = Callable[[ConsoleHandle, Path, Path, str], None]
#: door → (how it makes the change, its interface, the pattern of its request id)
DOORS: dict[str, tuple[Door, str, str]] = {
    "kafka": (through_kafka, "kafka:SASL_PLAINTEXT", r"doors-test/\d+"),
    "rest": (through_rest, "rest", r"[0-9a-f]{32}"),
    "cli": (through_cli, "kafka:SASL_PLAINTEXT", r"kafkaguard-acls/\d+"),
    "apply": (through_apply, "kafka:SASL_PLAINTEXT", r"kafkaguard-apply/\d+"),
}


@pytest.mark.parametrize("door", list(DOORS))
def test_every_door_writes_the_same_management_event(
    door: str, both: ConsoleHandle, admin_properties: Path, tmp_path: Path
) -> None:
    make, interface, request_id = DOORS[door]
    topic = f"pii-orders-{door}-{uuid.uuid4().hex[:6]}"
    make(both, admin_properties, tmp_path, topic)

    [event] = both.services.store.read_history(HistoryQuery(resource_name=topic))
    acl = dict(event.details["acl"])  # type: ignore[call-overload]
    acl_id = acl.pop("id")
    assert (event.action, event.result, event.error_message) == ("acl.created", "SUCCESS", None)
    assert acl == {"resource_type": "TOPIC", "resource_name": topic, "pattern_type": "LITERAL",
                   "principal": "User:bob", "host": "*", "operation": "READ", "permission_type": "ALLOW"}  # fmt: skip
    [stored] = [a for a in both.services.acls.describe_acls() if a.binding.pattern.name == topic]
    assert acl_id == stored.id
    assert event.actor.principal == f"User:{ADMIN}"
    assert event.actor.address == "127.0.0.1"
    assert event.actor.interface == interface
    assert event.actor.request_id is not None and re.fullmatch(request_id, event.actor.request_id)
    assert (event.principal, event.subject) == ("User:bob", f"TOPIC:LITERAL:{topic}")

    # The same event through the CLI's history (on the console's data directory) and the console's API.
    listed = CliRunner().invoke(app, ["acls", "history", "--data-dir", str(both.services.settings.data_dir),
                                      "--resource", topic, "--output", "json"])  # fmt: skip
    assert listed.exit_code == 0, listed.output
    [line] = listed.stdout.splitlines()
    assert json.loads(line)["data"] == event.data()
    with both.client() as rest:
        answer = rest.get("/api/history", params={"principal": "User:bob", "resource": topic})
    assert answer.status_code == 200, answer.text
    [shown] = answer.json()["events"]
    assert shown["data"] == event.data() and shown["actor"]["interface"] == interface


def test_a_refused_binding_is_an_event_with_kafkas_error(both: ConsoleHandle) -> None:
    topic = f"refused-{uuid.uuid4().hex[:6]}"
    bad = {"resource_type": "CLUSTER", "resource_name": "not-the-cluster", "principal": "User:bob",
           "operation": "ALTER", "permission_type": "ALLOW", "pattern_type": "LITERAL", "host": "*"}  # fmt: skip
    good = {"resource_type": "TOPIC", "resource_name": topic, "principal": "User:bob", "operation": "READ",
            "permission_type": "ALLOW", "pattern_type": "LITERAL", "host": "*"}  # fmt: skip
    with both.client() as rest:
        answer = rest.post("/api/acls", json=[good, bad])
    assert answer.status_code == 200, answer.text
    assert [r["ok"] for r in answer.json()["results"]] == [True, False]
    [ok] = both.services.store.read_history(HistoryQuery(resource_name=topic))
    [refused] = both.services.store.read_history(HistoryQuery(resource_name="not-the-cluster"))
    assert ok.result == "SUCCESS"
    assert refused.result == "INVALID_REQUEST" and not refused.succeeded
    assert refused.error_message == answer.json()["results"][1]["error"]
    assert refused.details["acl"]["id"] is None  # type: ignore[index]  # nothing was stored
    assert refused.actor.interface == "rest"


def test_a_refused_deletion_of_a_missing_user_is_an_event(both: ConsoleHandle) -> None:
    with both.client() as rest:
        answer = rest.delete("/api/users/nobody-here", params={"mechanism": "SCRAM-SHA-256"})
    assert answer.status_code == 404, answer.text
    [event] = both.services.store.read_history(HistoryQuery(principal="User:nobody-here"))
    assert (event.action, event.result, event.details["mechanism"]) == (
        "scram.deleted", "RESOURCE_NOT_FOUND", "SCRAM-SHA-256",
    )  # fmt: skip


def test_no_secret_in_any_event_or_history_output(both: ConsoleHandle) -> None:
    user, password = f"carol-{uuid.uuid4().hex[:6]}", "carol-very-secret-password"
    with both.client() as rest:
        answer = rest.put(f"/api/users/{user}", json={"mechanism": "SCRAM-SHA-256", "password": password})
        assert answer.status_code == 200, answer.text
        shown = rest.get("/api/history", params={"principal": f"User:{user}"}).text
    credential = both.services.store.get_credential(user, ScramMechanism.SCRAM_SHA_256)
    assert credential is not None
    secrets = [password.encode()]
    for value in (credential.salt, credential.stored_key, credential.server_key):
        secrets += [value, value.hex().encode(), base64.b64encode(value), base64.b64encode(value).rstrip(b"=")]
    [event] = both.services.store.read_history(HistoryQuery(principal=f"User:{user}"))
    assert dict(event.details) == {"user": user, "mechanism": "SCRAM-SHA-256", "iterations": 8192}
    listed = CliRunner().invoke(app, ["acls", "history", "--data-dir", str(both.services.settings.data_dir),
                                      "--principal", f"User:{user}"])  # fmt: skip
    with sqlite3.connect(both.services.settings.database_path) as db:
        rows = repr(db.execute("SELECT * FROM management_events").fetchall()).encode()
    outputs = {"event": json.dumps(event.data()).encode(), "api": shown.encode(), "cli": listed.stdout.encode(),
               "rows": rows}  # fmt: skip
    for where, text in outputs.items():
        leaked = [s for s in secrets if s in text]
        assert leaked == [], f"a secret in the {where}"
