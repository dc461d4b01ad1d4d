"""ACL bindings (a pattern plus an entry), their filters, identity and the validation of new bindings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, NewType

from kafkaguard.model.entry import AccessControlEntry, AccessControlEntryFilter
from kafkaguard.model.enums import KafkaEnum, ResourceType
from kafkaguard.model.host import cidr_error, is_cidr
from kafkaguard.model.principal import principal_error
from kafkaguard.model.resource import CLUSTER_NAME, ResourcePattern, ResourcePatternFilter

#: A stored ACL's identity. It lives beside the binding, not inside it (Kafka's StandardAclWithId): two
#: bindings are equal by content, and the store keeps each distinct binding once under one id.
AclId = NewType("AclId", str)


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    @property
    def is_unknown(self) -> bool:
        p, e = self.pattern, self.entry
        return (
            p.resource_type.is_unknown
            or p.pattern_type.is_unknown
            or e.operation.is_unknown
            or e.permission_type.is_unknown
        )

    def to_filter(self) -> AclBindingFilter:
        return AclBindingFilter(self.pattern.to_filter(), self.entry.to_filter())

    def __str__(self) -> str:
        return f"(pattern={self.pattern}, entry={self.entry})"


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern_filter: ResourcePatternFilter
    entry_filter: AccessControlEntryFilter

    ANY: ClassVar[AclBindingFilter]

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(binding.entry)

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None

    def find_indefinite_field(self) -> str | None:
        return self.pattern_filter.find_indefinite_field() or self.entry_filter.find_indefinite_field()

    @property
    def is_unknown(self) -> bool:
        return self.pattern_filter.is_unknown or self.entry_filter.is_unknown


AclBindingFilter.ANY = AclBindingFilter(ResourcePatternFilter.ANY, AccessControlEntryFilter.ANY)


@dataclass(frozen=True, slots=True)
class StoredAcl:
    """A binding with the id it is stored under."""

    id: AclId
    binding: AclBinding


def unsupported_code(field: str) -> str:
    """§16.3's refusal of the code 0 (UNKNOWN) in ``field`` ("operation"), of a binding or of a filter alike."""
    return f"Unknown {field} code 0: this server does not support it"


def validate_new_binding(binding: AclBinding) -> str | None:
    """Why ``binding`` may not be created, or None when it may: the one wording of every refusal, for the wire
    (CreateAcls), the console's REST API, the CLI and the ACL files alike (SEMANTICS.md §8.2, §16.2, §16.3).

    Checked in Kafka's order, with Kafka's messages where Kafka has one (measured on Kafka 3.9 by
    tests/kafka/differential):

    1. the code 0 (UNKNOWN) in any field, named with its field and code: Kafka closes the connection at parse time,
       before any check (§16.3, kafkaguard's deliberate difference);
    2. the broker handler's checks: a CLUSTER pattern not named ``kafka-cluster``, then an empty name;
    3. the controller's: the first code it does not recognise (a newer client's), as Kafka words it, "Invalid
       resourceType UNKNOWN" (the code itself is not named: Kafka decodes it to UNKNOWN);
    4. the principal format (§16.2; Kafka's controller since KAFKA-18051, after its code checks);
    5. a CIDR host's block (as Kafka since KIP-1276; ``model.host``).
    """
    pattern, entry = binding.pattern, binding.entry
    # Each code: kafkaguard's name of its field (for the code 0), Kafka's controller's (for an unrecognised code).
    codes: tuple[tuple[str, str, KafkaEnum], ...] = (
        ("resource type", "resourceType", pattern.resource_type),
        ("pattern type", "patternType", pattern.pattern_type),
        ("operation", "operation", entry.operation),
        ("permission type", "permissionType", entry.permission_type),
    )
    for field, _, value in codes:
        if value.is_unknown and value.code == 0:
            return unsupported_code(field)
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not pattern.name:
        return "Invalid empty resource name"
    for _, kafka_field, value in codes:
        if value.is_unknown:
            return f"Invalid {kafka_field} UNKNOWN"
    return principal_error(entry.principal) or (cidr_error(entry.host) if is_cidr(entry.host) else None)
