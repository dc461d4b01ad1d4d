"""The console's audit trail: JSON lines on the ``kafkaguard.audit`` logger.

An authorization decision is written as the server's audit record (``kafkaguard.audit.records.record``, the format the
pipeline reads), with ``api`` naming the Kafka API the REST call corresponds to (``DescribeAcls``...): DENIED at
INFO, ALLOWED at DEBUG. A failed or missing login has no decision to record; it is written at INFO as
``{"version": 1, "time": ..., "event": "AUTHENTICATION_FAILED", "user": ..., "host": ..., "api": ...}``.
The deployment decides where the logger's lines go (the server's own audit file is written by the server).
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from kafkaguard.audit.records.record import SCHEMA_VERSION, format_time, record_from_decision, to_json_line
from kafkaguard.authorizer import Decision

audit_log = logging.getLogger("kafkaguard.audit")


def audit_decision(decision: Decision, api: str) -> None:
    level = logging.DEBUG if decision.allowed else logging.INFO
    if audit_log.isEnabledFor(level):
        audit_log.log(level, "%s", to_json_line(record_from_decision(decision, datetime.now(UTC), api=api)))


def audit_authentication_failure(user: str | None, host: str, api: str) -> None:
    if audit_log.isEnabledFor(logging.INFO):
        line = {
            "version": SCHEMA_VERSION,
            "time": format_time(datetime.now(UTC)),
            "event": "AUTHENTICATION_FAILED",
            "user": user,
            "host": host,
            "api": api,
        }
        audit_log.info("%s", json.dumps(line, ensure_ascii=False, separators=(",", ":")))
