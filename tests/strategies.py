"""Hypothesis strategies for the ACL model and the authorizer (STYLE.md Part 3 item 14).

The value spaces are deliberately tiny so that things collide: resource names come from a three-letter alphabet
plus ``*`` (so PREFIXED names are often prefixes of each other and of the names asked about, and ``*`` appears both
as the LITERAL wildcard and as an ordinary PREFIXED character), principals include ``User:*``, ``Group:*`` and
principals of other types with the same name and the principal groups some request principals belong to, and
hosts include ``*``, IPv4, two spellings of the IPv6 loopback and CIDR blocks that hold some of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from kafkaguard import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclId,
    AclOperation,
    AclPermissionType,
    PatternType,
    RequestContext,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    StoredAcl,
)

#: Principals an ACL can name. ``User:*`` is the only wildcard; ``Group:*`` is a literal principal.
ACL_PRINCIPALS = (
    "User:alice",
    "User:bob",
    "User:*",
    "Group:*",
    "Group:alice",
    "ServiceAccount:alice",
    "User:alice:ops",
    "Group:ops",
)
#: Principals a request can come from (no ``User:*``: a session principal is a concrete identity).
REQUEST_PRINCIPALS = ("User:alice", "User:bob", "User:carol", "Group:alice", "ServiceAccount:alice", "User:alice:ops")
#: Request hosts: IPv4 and IPv6 in Java's uncompressed form and in compressed form (which is a different string).
REQUEST_HOSTS = ("10.0.0.1", "10.0.0.2", "0:0:0:0:0:0:0:1", "::1")
#: CIDR blocks (KIP-1276) around the request hosts: one holding both IPv4 hosts, one holding one of them (with host
#: bits set), /32 and /128 single addresses, the two /0 families, and a block holding none.
CIDR_HOSTS = ("10.0.0.0/8", "10.0.0.2/31", "10.0.0.1/32", "0.0.0.0/0", "::/0", "::1/128", "192.168.0.0/16")
ACL_HOSTS = ("*", *REQUEST_HOSTS, *CIDR_HOSTS)
#: kafkaguard's principal groups a request principal can belong to (``Group:alice`` is also a literal principal).
GROUPS = ("Group:ops", "Group:alice")

#: Resource types ACLs are stored under in the properties (CLUSTER only admits the name ``kafka-cluster``).
RESOURCE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP)
#: Every operation an ACL or an authorize() call can name.
CONCRETE_OPERATIONS = tuple(op for op in AclOperation if op not in (AclOperation.ANY, AclOperation.UNKNOWN))
PERMISSIONS = (AclPermissionType.ALLOW, AclPermissionType.DENY)

_ALPHABET = "abh*"

principals = st.sampled_from(ACL_PRINCIPALS)
request_principals = st.sampled_from(REQUEST_PRINCIPALS)
hosts = st.sampled_from(ACL_HOSTS)
request_hosts = st.sampled_from(REQUEST_HOSTS)
resource_types = st.sampled_from(RESOURCE_TYPES)
operations = st.sampled_from(CONCRETE_OPERATIONS)
permissions = st.sampled_from(PERMISSIONS)

#: Names stored in ACLs: never empty (creation refuses it); ``*`` alone is the LITERAL wildcard.
acl_names = st.one_of(
    st.text(alphabet=_ALPHABET, min_size=1, max_size=3),
    st.sampled_from(("*", "h", "hard", "hardcode", "hardcoded")),
)
#: Names asked about: may be empty, may be ``*``, may be the by-resource-type probe ``hardcode``.
resource_names = st.one_of(
    st.text(alphabet=_ALPHABET, max_size=4),
    st.sampled_from(("", "*", "hardcode", "hardcoded")),
)

patterns = st.builds(
    ResourcePattern,
    resource_types,
    acl_names,
    st.sampled_from((PatternType.LITERAL, PatternType.PREFIXED)),
)
entries = st.builds(AccessControlEntry, principals, hosts, operations, permissions)
bindings = st.builds(AclBinding, patterns, entries)
binding_lists = st.lists(bindings, max_size=12, unique=True)


def stored(bindings: list[AclBinding], first_id: int = 0) -> list[StoredAcl]:
    """Bindings with deterministic ids ``acl-<n>``."""
    return [StoredAcl(AclId(f"acl-{first_id + n}"), b) for n, b in enumerate(bindings)]


@dataclass(frozen=True, slots=True)
class Query:
    """One authorize() question."""

    context: RequestContext
    operation: AclOperation
    resource_type: ResourceType
    name: str


contexts = st.builds(RequestContext, request_principals, request_hosts)
queries = st.builds(Query, contexts, operations, resource_types, resource_names)
query_lists = st.lists(queries, min_size=1, max_size=8)
#: Principal groups: which request principals belong to which groups.
membership_maps = st.dictionaries(
    st.sampled_from(REQUEST_PRINCIPALS), st.lists(st.sampled_from(GROUPS), min_size=1, max_size=2, unique=True)
)
super_user_sets = st.frozensets(st.sampled_from(("User:alice", "User:carol", "Group:alice", "User:*")), max_size=2)

#: Filters over every field, including the filter-only values and UNKNOWN.
pattern_filters = st.builds(
    ResourcePatternFilter,
    st.sampled_from((ResourceType.ANY, *RESOURCE_TYPES, ResourceType.CLUSTER, ResourceType.UNKNOWN)),
    st.none() | resource_names,
    st.sampled_from(
        (PatternType.ANY, PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED, PatternType.UNKNOWN)
    ),
)
entry_filters = st.builds(
    AccessControlEntryFilter,
    st.none() | principals,
    st.none() | hosts,
    st.sampled_from((AclOperation.ANY, *CONCRETE_OPERATIONS)),
    st.sampled_from((AclPermissionType.ANY, *PERMISSIONS)),
)
binding_filters = st.builds(AclBindingFilter, pattern_filters, entry_filters)


@st.composite
def queries_about(draw: st.DrawFn, acls: list[AclBinding], max_size: int = 8) -> list[Query]:
    """Queries aimed at an ACL set: names, principals, hosts and operations mostly taken from the ACLs (a name
    itself, or extended by a character so that it is a prefix), so that most questions hit relevant ACLs."""
    if not acls:
        return draw(st.lists(queries, min_size=1, max_size=max_size))
    names = sorted({b.pattern.name for b in acls})
    name = st.one_of(
        st.sampled_from(names),
        st.builds(
            lambda n, tail: n + tail, st.sampled_from(names), st.text(alphabet=_ALPHABET, min_size=1, max_size=2)
        ),
        resource_names,
    )
    acl_principals = sorted({b.entry.principal for b in acls if b.entry.principal != "User:*"})
    principal = st.one_of(st.sampled_from(acl_principals), request_principals) if acl_principals else request_principals
    acl_hosts = sorted({b.entry.host for b in acls if b.entry.host != "*"})
    host = st.one_of(st.sampled_from(acl_hosts), request_hosts) if acl_hosts else request_hosts
    operation = st.one_of(st.sampled_from(sorted({b.entry.operation for b in acls})), operations)
    resource_type = st.sampled_from(sorted({b.pattern.resource_type for b in acls}))
    query = st.builds(Query, st.builds(RequestContext, principal, host), operation, resource_type, name)
    return draw(st.lists(query, min_size=1, max_size=max_size))


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[AclBinding], list[Query]]:
    """An ACL set and questions aimed at it."""
    acls = draw(binding_lists)
    return acls, draw(queries_about(acls))


#: A dense ACL space for authorize_by_resource_type: few names, principals and operations, so that literal and
#: prefixed ALLOWs and DENYs of the same names for the same principal meet often.
dense_bindings = st.builds(
    AclBinding,
    st.builds(
        ResourcePattern,
        st.just(ResourceType.TOPIC),
        st.one_of(st.text(alphabet="ab", min_size=1, max_size=2), st.just("*")),
        st.sampled_from((PatternType.LITERAL, PatternType.PREFIXED)),
    ),
    st.builds(
        AccessControlEntry,
        st.sampled_from(("User:alice", "User:*", "User:bob")),
        st.sampled_from(("*", "10.0.0.1", "10.0.0.2")),
        st.sampled_from((AclOperation.READ, AclOperation.ALL, AclOperation.WRITE)),
        permissions,
    ),
)
dense_binding_lists = st.lists(dense_bindings, max_size=10, unique=True)
