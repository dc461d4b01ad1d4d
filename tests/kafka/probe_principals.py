"""Who each probe topic was asked by, read from a target's log: the differential suites' one way to compare the
principal Kafka derives with kafkaguard's (an authorizer-log line or an audit record per ``probe-…`` topic)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from kafkaguard.audit.records.kafka_log import parse_kafka_log_line
from kafkaguard.audit.records.record import AuditRecord
from tests.serving import ServerHandle


class LogsAuthorizations(Protocol):
    """A Kafka broker of the tests (plain or Kerberos) writing its kafka-authorizer.log."""

    @property
    def authorizer_log(self) -> Path: ...


def kafka_principals(broker: LogsAuthorizations) -> Callable[[], dict[str, str]]:
    """Probe topic → principal, from the broker's authorizer log."""

    def read() -> dict[str, str]:
        seen: dict[str, str] = {}
        if broker.authorizer_log.exists():
            for line in broker.authorizer_log.read_text("utf-8", "replace").splitlines():
                record = parse_kafka_log_line(line)
                if isinstance(record, AuditRecord) and record.resource_name.startswith("probe-"):
                    seen[record.resource_name] = record.principal
        return seen

    return read


def kafkaguard_principals(handle: ServerHandle) -> Callable[[], dict[str, str]]:
    """Probe topic → principal, from a kafkaguard process's audit trail."""

    def read() -> dict[str, str]:
        return {
            r["resource_name"]: r["principal"]
            for r in handle.audit_records()
            if r["resource_name"].startswith("probe-")
        }

    return read
