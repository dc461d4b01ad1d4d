"""ACL bindings (a pattern plus an entry), their filters, identity and the validation of new bindings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, NewType

from kafkaguard.model.entry import AccessControlEntry, AccessControlEntryFilter
from kafkaguard.model.enums import ResourceType
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


def validate_new_binding(binding: AclBinding) -> str | None:
    """Why ``binding`` may not be created, or None when it may (SEMANTICS.md §8.2, §16.2, §16.3).

    Checked in this order: unknown wire codes (named with their code, where Kafka would close the connection),
    Kafka's CLUSTER name and empty-name checks, then the principal format (as Kafka since KAFKA-18051), then a CIDR
    host's block (as Kafka since KIP-1276; ``model.host``).
    """
    pattern, entry = binding.pattern, binding.entry
    for field, value in (
        ("resource type", pattern.resource_type),
        ("pattern type", pattern.pattern_type),
        ("operation", entry.operation),
        ("permission type", entry.permission_type),
    ):
        if value.is_unknown:
            return f"Unknown {field} code {value.code}: this server does not support it"
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not pattern.name:
        return "Invalid empty resource name"
    return principal_error(entry.principal) or (cidr_error(entry.host) if is_cidr(entry.host) else None)
