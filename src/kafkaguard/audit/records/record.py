"""The versioned audit record: one authorization decision, as kafkaguard's server writes it and the pipeline reads it.

One JSON object per line (JSON lines)::

    {"version": 1, "time": "2025-03-14T09:26:53.104Z", "principal": "User:orders-svc", "host": "10.20.3.17",
     "api": "Produce", "operation": "WRITE", "resource_type": "TOPIC", "pattern_type": "LITERAL",
     "resource_name": "payments", "decision": "DENIED", "rule": "DefaultDeny"}

* ``time`` is ISO 8601 in UTC; ``api`` is Kafka's request name (``Produce``) or null when unknown;
* enum fields use Kafka's upper-case names; ``pattern_type`` is always LITERAL (Kafka authorizes concrete
  resources only);
* ``rule`` is the deciding rule as Kafka's audit log prints it (``SuperUser``, ``DefaultAllow``, ``DefaultDeny``,
  ``MatchingAcl(acl=…, id=…)``), or null when the source did not say (Kafka's older AclAuthorizer);
* ``login_groups`` (only when there are any): the groups the caller's login brought — an OAUTHBEARER token's groups
  claim — as ``Group:NAME``; a ``Group:`` ACL in ``rule`` that is not among them came from a stored membership.
  Readers that do not know the field ignore it.
* ``enforced`` (only when false): a permissive proxy's would-be denial — decision DENIED, request forwarded anyway
  (issue 27, record version 2's field; absent means true).

Version 2 adds three fields, all optional on read (so version 1 files read unchanged):

* ``count`` (integer >= 1, absent = 1): how many requests the record stands for. A usage-mode proxy
  (``audit_mode: usage``, ``kafkaguard.audit.records.usage``) writes one record per (principal, host, operation,
  resource, deciding rule) and window; ``time`` is then the first of them and ``last_time`` (absent = ``time``) the
  last;
* ``enforced`` (boolean, absent = true): false only on a permissive proxy's would-be denial (DENIED, forwarded).

A line may also be a CloudEvents 1.0 envelope (``specversion`` present): the record is its ``data`` when its type
is ``io.kafkaguard.authorization.v2``; an envelope of another category (management, authentication, shadow: a
shadow event repeats a decision already recorded; broker: the broker's refusal of a decision kafkaguard allowed) is
not a record and not a bad line: ``from_json_line``
returns ``NOT_A_RECORD`` for it, and readers skip it.

Readers accept every version up to ``SCHEMA_VERSION`` and refuse newer ones with a reason. Parsing never raises
on bad input: it returns a ``LineError`` naming what is wrong, so callers can count and report every bad line.
The Spark pipeline validates with the same rules and the same reasons (``validation_reason``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from kafkaguard.audit.records.cloudevents import AUTHORIZATION, CATEGORY_TYPES
from kafkaguard.model import AclOperation, Action, AuthorizationResult, PatternType, RequestContext, ResourceType
from kafkaguard.model.json_value import JsonObject

#: The version this code writes; it reads every version up to it.
SCHEMA_VERSION = 2

#: The record's fields, in the order they are written.
FIELDS = (
    "version",
    "time",
    "principal",
    "host",
    "api",
    "operation",
    "resource_type",
    "pattern_type",
    "resource_name",
    "decision",
    "rule",
    "count",
    "last_time",
    "enforced",
)
#: String fields that must be present and non-null.
REQUIRED_STRINGS = ("principal", "host", "operation", "resource_type", "pattern_type", "resource_name", "decision")

#: Names accepted in ``operation``: every operation authorize() can be asked about.
OPERATION_NAMES = tuple(op.name for op in AclOperation if op not in (AclOperation.ANY, AclOperation.UNKNOWN))
#: Names accepted in ``resource_type``.
RESOURCE_TYPE_NAMES = tuple(t.name for t in ResourceType if t not in (ResourceType.ANY, ResourceType.UNKNOWN))
DECISION_NAMES = ("ALLOWED", "DENIED")

#: The largest ``count`` (the pipeline sums counts as 64-bit integers).
MAX_COUNT = 2**63 - 1
#: The validation reasons of the version 2 fields (the Spark readers use the same texts).
BAD_COUNT = "count is not an integer >= 1"
BAD_LAST_TIME = "last_time is not a valid time at or after time"
BAD_ENFORCED = "enforced is not a boolean"
BAD_ENVELOPE = "envelope without a data object"

#: CloudEvents types whose ``data`` is an authorization record (section 1 of the audit event schema).
#: A shadow event (``io.kafkaguard.shadow.v1``) is not one: it repeats a decision the trail already holds (as a record
#: of its own, or counted in a usage window) with the candidate ACL set's answer beside it, so reading it as a
#: record would count that request twice. ``audit shadow-report`` reads those.
AUTHORIZATION_TYPES = (CATEGORY_TYPES[AUTHORIZATION],)

_MATCHING_ACL_ID = re.compile(r", id=([^,()]*)\)$")


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditRecord:
    time: datetime
    principal: str
    host: str
    api: str | None
    operation: AclOperation
    resource_type: ResourceType
    resource_name: str
    decision: AuthorizationResult
    rule: str | None
    pattern_type: PatternType = PatternType.LITERAL
    version: int = SCHEMA_VERSION
    #: The groups the caller's login brought (a token's), beside the stored memberships.
    login_groups: tuple[str, ...] = ()
    #: How many requests this record stands for (a usage window's, or identical denials collapsed).
    count: int = 1
    #: The last of them (None: ``time``, the only one); ``time`` is the first.
    last_time: datetime | None = None
    #: False only on a permissive proxy's would-be denial (decision DENIED, request forwarded anyway).
    enforced: bool = True

    @property
    def last(self) -> datetime:
        """When the last request this record stands for was made."""
        return self.time if self.last_time is None else self.last_time

    @property
    def acl_id(self) -> str | None:
        """The id of the deciding ACL, when the rule names one."""
        return rule_acl_id(self.rule)


class _NotARecord:
    """The type of ``NOT_A_RECORD``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NOT_A_RECORD"


#: What ``from_json_line`` returns for an envelope of another category: neither a record nor a bad line.
NOT_A_RECORD = _NotARecord()


@dataclass(frozen=True, slots=True)
class LineError:
    """A line that is not a record: why, and the line itself (for the report)."""

    reason: str
    line: str


def rule_acl_id(rule: str | None) -> str | None:
    """``MatchingAcl(acl=…, id=abc)`` → ``abc``; None for other rules and for Kafka's rules (which carry no id)."""
    if rule is None or not rule.startswith("MatchingAcl("):
        return None
    found = _MATCHING_ACL_ID.search(rule)
    return found.group(1) if found else None


class DecisionLike(Protocol):
    """What ``record_from_decision`` reads of ``kafkaguard.Decision`` (audit and authorizer are sibling layers,
    so this module does not import the authorizer)."""

    @property
    def context(self) -> RequestContext: ...
    @property
    def action(self) -> Action: ...
    @property
    def result(self) -> AuthorizationResult: ...
    @property
    def rule(self) -> object: ...


def record_from_decision(decision: DecisionLike, time: datetime, api: str | None = None) -> AuditRecord:
    """The record of one core decision (what the server's audit writer stores)."""
    pattern = decision.action.resource_pattern
    return AuditRecord(
        time=time.astimezone(UTC),
        principal=decision.context.principal,
        host=decision.context.host,
        api=api,
        operation=decision.action.operation,
        resource_type=pattern.resource_type,
        pattern_type=pattern.pattern_type,
        resource_name=pattern.name,
        decision=decision.result,
        rule=str(decision.rule),
        login_groups=decision.context.groups,
    )


def format_time(time: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and ``Z``: ``2025-03-14T09:26:53.104Z``."""
    return time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{time.microsecond // 1000:03d}Z"


def to_dict(record: AuditRecord) -> JsonObject:
    written: JsonObject = {
        "version": record.version,
        "time": format_time(record.time),
        "principal": record.principal,
        "host": record.host,
        "api": record.api,
        "operation": record.operation.name,
        "resource_type": record.resource_type.name,
        "pattern_type": record.pattern_type.name,
        "resource_name": record.resource_name,
        "decision": record.decision.value,
        "rule": record.rule,
    }
    if record.login_groups:
        written["login_groups"] = list(record.login_groups)
    if record.count != 1 or record.last_time is not None or not record.enforced:
        written["version"] = max(record.version, 2)
        written["count"] = record.count
        if record.last_time is not None:
            written["last_time"] = format_time(record.last_time)
        if not record.enforced:
            written["enforced"] = False
    return written


def to_json_line(record: AuditRecord) -> str:
    """One line of JSON, without the newline."""
    return json.dumps(to_dict(record), ensure_ascii=False, separators=(",", ":"))


def parse_time(text: str) -> datetime | None:
    """ISO 8601 (``T`` or space; ``Z``, an offset or none, meaning UTC) → an aware UTC datetime, or None."""
    try:
        parsed = datetime.fromisoformat(text.replace(",", ".", 1))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def validation_reason(fields: dict[str, Any]) -> str | None:
    """Why a decoded object is not a valid record, or None. The pipeline's JVM validation mirrors this order
    and these reasons exactly (``kafkaguard.pipeline.readers``). ``fields`` is ``json.loads``'s object, ``Any``
    to mypy: this function is the check that makes reading its fields safe."""
    version = fields.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        return "missing or non-integer version"
    if version < 1 or version > SCHEMA_VERSION:
        return f"unsupported version (this kafkaguard reads versions 1 to {SCHEMA_VERSION})"
    for name in REQUIRED_STRINGS:
        if not isinstance(fields.get(name), str):
            return f"missing or non-string {name}"
    for name in ("api", "rule", "time"):
        if fields.get(name) is not None and not isinstance(fields[name], str):
            return f"non-string {name}"
    if not isinstance(fields.get("time"), str) or parse_time(fields["time"]) is None:
        return "missing or invalid time"
    if fields["operation"] not in OPERATION_NAMES:
        return "unknown operation"
    if fields["resource_type"] not in RESOURCE_TYPE_NAMES:
        return "unknown resource_type"
    if fields["pattern_type"] != "LITERAL":
        return "pattern_type is not LITERAL"
    if fields["decision"] not in DECISION_NAMES:
        return "unknown decision"
    count = fields.get("count")
    if count is not None and (not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_COUNT):
        return BAD_COUNT
    last_time = fields.get("last_time")
    if last_time is not None:
        last = parse_time(last_time) if isinstance(last_time, str) else None
        first = parse_time(fields["time"])
        if last is None or first is None or last < first:
            return BAD_LAST_TIME
    if fields.get("enforced") is not None and not isinstance(fields["enforced"], bool):
        return BAD_ENFORCED
    return None


def unwrap_envelope(fields: dict[str, Any]) -> dict[str, Any] | _NotARecord | str:
    """The record fields of a decoded line: the line itself (a flat record), an envelope's ``data`` (an
    authorization event), ``NOT_A_RECORD`` (an envelope of another category), or a reason (an envelope
    without data). (``kafkaguard.audit.records.cloudevents`` owns the envelope; this reads only its type and data.)
    ``Any``, as in ``validation_reason``: the fields are ``json.loads``'s, not yet checked."""
    if fields.get("specversion") is None:
        return fields
    if fields.get("type") not in AUTHORIZATION_TYPES:
        return NOT_A_RECORD
    data = fields.get("data")
    if not isinstance(data, dict):
        return BAD_ENVELOPE
    return data


def from_json_line(line: str) -> AuditRecord | LineError | _NotARecord:
    """Parse one JSON line (a record, or an envelope holding one); never raises."""
    text = line.rstrip("\r\n")
    try:
        decoded = json.loads(text)
    except ValueError:
        return LineError("not valid JSON", text)
    if not isinstance(decoded, dict):
        return LineError("not a JSON object", text)
    fields = unwrap_envelope(decoded)
    if isinstance(fields, str):
        return LineError(fields, text)
    if isinstance(fields, _NotARecord):
        return fields
    reason = validation_reason(fields)
    if reason is not None:
        return LineError(reason, text)
    time = parse_time(fields["time"])
    if time is None:  # validation_reason has checked it; keeps the type checker informed
        return LineError("missing or invalid time", text)
    return AuditRecord(
        version=fields["version"],
        time=time,
        principal=fields["principal"],
        host=fields["host"],
        api=fields.get("api"),
        operation=AclOperation[fields["operation"]],
        resource_type=ResourceType[fields["resource_type"]],
        pattern_type=PatternType.LITERAL,
        resource_name=fields["resource_name"],
        decision=AuthorizationResult(fields["decision"]),
        rule=fields.get("rule"),
        count=fields.get("count") or 1,
        last_time=parse_time(fields["last_time"]) if fields.get("last_time") is not None else None,
        enforced=fields.get("enforced") is not False,
    )
