"""Kafka authorizer log lines as each Kafka version writes them (shared by the parser and pipeline tests)."""

from __future__ import annotations

from datetime import datetime

from kafkaguard.audit.records import AuditRecord
from kafkaguard.model import AuthorizationResult


def kafka_time(time: datetime) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S,") + f"{time.microsecond // 1000:03d}"


def kafka_line(record: AuditRecord, form: str = "kraft", request: str = "Produce") -> str:
    """The line Kafka's authorizer of the given generation writes for ``record``.

    ``kraft``: StandardAuthorizer (upper-case operation, rule suffix); ``acl``: AclAuthorizer (PascalCase
    ``Operation``, request, no rule); ``simple``: without request; ``ancient``: resource without pattern type.
    """
    allowed = record.decision is AuthorizationResult.ALLOWED
    level = "DEBUG" if allowed else "INFO"
    verdict = "Allowed" if allowed else "Denied"
    rtype = record.resource_type.pascal_name
    if form == "kraft":
        body = (
            f"Principal = {record.principal} is {verdict} operation = {record.operation.name} "
            f"from host = {record.host} on resource = {rtype}:LITERAL:{record.resource_name} "
            f"for request = {request} with resourceRefCount = 1 based on rule {record.rule or 'DefaultDeny'}"
        )
    else:
        resource = f"{rtype}:{record.resource_name}" if form == "ancient" else f"{rtype}:LITERAL:{record.resource_name}"
        body = (
            f"Principal = {record.principal} is {verdict} Operation = {record.operation.pascal_name} "
            f"from host = {record.host} on resource = {resource}"
        )
        if form == "acl":
            body += f" for request = {request} with resourceRefCount = 3"
    return f"[{kafka_time(record.time)}] {level} {body} (kafka.authorizer.logger)"
