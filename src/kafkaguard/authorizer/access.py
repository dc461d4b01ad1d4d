"""Who can do what: every resource pattern a principal can act on, and every principal that can act on a resource,
with the ACLs behind each answer. Kafka has no such question; kafkaguard answers it from the same snapshot the
decisions read, and every "allowed"/"denied" it prints is a real decision of ``authorize_in``, never a second
implementation of the rules.

Two views:

* ``access_of(snapshot, principal, host)``: the ACLs that reach the principal — its own, ``User:*``'s and its
  groups' — grouped by resource pattern, with the operations they allow and deny (implications included); and,
  for a topic catalog, each concrete topic those patterns reach with the operations decided ALLOWED and DENIED.
* ``who_can(snapshot, resource_type, name)``: for one concrete resource, each (principal, host) some relevant ACL
  names — a group expanded to its members, ``User:*`` kept as "any principal" — with the decided operations.

Hosts. A decision needs a client address. With no host given, decisions are made for an address that no
host-specific ACL names (only ``*`` ACLs apply to it), and the ACLs of every host are still listed. In
``who_can``, each ACL's host is decided as itself: an address as that address, a CIDR block at its first address
(a longer block or an address inside it can still decide otherwise: its own row shows that).

Cost: ``access_of`` scans every ACL once (O(n): tens of milliseconds at 100k ACLs, see docs/benchmarks.md, "Figures from
the code"), because the index is keyed by resource, not by principal; that suits an operator's question, not the request
path. ``who_can`` reads only the groups relevant to the resource, like a decision, plus one decision per operation per
row.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from kafkaguard.authorizer.operations import covered_operations
from kafkaguard.authorizer.standard import AuthorizerSnapshot, authorize_in
from kafkaguard.model import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    AclOperation,
    AclPermissionType,
    Action,
    AuthorizationResult,
    PatternType,
    RequestContext,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    StoredAcl,
    host_matches,
    is_group,
    java_host,
    parse_cidr,
    principal_matches,
)
from kafkaguard.model.group import members_by_group

_O = AclOperation
#: The operations Kafka supports per resource type (``AclEntry.supportedOperations``, with KIP-755's AUTO_CREATE):
#: an ACL for ALL is reported as these, not as every operation there is. A table, one row a resource type, each in
#: Kafka's order (the order it reports them in), kept so by the formatter's skip comment on its last line.
SUPPORTED_OPERATIONS: Mapping[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        _O.READ, _O.WRITE, _O.CREATE, _O.AUTO_CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER, _O.DESCRIBE_CONFIGS,
        _O.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (_O.READ, _O.DESCRIBE, _O.DELETE),
    ResourceType.CLUSTER: (
        _O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE, _O.ALTER,
        _O.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (_O.DESCRIBE, _O.WRITE),
    ResourceType.DELEGATION_TOKEN: (_O.DESCRIBE,),
    ResourceType.USER: (_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS),
}  # fmt: skip

#: The client address decisions are made for when no host is given: it is no address, so only ``*`` ACLs match.
ANY_ADDRESS = WILDCARD_HOST


@dataclass(frozen=True, slots=True)
class PatternAccess:
    """What the ACLs reaching one principal say about one resource pattern: the operations some ALLOW grants and
    some DENY denies (implications included, restricted to the type's operations), and those ACLs."""

    pattern: ResourcePattern
    allows: tuple[AclOperation, ...]
    denies: tuple[AclOperation, ...]
    acls: tuple[StoredAcl, ...]


@dataclass(frozen=True, slots=True)
class Decided:
    """The operations decided ALLOWED and DENIED (by ``authorize_in``) for one concrete resource."""

    resource: ResourcePattern
    allowed: tuple[AclOperation, ...]
    denied: tuple[AclOperation, ...]


@dataclass(frozen=True, slots=True)
class PrincipalAccess:
    """``access_of``'s answer. ``groups``: the principal's groups; ``resources``: the concrete topics of the
    catalog the patterns reach, decided (empty without a catalog)."""

    principal: str
    host: str | None
    super_user: bool
    groups: tuple[str, ...]
    patterns: tuple[PatternAccess, ...]
    resources: tuple[Decided, ...]


@dataclass(frozen=True, slots=True)
class Holder:
    """One principal and host that relevant ACLs name for a resource. ``principal`` is a concrete principal,
    ``User:*`` for any principal without ACLs of its own, or a ``Group:`` principal for any login that brings the
    group with it (an OAUTHBEARER token's groups claim; its stored members have rows of their own); ``via`` the ACL
    principals that reach it (itself, ``User:*``, its groups); ``decided`` the decisions at ``host``; ``acls`` the
    ACLs that name it."""

    principal: str
    host: str
    via: tuple[str, ...]
    decided: Decided
    acls: tuple[StoredAcl, ...]


@dataclass(frozen=True, slots=True)
class ResourceHolders:
    """``who_can``'s answer: the super users (allowed everything, before any ACL) and the holders."""

    resource: ResourcePattern
    super_users: tuple[str, ...]
    holders: tuple[Holder, ...]


def access_of(
    snapshot: AuthorizerSnapshot,
    principal: str,
    host: str | None = None,
    topics: Iterable[str] = (),
) -> PrincipalAccess:
    """Every resource pattern ``principal`` (from ``host``, or any host when None) has ACLs on, and each topic of
    ``topics`` those patterns reach, decided (see the module docstring)."""
    groups = snapshot.groups_of(principal)
    by_pattern: dict[ResourcePattern, list[StoredAcl]] = {}
    for acl in snapshot.index:
        entry = acl.binding.entry
        if not principal_matches(entry.principal, principal, groups):
            continue
        if host is not None and not host_matches(entry.host, host):
            continue
        by_pattern.setdefault(acl.binding.pattern, []).append(acl)
    patterns = tuple(
        _pattern_access(pattern, acls) for pattern, acls in sorted(by_pattern.items(), key=lambda kv: _order(kv[0]))
    )
    reached = _reached_topics(patterns, topics)
    context = RequestContext(principal, host if host is not None else ANY_ADDRESS)
    resources = tuple(_decide(snapshot, context, ResourceType.TOPIC, name) for name in reached)
    return PrincipalAccess(principal, host, principal in snapshot.super_users, groups, patterns, resources)


def who_can(snapshot: AuthorizerSnapshot, resource_type: ResourceType, name: str) -> ResourceHolders:
    """Every principal and host the ACLs relevant to the concrete resource name, with the decided operations."""
    resource = ResourcePattern(resource_type, name, PatternType.LITERAL)
    relevant = [acl for group in snapshot.index.relevant_groups(resource_type, name) for acl in group.acls]
    members_of = members_by_group(snapshot.memberships)
    rows: dict[tuple[str, str], list[StoredAcl]] = {}
    for acl in relevant:
        entry = acl.binding.entry
        # a group reaches its stored members, and any login whose token brings it (the group's own row)
        reached = (
            [*members_of.get(entry.principal, []), entry.principal] if is_group(entry.principal) else [entry.principal]
        )
        for principal in reached:
            rows.setdefault((principal, entry.host), []).append(acl)
    holders = []
    for (principal, host), acls in sorted(rows.items()):
        address = _address_of(host)
        # The decision weighs every relevant ACL that reaches this principal at this address (its groups' too),
        # not only the ACLs of this row.
        via = sorted({acl.binding.entry.principal for acl in acls})
        if is_group(principal):  # a login of no ACLs and no stored group of its own, that brings this group
            context = RequestContext(f"User:<a login with {principal}>", address, (principal,))
        else:
            context = RequestContext(principal, address)
        decided = _decide(snapshot, context, resource_type, name, groups_ok=principal != WILDCARD_PRINCIPAL)
        holders.append(Holder(principal, host, tuple(via), decided, tuple(acls)))
    return ResourceHolders(resource, tuple(sorted(snapshot.super_users)), tuple(holders))


# ------------------------------------------------------------------------------------------------ helpers


def _pattern_access(pattern: ResourcePattern, acls: list[StoredAcl]) -> PatternAccess:
    supported = SUPPORTED_OPERATIONS.get(pattern.resource_type, ())
    allows: set[AclOperation] = set()
    denies: set[AclOperation] = set()
    for acl in acls:
        entry = acl.binding.entry
        covered = covered_operations(entry.operation, entry.permission_type)
        (denies if entry.permission_type is AclPermissionType.DENY else allows).update(covered)
    return PatternAccess(
        pattern,
        tuple(op for op in supported if op in allows),
        tuple(op for op in supported if op in denies),
        tuple(acls),
    )


def _reached_topics(patterns: tuple[PatternAccess, ...], topics: Iterable[str]) -> list[str]:
    """The topics of the catalog some TOPIC pattern reaches (the literal name, ``*``, or a prefix)."""
    topic_patterns = [p.pattern for p in patterns if p.pattern.resource_type is ResourceType.TOPIC]
    if not topic_patterns:
        return []
    return sorted(
        name
        for name in set(topics)
        if any(ResourcePatternFilter(ResourceType.TOPIC, name, PatternType.MATCH).matches(p) for p in topic_patterns)
    )


def _decide(
    snapshot: AuthorizerSnapshot,
    context: RequestContext,
    resource_type: ResourceType,
    name: str,
    *,
    groups_ok: bool = True,
) -> Decided:
    """Every supported operation on the resource, decided by ``authorize_in`` on the snapshot. For the
    ``User:*`` row (any principal), the decision is made without memberships: a principal in no group."""
    resource = ResourcePattern(resource_type, name, PatternType.LITERAL)
    operations = SUPPORTED_OPERATIONS.get(resource_type, ())
    snap = snapshot if groups_ok else _without_memberships(snapshot)
    results = authorize_in(snap, context, [Action(op, resource) for op in operations])
    allowed = tuple(op for op, r in zip(operations, results, strict=True) if r is AuthorizationResult.ALLOWED)
    denied = tuple(op for op, r in zip(operations, results, strict=True) if r is AuthorizationResult.DENIED)
    return Decided(resource, allowed, denied)


def _without_memberships(snapshot: AuthorizerSnapshot) -> AuthorizerSnapshot:
    """The snapshot for the ``User:*`` row: any principal is in no group, and no super user."""
    return replace(snapshot, memberships={}, super_users=frozenset())


def _address_of(host: str) -> str:
    """The client address a row's host is decided at: the address itself, a block's first address, or an address
    no host-specific ACL names for ``*``."""
    if host == WILDCARD_HOST:
        return ANY_ADDRESS
    block = parse_cidr(host)
    if block is None:
        return host
    value = block.network << block.shift
    return java_host(str(ipaddress.IPv4Address(value) if block.version == 4 else ipaddress.IPv6Address(value)))


def _order(pattern: ResourcePattern) -> tuple[int, str, int]:
    return (pattern.resource_type.code, pattern.name, pattern.pattern_type.code)
