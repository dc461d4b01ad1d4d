"""Management events: one per item a change asked for (an ACL binding, a SCRAM credential, a membership, a quota, a
topic), kept in the store's history and passed to the audit trail (spec: issue 27, section 3).

An event has the columns a history query filters on (time, action, the actor, the principal concerned, the resource
type and name, the result) and ``details``: the action's own fields (``{"acl": {...}}``, ``{"user": ..,
"mechanism": .., "iterations": ..}``, ...). ``data()`` is the envelope's ``data`` object: both together, versioned.
Never a secret in it: a SCRAM event names the mechanism and iterations only, never salt, keys or password.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType

from kafkaguard.model.actor import Actor

#: The version of the management event data shape (``data()["version"]``).
MANAGEMENT_DATA_VERSION = 1
#: The ``result`` of an item that was changed (else Kafka's error name, such as ``INVALID_REQUEST``).
SUCCESS = "SUCCESS"
#: Every action a management event has (``acl.created`` ...); a history filter on a prefix (``acl.``) uses these.
ACTIONS = (
    "acl.created",
    "acl.deleted",
    "scram.upserted",
    "scram.deleted",
    "group.member_added",
    "group.member_removed",
    "quota.altered",
    "topic.created",
    "topic.deleted",
)


def event_time(moment: datetime) -> str:
    """The fixed-width UTC text a history stores and compares (``2025-03-14T09:26:53.104000Z``): lexical order is
    time order, in either database."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def json_number(value: float) -> float | str:
    """A quota value as JSON can hold it: the number, or its ``repr`` (``nan``, ``inf``) where JSON has none."""
    return value if math.isfinite(value) else repr(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class ManagementEvent:
    """One item of one management change (see the module docstring). ``seq`` is the history's number for it, None
    until stored; ``subject`` is the envelope's subject (``TOPIC:LITERAL:pii-orders``, ``User:bob``)."""

    action: str
    actor: Actor
    subject: str
    result: str = SUCCESS
    error_message: str | None = None
    principal: str | None = None
    resource_type: str | None = None
    resource_name: str | None = None
    details: Mapping[str, object] = field(default_factory=dict)
    time: datetime = field(default_factory=lambda: datetime.now(UTC))
    seq: int | None = None

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"unknown management action {self.action!r}: one of {', '.join(ACTIONS)}")
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))

    def __hash__(self) -> int:
        return hash((self.action, self.actor, self.subject, self.result, self.time, self.seq))

    @property
    def succeeded(self) -> bool:
        return self.result == SUCCESS

    def data(self) -> dict[str, object]:
        """The envelope's ``data`` object (spec section 3)."""
        return {
            "version": MANAGEMENT_DATA_VERSION,
            "action": self.action,
            "actor": self.actor.as_dict(),
            "result": self.result,
            "error_message": self.error_message,
            **self.details,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryQuery:
    """A filter on the management history, read newest first. ``principal``: the principal concerned (the ACL's
    principal, the SCRAM user as ``User:<name>``, the member) or the actor's; ``resource_type``/``resource_name``:
    the ACL's or topic's (type by name, ``TOPIC``); ``action``: a prefix (``acl.``, ``acl.created``); ``since``:
    events at or after it; ``limit``: at most that many (the newest)."""

    principal: str | None = None
    resource_type: str | None = None
    resource_name: str | None = None
    action: str | None = None
    since: datetime | None = None
    limit: int = 100

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise ValueError(f"a history limit must be at least 1, got {self.limit}")

    def matches(self, event: ManagementEvent) -> bool:
        """Whether ``event`` passes the filter (the memory store's test; the SQL stores say the same in SQL)."""
        return (
            (self.principal is None or self.principal in (event.principal, event.actor.principal))
            and (self.resource_type is None or event.resource_type == self.resource_type)
            and (self.resource_name is None or event.resource_name == self.resource_name)
            and (self.action is None or event.action.startswith(self.action))
            and (self.since is None or event.time >= self.since)
        )
