"""Management events of the services: how each kind of change becomes events (one per item), and where they go.

Every change method of the services takes the ``Actor`` that asked for it and turns its per-item outcome into
``ManagementEvent``s: the successful items are handed to the store *with* the change (``store.ports.History``: one
transaction, so the history says exactly what was done), the refused ones (an invalid binding, an unknown user ...)
are stored afterwards in a small transaction of their own — cheap, and the history then shows refused attempts too
(a failure to store them is logged, never turned into a failure of the request, which has been answered already).
Both are then passed to the process's ``EventRelay`` (``Services.events``), which an audit trail connects to.

Never a secret in an event: a SCRAM event carries the user, mechanism and iteration count only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence

from kafkaguard.model import ManagementEvent
from kafkaguard.store import HistoryStore, StoreError
from kafkaguard.store.events import acl_event, member_event, quota_event, scram_event, topic_event

__all__ = [
    "MANAGEMENT",
    "EventListener",
    "EventRelay",
    "acl_event",
    "describe",
    "member_event",
    "quota_event",
    "scram_event",
    "store_refused",
    "topic_event",
]

log = logging.getLogger(__name__)

#: What an audit trail takes: (category ``"management"``, the event's subject, its data).
EventListener = Callable[[str, str, Mapping[str, object]], None]
MANAGEMENT = "management"


def _ignore(category: str, subject: str, data: Mapping[str, object]) -> None:
    """The listener of a process without an audit trail."""


class EventRelay:
    """The process's management-event listener, as one callable the services share: ``connect`` a real one (the
    audit trail's ``record_event``) at any time. A listener that raises is logged, never raised into the change
    (which is committed by then)."""

    def __init__(self, listener: EventListener = _ignore) -> None:
        self._listener = listener
        self._lock = threading.Lock()

    def connect(self, listener: EventListener) -> None:
        with self._lock:
            self._listener = listener

    def __call__(self, category: str, subject: str, data: Mapping[str, object]) -> None:
        try:
            self._listener(category, subject, data)
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
    acl = event.details.get("acl")
    if isinstance(acl, Mapping):
        what = f"{acl['permission_type']} {acl['principal']} {acl['operation']} from {acl['host']} on {event.subject}"
    elif "iterations" in event.details:
        what = f"{event.subject} {event.details.get('mechanism')} ({event.details['iterations']} iterations)"
    elif "member" in event.details:
        what = f"{event.details['member']} in {event.subject}"
    else:
        what = event.subject
    return f"{event.action} {what}{outcome} by {event.actor.describe()}"


def store_refused(store: HistoryStore, events: Sequence[ManagementEvent]) -> None:
    """Store the events of refused items (see the module docstring); never raises for the store."""
    if not events:
        return
    try:
        store.record_events(events)
    except StoreError as e:
        log.warning("%d refused change(s) not recorded in the management history: %s", len(events), e)
