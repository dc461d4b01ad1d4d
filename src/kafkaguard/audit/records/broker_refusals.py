"""The broker's own refusals of what kafkaguard allowed (issue 38, ``upstream_authentication: passthrough``).

In passthrough each client's requests go upstream on its own login, so a request must be allowed by kafkaguard's
ACLs and by the broker's. Where the proxy reads a broker's answer (``proxy.broker_refusals``), an item it had allowed
that the broker answered with an authorization error (``AUTHORIZATION_ERRORS``) is recorded here: counted by
(API, error) for ``/metrics`` (``kafkaguard_broker_refusals_total{api,error}``), and admitted to the audit trail
as an event of its own category (``io.kafkaguard.broker.v1``, ``broker_refusal_data``)::

    {"specversion": "1.0", …, "type": "io.kafkaguard.broker.v1", "subject": "TOPIC:payments",
     "data": {"version": 1, "time": "…", "principal": "User:alice", "host": "10.0.0.7", "api": "Metadata",
              "operation": "DESCRIBE", "resource_type": "TOPIC", "pattern_type": "LITERAL",
              "resource_name": "payments", "decision": "ALLOWED", "rule": "MatchingAcl(…)",
              "broker_error": "TOPIC_AUTHORIZATION_FAILED", "broker_error_code": 29, "items": 12}}

``decision`` and ``rule`` are kafkaguard's own (it allowed); ``broker_error`` is the broker's answer; ``items`` how
many of the request's items (partitions, topics) the broker refused on that resource. It is not an authorization
record (its category is another one: readers of records skip it, so the ALLOWED decision is not counted twice).

Bounded like the connection refusals (``audit.records.refusals``): one event per (principal, resource, operation,
error) per ``interval_seconds`` (60 s), at most ``max_events`` per interval in all; the rest are counted only. A
request refused on 10,000 partitions of one topic is one event (``items`` 10000); on 10,000 topics, at most
``max_events``. Labels are the API's name and Kafka's error name: never client input.

Cost model: ``admit`` is O(1) under a lock; memory O(``max_events`` + APIs × errors). Standard library only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kafkaguard.audit.records.cloudevents import BROKER, CATEGORY_TYPES
from kafkaguard.model.json_value import JsonObject

BROKER_TYPE = CATEGORY_TYPES[BROKER]

#: Kafka's authorization errors a broker answers an item with: code → name.
AUTHORIZATION_ERRORS: Mapping[int, str] = {
    29: "TOPIC_AUTHORIZATION_FAILED",
    30: "GROUP_AUTHORIZATION_FAILED",
    31: "CLUSTER_AUTHORIZATION_FAILED",
    53: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    65: "DELEGATION_TOKEN_AUTHORIZATION_FAILED",
}
#: The version of ``broker_refusal_data``'s shape.
DATA_VERSION = 1
DEFAULT_INTERVAL_SECONDS = 60.0
DEFAULT_MAX_EVENTS = 100


@dataclass(frozen=True, slots=True, order=True)
class RefusalKind:
    """What a count is kept for: the API's name (``Metadata``) and the broker's error name."""

    api: str
    error: str


class BrokerRefusals:
    """Counts of the broker's refusals by (API, error), and which of them get an audit event. Thread-safe."""

    __slots__ = ("_admitted", "_clock", "_counts", "_interval", "_lock", "_max_events", "_window_start")

    def __init__(
        self,
        *,
        interval_seconds: float = DEFAULT_INTERVAL_SECONDS,
        max_events: int = DEFAULT_MAX_EVENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._interval = interval_seconds
        self._max_events = max_events
        self._clock = clock
        self._lock = threading.Lock()
        self._counts: dict[RefusalKind, int] = {}
        self._window_start: float | None = None
        #: (principal, resource type, resource name, operation, error) given an event in this interval.
        self._admitted: set[tuple[str, str, str, str, str]] = set()

    def __repr__(self) -> str:
        return f"BrokerRefusals({sum(self.counts().values())})"

    def admit(
        self, api: str, error: str, principal: str, resource_type: str, resource_name: str, operation: str
    ) -> bool:
        """Count one refused resource of one request; True when it gets an audit event (the first of its key in
        this interval, while the interval's events last)."""
        key = (principal, resource_type, resource_name, operation, error)
        kind = RefusalKind(api, error)
        now = self._clock()
        with self._lock:
            self._counts[kind] = self._counts.get(kind, 0) + 1
            if self._window_start is None or now - self._window_start >= self._interval:
                self._window_start = now
                self._admitted.clear()
            if key in self._admitted or len(self._admitted) >= self._max_events:
                return False
            self._admitted.add(key)
            return True

    def counts(self) -> dict[RefusalKind, int]:
        """A copy of every count so far, sorted."""
        with self._lock:
            return dict(sorted(self._counts.items()))


def broker_refusal_data(authorization: JsonObject, *, error_code: int, items: int) -> JsonObject:
    """An event's data: ``authorization`` is kafkaguard's ALLOWED record (``record.to_dict``), beside the broker's
    error and how many items it refused."""
    data = dict(authorization)
    data["version"] = DATA_VERSION
    data["broker_error"] = AUTHORIZATION_ERRORS.get(error_code, str(error_code))
    data["broker_error_code"] = error_code
    data["items"] = items
    return data


@dataclass(frozen=True, slots=True)
class BrokerRefusal:
    """One broker-refusal event as a reader takes it (times as written)."""

    time: str
    principal: str
    host: str
    api: str | None
    operation: str
    resource_type: str
    resource_name: str
    #: kafkaguard's deciding rule (it allowed).
    rule: str | None
    broker_error: str
    items: int


_REQUIRED = ("time", "principal", "host", "operation", "resource_type", "resource_name", "broker_error")


def broker_refusal_of(obj: object) -> BrokerRefusal | None:
    """A decoded JSON line as a broker refusal (its envelope, or a bare data object); None for anything else."""
    if not isinstance(obj, dict):
        return None
    data: object = obj.get("data") if obj.get("type") == BROKER_TYPE else obj if "broker_error" in obj else None
    if not isinstance(data, dict) or any(not isinstance(data.get(name), str) for name in _REQUIRED):
        return None
    api, rule, items = data.get("api"), data.get("rule"), data.get("items")
    return BrokerRefusal(
        time=data["time"],
        principal=data["principal"],
        host=data["host"],
        api=api if isinstance(api, str) else None,
        operation=data["operation"],
        resource_type=data["resource_type"],
        resource_name=data["resource_name"],
        rule=rule if isinstance(rule, str) else None,
        broker_error=data["broker_error"],
        items=items if isinstance(items, int) and not isinstance(items, bool) and items > 0 else 1,
    )


def explained(refusal: BrokerRefusal) -> str:
    """Which side refused, in one sentence (``explain``, the console)."""
    return (
        f"kafkaguard allowed (its ACL: {refusal.rule or 'an unrecorded rule'}); the broker refused with "
        f"{refusal.broker_error} (its own ACLs: in passthrough both must allow)"
    )
