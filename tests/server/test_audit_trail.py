"""The audit trail of a running server: CloudEvents envelopes in the file, valid against the published schema, for
authorization decisions, logins (never a secret) and management events; identical failed logins collapse into one
event with a count; the trail's counts reach the console's metrics."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
import scramp  # type: ignore[import-untyped]
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from kafkaguard.audit.records.cloudevents import DATASCHEMA
from kafkaguard.audit.records.logins import LoginResult
from kafkaguard.config import SecurityProtocol
from kafkaguard.console.metrics import ConsoleMetrics
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle, TlsFiles, start_server
from tests.wire import Wire, create_acl, metadata

pytestmark = pytest.mark.integration

SCHEMA_PATH = Path(__file__).parents[2] / "docs" / "audit-event.schema.json"
WRONG_PASSWORD = "wrong-password-7c1d"  # noqa: S105 - the secret whose leaks the test looks for


def validator() -> Any:
    schema = json.loads(SCHEMA_PATH.read_text("utf-8"))
    assert schema["$id"] == DATASCHEMA and schema["$id"].endswith("v2.json")
    return jsonschema_rs.Draft202012Validator(schema)


@pytest.fixture
def audited(tmp_path: Path, tls_files: TlsFiles) -> Iterator[ServerHandle]:
    handle = start_server(tmp_path / "data", tls_files, audit_login_failure_window_seconds=3600,
                          audit_node_name="node-a")  # fmt: skip
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == []


def failed_login(handle: ServerHandle, user: str) -> None:
    with Wire(handle.sasl) as wire:
        assert wire.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256")).error_code == 0
        client = scramp.ScramClient(["SCRAM-SHA-256"], user, WRONG_PASSWORD)
        first = wire.request(SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode()))
        client.set_server_first(bytes(first.auth_bytes).decode())
        final = wire.request(SaslAuthenticateRequest(auth_bytes=client.get_client_final().encode()))
        assert final.error_code != 0


def test_every_event_is_an_envelope_valid_against_the_published_schema(audited: ServerHandle):
    with Wire(audited.sasl) as wire:
        wire.login(ADMIN, ADMIN_PASSWORD)
        metadata(wire, ["audited-topic"])
        # A real change through the Kafka door: its management event reaches the trail (Services.events).
        assert create_acl(wire, resource_type=2, name="pii-orders", pattern_type=3, principal="User:bob",
                          operation=3) == 0  # fmt: skip
    for _ in range(5):
        failed_login(audited, "mallory")
    failed_login(audited, "eve")

    envelopes = audited.audit_envelopes(end_windows=True)
    check = validator()
    for envelope in envelopes:
        errors = [error.message for error in check.iter_errors(envelope)]
        assert errors == [], (envelope, errors)
    assert {e["source"] for e in envelopes} == {"kafkaguard://node-a"}
    by_type: dict[str, list[dict[str, Any]]] = {}
    for envelope in envelopes:
        by_type.setdefault(envelope["type"], []).append(envelope)
    assert {"io.kafkaguard.authorization.v2", "io.kafkaguard.authentication.v1",
            "io.kafkaguard.management.v1"} <= set(by_type)  # fmt: skip
    assert any(e["subject"] == "TOPIC:audited-topic" for e in by_type["io.kafkaguard.authorization.v2"])
    [granted] = [e for e in by_type["io.kafkaguard.management.v1"] if e["data"]["action"] == "acl.created"]
    assert granted["data"]["acl"]["principal"] == "User:bob" and granted["data"]["acl"]["resource_name"] == "pii-orders"
    assert granted["data"]["actor"]["principal"] == f"User:{ADMIN}"
    assert granted["data"]["actor"]["interface"].startswith("kafka:") and granted["data"]["result"] == "SUCCESS"

    logins = [e for e in by_type["io.kafkaguard.authentication.v1"]]
    [success] = [e for e in logins if e["data"]["result"] == "SUCCESS"]
    assert success["subject"] == f"User:{ADMIN}"
    assert success["data"]["principal"] == f"User:{ADMIN}" and success["data"]["mechanism"] == "SCRAM-SHA-256"
    assert success["data"]["host"] == "127.0.0.1" and success["data"]["listener"].startswith("SASL_PLAINTEXT://")
    failures = {e["subject"]: e for e in logins if e["data"]["result"] == "FAILURE"}
    assert set(failures) == {"User:mallory", "User:eve"}
    assert failures["User:mallory"]["data"]["count"] == 5  # five identical failures, one event
    assert failures["User:mallory"]["data"]["attempted_name"] == "mallory"
    assert failures["User:mallory"]["data"]["last_time"] >= failures["User:mallory"]["time"]
    assert "count" not in failures["User:eve"]["data"]
    text = audited.audit_path.read_text("utf-8")
    assert WRONG_PASSWORD not in text and ADMIN_PASSWORD not in text
    assert "r=" not in text  # no SCRAM message (nonce, proof) in any event


def test_the_trail_counts_reach_the_console_metrics(audited: ServerHandle):
    with Wire(audited.sasl) as wire:
        wire.login(ADMIN, ADMIN_PASSWORD)
    audited.audit_records()
    metrics = ConsoleMetrics(lambda: 0, audit_trail=audited.services.audit_trail).render().decode()
    line = next(line for line in metrics.splitlines() if line.startswith("kafkaguard_audit_records_total{"))
    assert 'sink="file"' in line and 'outcome="sent"' in line and float(line.split()[-1]) >= 1


def test_a_client_retrying_a_wrong_password_writes_one_event_with_a_count(audited: ServerHandle):
    """librdkafka reconnects after a failed login, again and again: one event for the window, not one per try."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": audited.bootstrap(SecurityProtocol.SASL_PLAINTEXT),
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                         "sasl.username": "retrier", "sasl.password": WRONG_PASSWORD,
                         "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200, "log_level": 0,
                         "error_cb": lambda _error: None})  # fmt: skip
    logins = audited.services.logins
    deadline = time.monotonic() + 30
    while logins.total(LoginResult.FAILED, mechanism="SCRAM-SHA-512") < 4 and time.monotonic() < deadline:
        producer.poll(0.1)
    del producer  # closes its connections

    events = [e for e in audited.audit_envelopes(end_windows=True) if e["subject"] == "User:retrier"]
    failed = logins.total(LoginResult.FAILED, mechanism="SCRAM-SHA-512")  # counted and queued in one step
    assert failed >= 4
    assert len(events) == 1
    assert events[0]["data"]["result"] == "FAILURE" and events[0]["data"]["count"] == failed
