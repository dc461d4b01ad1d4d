"""ACLs as table rows (the columns are the same in SQLite and PostgreSQL).

A row is ``(id, resource_type, resource_name, pattern_type, principal, host, operation, permission_type)`` with
each enum as its Kafka wire code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkaguard.model import (
    AccessControlEntry,
    AclBinding,
    AclId,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    StoredAcl,
)

Row = tuple[Any, ...]

_RESOURCE_TYPES = {m.code: m for m in ResourceType}
_PATTERN_TYPES = {m.code: m for m in PatternType}
_OPERATIONS = {m.code: m for m in AclOperation}
_PERMISSIONS = {m.code: m for m in AclPermissionType}


def from_code(table: Mapping[int, Any], cls: Any, code: int) -> Any:
    """The enum member for a stored ``code``: from ``table`` when known, else ``cls.from_code`` (which raises)."""
    member = table.get(code)
    return member if member is not None else cls.from_code(code)


class AclRowReader:
    """Rows → StoredAcl, sharing one ResourcePattern per distinct pattern and one AccessControlEntry per distinct
    entry: many ACLs share them, and a 100k-ACL load then builds (and validates) far fewer objects."""

    def __init__(self) -> None:
        self._patterns: dict[tuple[int, str, int], ResourcePattern] = {}
        self._entries: dict[tuple[str, str, int, int], AccessControlEntry] = {}

    def acl(self, row: Row) -> StoredAcl:
        acl_id, rt, name, pt, principal, host, op, perm = row
        pattern_key = (rt, name, pt)
        pattern = self._patterns.get(pattern_key)
        if pattern is None:
            pattern = self._patterns[pattern_key] = ResourcePattern(
                from_code(_RESOURCE_TYPES, ResourceType, rt), name, from_code(_PATTERN_TYPES, PatternType, pt)
            )
        entry_key = (principal, host, op, perm)
        entry = self._entries.get(entry_key)
        if entry is None:
            entry = self._entries[entry_key] = AccessControlEntry(
                principal,
                host,
                from_code(_OPERATIONS, AclOperation, op),
                from_code(_PERMISSIONS, AclPermissionType, perm),
            )
        return StoredAcl(AclId(acl_id), AclBinding(pattern, entry))


def binding_fields(binding: AclBinding) -> tuple[object, ...]:
    """The binding's columns in the order of the unique index: name first."""
    p, e = binding.pattern, binding.entry
    return (
        p.name,
        p.resource_type.code,
        p.pattern_type.code,
        e.principal,
        e.host,
        e.operation.code,
        e.permission_type.code,
    )


def acl_row(acl: StoredAcl) -> tuple[object, ...]:
    """The ACL as a row (see the module docstring)."""
    p, e = acl.binding.pattern, acl.binding.entry
    return (
        acl.id,
        p.resource_type.code,
        p.name,
        p.pattern_type.code,
        e.principal,
        e.host,
        e.operation.code,
        e.permission_type.code,
    )
