"""Small builders shared by the store and service tests."""

from __future__ import annotations

from kafkaguard import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)


def acl(
    name: str = "orders",
    principal: str = "User:alice",
    operation: AclOperation = AclOperation.READ,
    *,
    resource_type: ResourceType = ResourceType.TOPIC,
    pattern_type: PatternType = PatternType.LITERAL,
    host: str = "*",
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, pattern_type), AccessControlEntry(principal, host, operation, permission)
    )


def acl_filter(
    name: str | None = None,
    pattern_type: PatternType = PatternType.ANY,
    *,
    resource_type: ResourceType = ResourceType.ANY,
    principal: str | None = None,
    host: str | None = None,
    operation: AclOperation = AclOperation.ANY,
    permission: AclPermissionType = AclPermissionType.ANY,
) -> AclBindingFilter:
    return AclBindingFilter(
        ResourcePatternFilter(resource_type, name, pattern_type),
        AccessControlEntryFilter(principal, host, operation, permission),
    )
