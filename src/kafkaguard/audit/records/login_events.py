"""Authentication events: each finished login on a Kafka listener becomes an event of the audit trail.

Data (``audit.records.cloudevents``, category authentication; subject: the principal, or the name the client claimed)::

    {"result": "SUCCESS" | "FAILURE", "mechanism": "SCRAM-SHA-256" | "SCRAM-SHA-512" | "PLAIN" | "OAUTHBEARER" | "SSL",
     "principal": "User:alice" | null, "attempted_name": "alice" | null, "host": "10.0.0.7",
     "listener": "SASL_PLAINTEXT://0.0.0.0:9092", "error": "…" | null}

Never a password, a SCRAM proof or nonce, a token or a key: only the name the client claimed (shortened to
``_NAME_CHARS``: it is client input) and the reason the client was told. A re-authentication (KIP-368) that succeeds
is no new login (as in the counts) and writes nothing; one that fails does. Failures are collapsed per window by the
audit trail (``AuditLog.record_event``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from kafkaguard.audit.records.cloudevents import AUTHENTICATION
from kafkaguard.model.json_value import JsonValue

#: Longest claimed name an event carries (the rest is elided).
_NAME_CHARS = 256


class EventSink(Protocol):
    def record_event(self, category: str, subject: str, data: Mapping[str, JsonValue]) -> None: ...


def _bounded(text: str | None) -> str | None:
    if text is None or len(text) <= _NAME_CHARS:
        return text
    return text[:_NAME_CHARS] + "…"


def record_login_event(
    audit: EventSink | None,
    *,
    succeeded: bool,
    mechanism: str,
    listener: str,
    host: str,
    principal: str | None = None,
    attempted_name: str | None = None,
    error: str | None = None,
) -> None:
    """Queue one authentication event (nothing when the process has no audit trail)."""
    if audit is None:
        return
    attempted_name = _bounded(attempted_name)
    subject = principal or (f"User:{attempted_name}" if attempted_name is not None else "User:ANONYMOUS")
    data = {
        "result": "SUCCESS" if succeeded else "FAILURE",
        "mechanism": mechanism,
        "principal": principal,
        "attempted_name": attempted_name,
        "host": host,
        "listener": listener,
        "error": _bounded(error),
    }
    audit.record_event(AUTHENTICATION, subject, data)
