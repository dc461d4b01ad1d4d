"""Access control entries (who, from where, what, allow or deny) and their filters (SEMANTICS.md §6.2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kafkaguard.errors import InvalidAclError
from kafkaguard.model.enums import AclOperation, AclPermissionType

#: The only host wildcard.
WILDCARD_HOST = "*"


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """``principal`` is a ``Type:Name`` string, ``host`` an IP address in Java's textual form or ``*``."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __post_init__(self) -> None:
        if not all(isinstance(value, str) for value in (self.principal, self.host)):
            raise InvalidAclError("principal and host must be strings")
        if self.operation is AclOperation.ANY:
            raise InvalidAclError("operation must not be ANY in an entry (ANY is for filters)")
        if self.permission_type is AclPermissionType.ANY:
            raise InvalidAclError("permission_type must not be ANY in an entry (ANY is for filters)")

    def to_filter(self) -> AccessControlEntryFilter:
        return AccessControlEntryFilter(self.principal, self.host, self.operation, self.permission_type)

    def __str__(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, operation={self.operation}, "
            f"permissionType={self.permission_type})"
        )


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """``None`` principal or host means any; ANY operation or permission means any. Otherwise exact equality:
    a filter for ``User:alice`` does not return ``User:*`` entries, ALL matches only ALL (no implication)."""

    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    ANY: ClassVar[AccessControlEntryFilter]

    def matches(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation is not AclOperation.ANY and self.operation is not entry.operation:
            return False
        return self.permission_type is AclPermissionType.ANY or self.permission_type is entry.permission_type

    def find_indefinite_field(self) -> str | None:
        """Kafka's message for the first field that keeps this filter from naming one entry."""
        if self.principal is None:
            return "Principal is NULL"
        if self.host is None:
            return "Host is NULL"
        if self.operation is AclOperation.ANY:
            return "Operation is ANY"
        if self.operation.is_unknown:
            return "Operation is UNKNOWN"
        if self.permission_type is AclPermissionType.ANY:
            return "Permission type is ANY"
        if self.permission_type.is_unknown:
            return "Permission type is UNKNOWN"
        return None

    @property
    def is_unknown(self) -> bool:
        return self.operation.is_unknown or self.permission_type.is_unknown


AccessControlEntryFilter.ANY = AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY)
