"""The audit record shared by the server's audit writer and the audit pipeline, and the parser of Apache
Kafka's own authorizer log. Standard library only."""

from __future__ import annotations

from kafkaguard.audit.records.kafka_log import KAFKA_LOG_PATTERN, parse_kafka_log_line, pascal_to_upper
from kafkaguard.audit.records.record import (
    NOT_A_RECORD,
    SCHEMA_VERSION,
    AuditRecord,
    LineError,
    format_time,
    from_json_line,
    parse_time,
    record_from_decision,
    rule_acl_id,
    to_dict,
    to_json_line,
)

__all__ = [
    "KAFKA_LOG_PATTERN",
    "NOT_A_RECORD",
    "SCHEMA_VERSION",
    "AuditRecord",
    "LineError",
    "format_time",
    "from_json_line",
    "parse_kafka_log_line",
    "parse_time",
    "pascal_to_upper",
    "record_from_decision",
    "rule_acl_id",
    "to_dict",
    "to_json_line",
]
