"""authorizeByResourceType: may the caller do an operation on at least one resource of a type? (SEMANTICS.md §5)

Kafka's default ``Authorizer.authorizeByResourceType``, which StandardAuthorizer does not override; used by
InitProducerId for idempotent producers (KIP-679). It is deliberately *not* "authorize on any existing
resource":

1. probe ``authorize()`` on the literal resource name ``hardcode`` (with implication, super users, wildcards and
   the allow.everyone default);
2. otherwise scan the type's ACLs for this principal (or ``User:*``, or one of its groups) and host (the same
   address, ``*`` or a CIDR block holding it) whose operation equals the one asked or ALL
   (no implication); a LITERAL ``*`` DENY denies at once;
3. a LITERAL ``*`` ALLOW allows; a literal ALLOW counts unless its name is literally denied or any prefix of it
   (itself included) is prefix-denied; a PREFIXED ALLOW counts unless a prefix of it is prefix-denied (literal
   denies never cancel prefixed allows);
4. otherwise DENY.
"""

from __future__ import annotations

from collections.abc import Callable

from kafkaguard.authorizer.index import AclIndex
from kafkaguard.authorizer.operations import exact_operation_matches
from kafkaguard.model import (
    WILDCARD_RESOURCE,
    AclOperation,
    AclPermissionType,
    AuthorizationResult,
    PatternType,
    RequestContext,
    ResourceType,
    host_matches,
    principal_matches,
)

#: The resource name Kafka probes first.
PROBE_NAME = "hardcode"


def scan_by_resource_type(
    index: AclIndex,
    context: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    probe: Callable[[str], AuthorizationResult],
    member_of: tuple[str, ...] = (),
) -> AuthorizationResult:
    """Steps 1-4 above; ``probe(name)`` is ``authorize()`` of the operation on the literal resource ``name``."""
    if probe(PROBE_NAME) is AuthorizationResult.ALLOWED:
        return AuthorizationResult.ALLOWED

    literal_denied: set[str] = set()
    prefix_denied: set[str] = set()
    literal_allowed: set[str] = set()
    prefix_allowed: set[str] = set()
    wildcard_allowed = False
    for group in index.groups_of_type(resource_type):
        pattern = group.pattern
        for acl in group.acls:
            entry = acl.binding.entry
            if not host_matches(entry.host, context.host):
                continue
            if not principal_matches(entry.principal, context.principal, member_of):
                continue
            if not exact_operation_matches(entry.operation, operation):
                continue
            is_literal = pattern.pattern_type is PatternType.LITERAL
            if entry.permission_type is AclPermissionType.DENY:
                if is_literal and pattern.name == WILDCARD_RESOURCE:
                    return AuthorizationResult.DENIED
                (literal_denied if is_literal else prefix_denied).add(pattern.name)
            elif is_literal and pattern.name == WILDCARD_RESOURCE:
                wildcard_allowed = True
            else:
                (literal_allowed if is_literal else prefix_allowed).add(pattern.name)

    if wildcard_allowed:
        return AuthorizationResult.ALLOWED

    def prefix_denies(name: str) -> bool:
        return any(name[:k] in prefix_denied for k in range(1, len(name) + 1))

    for name in literal_allowed:
        if name not in literal_denied and not prefix_denies(name):
            return AuthorizationResult.ALLOWED
    for name in prefix_allowed:
        if not prefix_denies(name):
            return AuthorizationResult.ALLOWED
    return AuthorizationResult.DENIED
