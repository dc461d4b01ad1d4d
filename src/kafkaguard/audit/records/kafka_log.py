r"""Parser for Apache Kafka's authorizer log (``kafka-authorizer.log``, logger ``kafka.authorizer.logger``).

Every form Kafka has written, newest first (DENIED at INFO; ALLOWED only at DEBUG)::

    [2025-03-14 09:26:53,104] INFO Principal = User:orders-svc is Denied operation = WRITE from host = 10.20.3.17 \
on resource = Topic:LITERAL:payments for request = Produce with resourceRefCount = 1 based on rule DefaultDeny \
(kafka.authorizer.logger)                                                   # KRaft StandardAuthorizer (3.x, 4.x)
    ... Principal = User:alice is Allowed Operation = Read from host = 10.0.0.1 on resource = Topic:LITERAL:t \
for request = Fetch with resourceRefCount = 1 (kafka.authorizer.logger)    # ZooKeeper AclAuthorizer (2.4 - 3.x)
    ... Principal = User:alice is Allowed Operation = Read from host = 10.0.0.1 on resource = Topic:LITERAL:t \
(kafka.authorizer.logger)                                                   # SimpleAclAuthorizer (2.0 - 2.3)
    ... on resource = Topic:t (kafka.authorizer.logger)                     # before pattern types (< 2.0)

How hostile text is handled (principals and resource names are chosen by clients and certificate issuers):

* the principal is the *shortest* text before `` is Allowed|Denied operation = <word> from host = <host> on
  resource = ``, so principals with commas, spaces and colons (mTLS DNs: ``User:CN=svc,OU=eng, O=Acme``) work;
* the resource name is the *shortest* text after ``Type:PATTERN:`` such that the rest of the line is exactly one
  of the tails above up to the end of the line, so names containing ``:`` or even `` for request = ``
  parse correctly;
* a line that matches none of the forms, or names an unknown operation or resource type, is a ``LineError``
  with a reason; nothing is dropped silently. Blank lines are not records and are skipped.

The regular expression ``KAFKA_LOG_PATTERN`` uses only syntax that Python's ``re`` and Java's
``java.util.regex`` read identically (explicit ASCII classes, ``[^\n]`` instead of ``.``), so the Spark pipeline
parses in the JVM with the very same pattern and group numbers (``GROUP_*``), and normalizes names with
``pascal_to_upper`` in the same way (``kafkaguard.pipeline.readers``).

Kafka's log timestamps carry no zone; they are read as UTC.
"""

from __future__ import annotations

import re

from kafkaguard.audit.records.record import OPERATION_NAMES, RESOURCE_TYPE_NAMES, AuditRecord, LineError, parse_time
from kafkaguard.model import AclOperation, AuthorizationResult, PatternType, ResourceType

KAFKA_LOG_PATTERN = (
    r"^(?:\[?([0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[,.][0-9]{1,9})?)\]?)?"
    r"[^\n]*?Principal = ([^\n]*?) is (Allowed|Denied) [Oo]peration = ([A-Za-z_]+)"
    r" from host = ([^ \n]*) on resource = ([A-Za-z_]+):(?:(LITERAL|PREFIXED):)?([^\n]*?)"
    r"(?: for request = ([A-Za-z0-9_]+) with resourceRefCount = (-?[0-9]+)"
    r"(?: based on rule (SuperUser|DefaultAllow|DefaultDeny|MatchingAcl\([^\n]*?\)))?)?"
    r"(?: \(kafka\.authorizer\.logger\))?[ \t\r]*$"
)
GROUP_TIME = 1
GROUP_PRINCIPAL = 2
GROUP_DECISION = 3
GROUP_OPERATION = 4
GROUP_HOST = 5
GROUP_RESOURCE_TYPE = 6
GROUP_PATTERN_TYPE = 7
GROUP_RESOURCE_NAME = 8
GROUP_API = 9
GROUP_REFERENCE_COUNT = 10
GROUP_RULE = 11

#: Regex and replacement turning ``DescribeConfigs``/``TransactionalId`` into ``DESCRIBE_CONFIGS``/... once
#: upper-cased; names already in upper case are unchanged. Java's replacement syntax is the same (``$1_$2``).
PASCAL_SPLIT = "([a-z])([A-Z])"

_LINE = re.compile(KAFKA_LOG_PATTERN)
_SPLIT = re.compile(PASCAL_SPLIT)
_OPERATIONS = frozenset(OPERATION_NAMES)
_RESOURCE_TYPES = frozenset(RESOURCE_TYPE_NAMES)
_DECISIONS = {"Allowed": AuthorizationResult.ALLOWED, "Denied": AuthorizationResult.DENIED}

# Reasons, shared with the pipeline's JVM parser.
NOT_AN_AUDIT_LINE = "not a Kafka authorizer audit line"
NO_TIMESTAMP = "no timestamp"
UNKNOWN_OPERATION = "unknown operation"
UNKNOWN_RESOURCE_TYPE = "unknown resource type"
NOT_LITERAL = "resource pattern type is not LITERAL"


def pascal_to_upper(name: str) -> str:
    """``DescribeConfigs`` → ``DESCRIBE_CONFIGS``; ``WRITE`` → ``WRITE``."""
    return _SPLIT.sub(r"\1_\2", name).upper()


def parse_kafka_log_line(line: str) -> AuditRecord | LineError | None:
    """One line of ``kafka-authorizer.log`` → a record, a ``LineError`` with the reason, or None for a blank
    line. Never raises."""
    text = line.rstrip("\r\n")
    if not text.strip():
        return None
    found = _LINE.match(text)
    if found is None:
        return LineError(NOT_AN_AUDIT_LINE, text)
    stamp = found.group(GROUP_TIME)
    time = parse_time(stamp.replace(",", ".")) if stamp else None
    if time is None:
        return LineError(NO_TIMESTAMP, text)
    operation = pascal_to_upper(found.group(GROUP_OPERATION))
    if operation not in _OPERATIONS:
        return LineError(UNKNOWN_OPERATION, text)
    resource_type = pascal_to_upper(found.group(GROUP_RESOURCE_TYPE))
    if resource_type not in _RESOURCE_TYPES:
        return LineError(UNKNOWN_RESOURCE_TYPE, text)
    pattern = found.group(GROUP_PATTERN_TYPE) or "LITERAL"
    if pattern != "LITERAL":
        return LineError(NOT_LITERAL, text)
    return AuditRecord(
        time=time,
        principal=found.group(GROUP_PRINCIPAL),
        host=found.group(GROUP_HOST),
        api=found.group(GROUP_API),
        operation=AclOperation[operation],
        resource_type=ResourceType[resource_type],
        pattern_type=PatternType.LITERAL,
        resource_name=found.group(GROUP_RESOURCE_NAME),
        decision=_DECISIONS[found.group(GROUP_DECISION)],
        rule=found.group(GROUP_RULE),
    )
