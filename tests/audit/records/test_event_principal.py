"""Who caused an event, as the audit writer tells the sinks: the request's principal, the actor of a change, the
login's subject; a long (client-chosen) name bounded to what a spool frame holds, two long names kept apart."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from kafkaguard.audit.records.cloudevents import AUTHENTICATION, AUTHORIZATION, MANAGEMENT, SHADOW
from kafkaguard.audit.records.event_principal import bounded_principal, event_principal
from kafkaguard.audit.records.login_events import record_login_event
from kafkaguard.audit.records.record import AuditRecord
from kafkaguard.audit.records.spool import MAX_OWNER_BYTES
from kafkaguard.audit.trail.sinks import Outgoing
from kafkaguard.audit.trail.writer import AuditLog
from kafkaguard.model import AclOperation, AuthorizationResult, ResourceType


def test_each_category_names_who_caused_it():
    assert event_principal(AUTHORIZATION, "TOPIC:t", {"principal": "User:alice"}) == "User:alice"
    assert event_principal(SHADOW, "TOPIC:t", {"principal": "User:bob"}) == "User:bob"
    change = {"action": "acl.created", "actor": {"principal": "User:admin"}, "acl": {"principal": "User:bob"}}
    assert event_principal(MANAGEMENT, "TOPIC:LITERAL:t", change) == "User:admin"  # the actor, not whom it concerns
    assert event_principal(AUTHENTICATION, "User:mallory", {"principal": None}) == "User:mallory"
    assert event_principal(AUTHORIZATION, "TOPIC:t", {}) == ""
    assert event_principal(MANAGEMENT, "x", {"actor": "not a mapping"}) == ""


def test_a_long_name_is_bounded_and_two_long_names_stay_two():
    first = bounded_principal("User:" + "a" * 5000 + "1")
    second = bounded_principal("User:" + "a" * 5000 + "2")
    assert len(first.encode()) <= MAX_OWNER_BYTES and len(second.encode()) <= MAX_OWNER_BYTES
    assert first != second and first.startswith("User:aaa")
    wide = bounded_principal("User:" + "界" * 300)  # multi-byte characters are never cut in half
    assert len(wide.encode()) <= MAX_OWNER_BYTES and "\ufffd" not in wide
    assert bounded_principal("User:alice") == "User:alice"


class Recording:
    name = "recording"

    def __init__(self) -> None:
        self.events: list[Outgoing] = []

    def start(self) -> None:
        pass

    def write(self, events: Sequence[Outgoing]) -> None:
        self.events += events

    def close(self) -> None:
        pass


def test_the_audit_writer_hands_each_event_to_the_sinks_with_its_principal(tmp_path: Path):
    sink = Recording()

    async def scenario() -> None:
        trail = AuditLog(tmp_path / "audit.log", mode="all", flush_interval=10, sinks=[sink],
                         login_failure_window_seconds=0)  # fmt: skip
        trail.start()
        trail.record(AuditRecord(time=datetime.now(UTC), principal="User:alice", host="10.0.0.1", api="Metadata",
                                 operation=AclOperation.DESCRIBE, resource_type=ResourceType.TOPIC, resource_name="t",
                                 decision=AuthorizationResult.DENIED, rule="DefaultDeny"))  # fmt: skip
        trail.record_event(MANAGEMENT, "User:bob", {"action": "scram.upserted", "actor": {"principal": "User:admin"}})
        record_login_event(trail, succeeded=False, mechanism="SCRAM-SHA-256", listener="SASL_PLAINTEXT://x:1",
                           host="10.0.0.9", attempted_name="m" * 2000)  # fmt: skip
        await trail.stop()

    asyncio.run(scenario())
    principals = {event.category: event.principal for event in sink.events}
    assert principals[AUTHORIZATION] == "User:alice"
    assert principals[MANAGEMENT] == "User:admin"
    assert principals[AUTHENTICATION].startswith("User:mmm") and len(principals[AUTHENTICATION].encode()) <= 255
