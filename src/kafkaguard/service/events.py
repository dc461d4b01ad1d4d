"""Management events of the services: how each kind of change becomes events (one per item), and where they go.

Every change method of the services takes the ``Actor`` that asked for it and turns its per-item outcome into
``ManagementEvent``s: the successful items are handed to the store *with* the change (``store.ports.History``: one
transaction, so the history says exactly what was done), the refused ones (an invalid binding, an unknown user ...)
are stored afterwards in a small transaction of their own — cheap, and the history then shows refused attempts too
(a failure to store them is logged, never turned into a failure of the request, which has been answered already).
Both are then passed to the process's ``EventRelay`` (``Services.events``), which an audit trail connects to; what
is published before it connects (the bootstrap admin's creation, made while the services are built) is kept and
handed to it when it does. Changes refused by authorization are recorded by ``service.refused`` (bounded per request
and rate-limited per principal) with the same event builders.

Never a secret in an event: a SCRAM event carries the user, mechanism and iteration count only.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence

from kafkaguard.model import ManagementEvent
from kafkaguard.store import HistoryStore, StoreError
from kafkaguard.store.events import (
    acl_event,
    acl_fields_event,
    acl_filter_event,
    member_event,
    quota_entity_event,
    quota_event,
    scram_event,
    topic_event,
)

__all__ = [
    "MANAGEMENT",
    "EventListener",
    "EventRelay",
    "acl_event",
    "acl_fields_event",
    "acl_filter_event",
    "describe",
    "member_event",
    "quota_entity_event",
    "quota_event",
    "scram_event",
    "store_refused",
    "topic_event",
]

log = logging.getLogger(__name__)

#: What an audit trail takes: (category ``"management"``, the event's subject, its data).
EventListener = Callable[[str, str, Mapping[str, object]], None]
MANAGEMENT = "management"


#: Events kept for a listener that has not connected yet (the bootstrap admin's make two); beyond, the oldest go.
EARLY_EVENTS = 100


class EventRelay:
    """The process's management-event listener, as one callable the services share: ``connect`` a real one (the
    audit trail's ``record_event``) at any time. Until the first ``connect``, events are kept (the last
    ``EARLY_EVENTS``) and handed to that listener when it connects, so a change made while the services are built
    (the bootstrap admin) still reaches the audit trail; a process that never connects one (a CLI command, a server
    without an audit trail) keeps at most that many. A listener that raises is logged, never raised into the change
    (which is committed by then)."""

    def __init__(self, listener: EventListener | None = None) -> None:
        self._listener = listener
        self._early: deque[tuple[str, str, Mapping[str, object]]] | None = (
            deque(maxlen=EARLY_EVENTS) if listener is None else None
        )
        self._early_dropped = 0
        self._lock = threading.Lock()

    def connect(self, listener: EventListener) -> None:
        with self._lock:
            self._listener = listener
            early, self._early = self._early, None
            dropped, self._early_dropped = self._early_dropped, 0
        if dropped:
            log.warning(
                "%d management event(s) made before the audit trail started are not in it (the store's "
                "history has them)",
                dropped,
            )
        for category, subject, data in early or ():
            self._deliver(listener, category, subject, data)

    def __call__(self, category: str, subject: str, data: Mapping[str, object]) -> None:
        with self._lock:
            listener, early = self._listener, self._early
            if listener is None and early is not None:
                if len(early) == early.maxlen:
                    self._early_dropped += 1
                early.append((category, subject, data))
                return
        if listener is not None:
            self._deliver(listener, category, subject, data)

    @staticmethod
    def _deliver(listener: EventListener, category: str, subject: str, data: Mapping[str, object]) -> None:
        try:
            listener(category, subject, data)
        except Exception:
            log.exception("the audit trail refused a %s event about %s", category, subject)

    def publish(self, events: Sequence[ManagementEvent]) -> None:
        for event in events:
            self(MANAGEMENT, event.subject, event.data())
            log.info("%s", describe(event))


def describe(event: ManagementEvent) -> str:
    """One log line: what changed (an ACL as its binding), the result, who and from where, e.g. ``acl.created ALLOW
    User:bob READ from * on TOPIC:LITERAL:pii-orders by User:alice from 10.0.0.7 via kafka:SASL_SSL (adm/12)``."""
    outcome = "" if event.succeeded else f" REFUSED {event.result}: {event.error_message}"
    return f"{event.action} {describe_item(event)}{outcome} by {event.actor.describe()}"


def describe_item(event: ManagementEvent) -> str:
    """The item in a few words, for a log line and the history table: an ACL as Kafka's CLI prints one, a refused
    deletion's filter (``filter ANY User:bob ANY from <any> on TOPIC:MATCH:orders``), a request's summary of the
    refused items not recorded one by one, else the subject and its details."""
    details = event.details
    acl = details.get("acl")
    if isinstance(acl, Mapping):
        return (
            f"{acl.get('permission_type')} {acl.get('principal')} {acl.get('operation')} from {acl.get('host')} "
            f"on {event.subject}"
        )
    acl_filter = details.get("filter")
    if isinstance(acl_filter, Mapping):
        return (
            f"filter {acl_filter.get('permission_type')} {_any(acl_filter.get('principal'))} "
            f"{acl_filter.get('operation')} from {_any(acl_filter.get('host'))} on {event.subject}"
        )
    summary = details.get("summary")
    if isinstance(summary, Mapping):
        return (
            f"{summary.get('not_recorded')} more refused item(s) of this {summary.get('request')} request "
            f"({summary.get('items')} in all), not recorded one by one"
        )
    if "mechanism" in details:
        iterations = f" ({details['iterations']} iterations)" if "iterations" in details else ""
        return f"{event.subject} {details['mechanism']}{iterations}"
    if "member" in details:
        return f"{details['member']} in {event.subject}"
    if "quota" in details:
        return f"{event.subject} {json.dumps(details['quota'])}"
    if "partitions" in details:
        return f"{event.subject} ({details['partitions']} partitions)"
    return event.subject


def _any(value: object) -> str:
    return "<any>" if value is None else str(value)


def store_refused(store: HistoryStore, events: Sequence[ManagementEvent]) -> None:
    """Store the events of refused items (see the module docstring); never raises for the store."""
    if not events:
        return
    try:
        store.record_events(events)
    except StoreError as e:
        log.warning("%d refused change(s) not recorded in the management history: %s", len(events), e)
