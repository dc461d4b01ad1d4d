"""Who caused an audit event: the principal whose share of the Kafka sink's spool it counts in (``audit.records.spool``:
when the spool is full, the largest shares lose their oldest records first) and whose drops it is counted under.

* authorization and shadow events: the request's principal (``data["principal"]``);
* management events: the actor's (``data["actor"]["principal"]``): who made the change, not whom it concerns;
* authentication events: the subject: the principal a login gave, or ``User:<the name claimed>`` when it failed.

The audit writer asks once per event (``audit.trail.writer``) and hands the answer to the sinks beside the envelope
(``Outgoing.principal``), so no sink parses JSON. A principal name is client input (a claimed name, a certificate's
subject): it is bounded to ``MAX_OWNER_BYTES`` of UTF-8, as the spool's frames hold it. A longer one keeps its first
bytes and ends in ``…`` and 12 hex digits of a BLAKE2b digest of the whole name, so two long names that share a
prefix stay two principals. (A failed login's name is claimed, not proven: a client that claims many names spreads
its events over as many principals of one share each, so the spool's fairness holds between the names, not
between the clients behind them.) For example::

    >>> bounded_principal("User:alice")
    'User:alice'
    >>> name = bounded_principal("User:" + "x" * 1000)
    >>> len(name.encode()), name[-13:-12]
    (255, '…')

Standard library only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from kafkaguard.audit.records.cloudevents import AUTHENTICATION, MANAGEMENT
from kafkaguard.audit.records.spool import MAX_OWNER_BYTES

_DIGEST_HEX = 12
_ELLIPSIS = "…"


def bounded_principal(name: str) -> str:
    """``name`` if it fits in ``MAX_OWNER_BYTES`` of UTF-8, else its head, ``…`` and a digest of it (as long)."""
    data = name.encode("utf-8", "replace")
    if len(data) <= MAX_OWNER_BYTES:
        return name
    digest = hashlib.blake2b(data, digest_size=_DIGEST_HEX // 2).hexdigest()
    room = MAX_OWNER_BYTES - len(_ELLIPSIS.encode()) - _DIGEST_HEX
    head = data[:room].decode("utf-8", "ignore")
    return f"{head}{_ELLIPSIS}{digest}"


def event_principal(category: str, subject: str, data: Mapping[str, object]) -> str:
    """The principal who caused an event of ``category`` (see the module docstring), bounded; "" when it names none."""
    if category == MANAGEMENT:
        actor = data.get("actor")
        found = actor.get("principal") if isinstance(actor, Mapping) else None
    elif category == AUTHENTICATION:
        found = subject
    else:
        found = data.get("principal")
    return bounded_principal(found) if isinstance(found, str) else ""
