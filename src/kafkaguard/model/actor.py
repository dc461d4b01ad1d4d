"""Who made a management change, and through which door: the actor every change method of the services takes.

An ``Actor`` is what an audit trail says about the caller of a change (spec: issue 27, section 3): the principal it
acted as (``User:alice``; a CLI run is ``User:<OS login>``), the address it came from (a Kafka client's address, the
console client's address; ``local`` for a CLI command that writes the store itself, ``users add``, ``groups``,
``store migrate``, which came from no network address — ``cli.actor``; None for kafkaguard's own changes,
``INTERNAL_ACTOR``), the interface (``kafka:<listener>``, ``rest``, ``cli``, ``migrate``, ``internal``) and the
request's id in that interface (``<client id>/<correlation id>`` on the wire, a random id per REST request or CLI
run). The CLI's ``acls`` and ``apply`` go through Kafka: they are actors of the Kafka door.
It is a pure value: the doors build it from what they know, the services copy it into each management event.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The interface of changes kafkaguard makes on its own behalf (the bootstrap admin user of the settings).
INTERNAL_INTERFACE = "internal"


@dataclass(frozen=True, slots=True, kw_only=True)
class Actor:
    """The caller of one management change (see the module docstring)."""

    principal: str
    address: str | None = None
    interface: str
    request_id: str | None = None

    def as_dict(self) -> dict[str, str | None]:
        """The ``actor`` object of a management event's data."""
        return {
            "principal": self.principal,
            "address": self.address,
            "interface": self.interface,
            "request_id": self.request_id,
        }

    def describe(self) -> str:
        """One phrase for a log line: ``User:alice from 10.0.0.7 via kafka:SASL (rdkafka/42)``."""
        where = f" from {self.address}" if self.address else ""
        request = f" ({self.request_id})" if self.request_id else ""
        return f"{self.principal}{where} via {self.interface}{request}"


#: kafkaguard itself (the bootstrap admin user of the settings): never a caller's door, which passes its own.
INTERNAL_ACTOR = Actor(principal="User:kafkaguard", interface=INTERNAL_INTERFACE)
