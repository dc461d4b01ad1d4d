"""Shadow events (issue 27, spec §1, category ``shadow``): a request whose decision a candidate ACL set would flip.

One CloudEvents 1.0 envelope per flipped decision; its ``data`` is the authorization record (as the active ACLs
decided it) plus ``shadow_decision`` and ``shadow_rule``, the candidate set's answer::

    {"specversion": "1.0", "id": "…", "source": "kafkaguard://node-1", "type": "io.kafkaguard.shadow.v1",
     "time": "2025-03-14T09:26:53.104Z", "subject": "TOPIC:payments", "datacontenttype": "application/json",
     "dataschema": "https://kafkaguard.dev/schemas/audit/v2.json",
     "data": {"version": 1, …, "decision": "ALLOWED", "rule": "MatchingAcl(…)",
              "shadow_decision": "DENIED", "shadow_rule": "DefaultDeny"}}

The writer thread makes the data (``shadow_data``) and the audit trail its envelope (``audit.records.cloudevents``).
``shadow_of`` reads one back (a shadow envelope, or a bare data object) and ``summarise`` groups them per principal,
resource and direction, for ``kafkaguard audit shadow-report``. Times are compared as written (ISO 8601 UTC with
``Z``, as ``format_time`` writes them: their text order is their time order).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kafkaguard.audit.records.cloudevents import CATEGORY_TYPES, SHADOW, envelope
from kafkaguard.audit.records.record import AuditRecord, to_dict
from kafkaguard.model.json_value import JsonObject

SHADOW_TYPE = CATEGORY_TYPES[SHADOW]


def shadow_data(record: AuditRecord, shadow_decision: str, shadow_rule: str) -> JsonObject:
    """A flipped decision's event data: ``record`` is the active decision's record, beside the candidate's answer."""
    data = to_dict(record)
    data["shadow_decision"] = shadow_decision
    data["shadow_rule"] = shadow_rule
    return data


def shadow_subject(data: Mapping[str, object]) -> str:
    """``RESOURCE_TYPE:name``, as an authorization event's subject."""
    return f"{data['resource_type']}:{data['resource_name']}"


def shadow_event(record: AuditRecord, shadow_decision: str, shadow_rule: str, *, source: str) -> JsonObject:
    """The envelope of one flipped decision, as the audit trail writes it."""
    data = shadow_data(record, shadow_decision, shadow_rule)
    return envelope(SHADOW, shadow_subject(data), data, source=source, time=record.time)


@dataclass(frozen=True, slots=True)
class ShadowFlip:
    """One shadow event as a report reads it."""

    principal: str
    host: str
    api: str | None
    operation: str
    resource_type: str
    resource_name: str
    decision: str
    shadow_decision: str
    shadow_rule: str | None
    time: str
    count: int = 1
    #: The last of ``count`` requests (record v2's ``last_time``; ``time`` when absent).
    last_time: str = ""

    @property
    def direction(self) -> str:
        """``newly denied`` (the candidate would break it) or ``newly allowed`` (it would open it up)."""
        return "newly denied" if self.shadow_decision == "DENIED" else "newly allowed"


_REQUIRED = ("principal", "host", "operation", "resource_type", "resource_name", "decision", "shadow_decision", "time")


def shadow_of(obj: object) -> ShadowFlip | str | None:
    """A decoded JSON line as a shadow flip; None when it is another kind of record (an authorization record, an
    envelope of another category); a reason (str) when it claims to be a shadow event but is malformed."""
    if not isinstance(obj, Mapping):
        return None
    data: object = obj
    if "specversion" in obj:
        if obj.get("type") != SHADOW_TYPE:
            return None
        data = obj.get("data")
        if not isinstance(data, Mapping):
            return "shadow event without a data object"
    elif "shadow_decision" not in obj:
        return None
    assert isinstance(data, Mapping)  # noqa: S101 - narrowed above, for mypy
    missing = [name for name in _REQUIRED if not isinstance(data.get(name), str)]
    if missing:
        return f"shadow event without {', '.join(missing)}"
    count = data.get("count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        return "shadow event with a count that is not a positive integer"
    api, rule, last = data.get("api"), data.get("shadow_rule"), data.get("last_time")
    return ShadowFlip(
        principal=data["principal"],
        host=data["host"],
        api=api if isinstance(api, str) else None,
        operation=data["operation"],
        resource_type=data["resource_type"],
        resource_name=data["resource_name"],
        decision=data["decision"],
        shadow_decision=data["shadow_decision"],
        shadow_rule=rule if isinstance(rule, str) else None,
        time=data["time"],
        count=count,
        last_time=last if isinstance(last, str) else data["time"],
    )


@dataclass(frozen=True, slots=True)
class FlipSummary:
    """The flips of one principal on one resource in one direction: what ``audit shadow-report`` lists."""

    principal: str
    resource_type: str
    resource_name: str
    direction: str
    operations: tuple[str, ...]
    hosts: tuple[str, ...]
    apis: tuple[str, ...]
    #: Requests (a record with a count stands for that many).
    requests: int
    first_seen: str
    last_seen: str
    #: The candidate set's deciding rules (what to look at in the file).
    shadow_rules: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "principal": self.principal,
            "resource_type": self.resource_type,
            "resource_name": self.resource_name,
            "direction": self.direction,
            "operations": list(self.operations),
            "hosts": list(self.hosts),
            "apis": list(self.apis),
            "requests": self.requests,
            "first_seen": self.first_seen,
            "last_seen": self.last_seen,
            "shadow_rules": list(self.shadow_rules),
        }


def summarise(flips: Iterable[ShadowFlip]) -> list[FlipSummary]:
    """Flips grouped per (principal, resource, direction): newly denied first (what the change would break), then
    by requests, most first."""
    groups: dict[tuple[str, str, str, str], list[ShadowFlip]] = {}
    for flip in flips:
        key = (flip.principal, flip.resource_type, flip.resource_name, flip.direction)
        groups.setdefault(key, []).append(flip)
    summaries = [
        FlipSummary(
            principal=principal,
            resource_type=rtype,
            resource_name=name,
            direction=direction,
            operations=tuple(sorted({f.operation for f in members})),
            hosts=tuple(sorted({f.host for f in members})),
            apis=tuple(sorted({f.api for f in members if f.api is not None})),
            requests=sum(f.count for f in members),
            first_seen=min(f.time for f in members),
            last_seen=max(f.last_time for f in members),
            shadow_rules=tuple(sorted({f.shadow_rule for f in members if f.shadow_rule is not None})),
        )
        for (principal, rtype, name, direction), members in groups.items()
    ]
    summaries.sort(
        key=lambda s: (s.direction != "newly denied", -s.requests, s.principal, s.resource_type, s.resource_name)
    )
    return summaries
