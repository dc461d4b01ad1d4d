"""Least-privilege recommendations: per principal, the smallest ACL set that allows exactly its observed allowed
traffic. Plain Python over the distinct access tuples of one principal (Spark runs it per principal group).

"Exactly" is judged against the log: with the recommended ACLs (and no super users, default deny), every access
tuple of the principal seen in the log is ALLOWED iff it was logged ALLOWED at least once.

Steps, for principal P:

1. A (operation, type, name) allowed from some hosts and denied from others keeps host-specific LITERAL ACLs;
   everything else gets host ``*``.
2. Operations implied by another allowed operation on the same name (READ → DESCRIBE, ALTER_CONFIGS →
   DESCRIBE_CONFIGS, CREATE → AUTO_CREATE …, ``kafkaguard.authorizer.operations``) need no ACL of their own.
3. Names are merged into one PREFIXED ACL where that widens access to no other resource *seen in the log*: a
   prefix q is admissible for (type, operation) iff every logged name of that type starting with q is one P may
   already do the operation on. Each name's shortest admissible prefix groups the names (the groups are disjoint,
   so one ACL per group is the minimum); a group of two or more becomes PREFIXED on its longest common prefix
   (tighter against future names than the shortest admissible prefix), a single name stays LITERAL.
4. Implication can still allow a logged-denied tuple (READ allowed, DESCRIBE logged denied): such tuples get an
   exact host-specific LITERAL DENY, which denies nothing else. The result is verified with the core authorizer.
"""

from __future__ import annotations

import bisect
import os
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kafkaguard.authorizer import StandardAuthorizer
from kafkaguard.authorizer.operations import covered_operations
from kafkaguard.model import (
    WILDCARD_HOST,
    AccessControlEntry,
    AclBinding,
    AclId,
    AclOperation,
    AclPermissionType,
    Action,
    AuthorizationResult,
    PatternType,
    RequestContext,
    ResourcePattern,
    ResourceType,
    StoredAcl,
)

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


@dataclass(frozen=True, slots=True)
class Observed:
    """One distinct access of the principal in the log; ``allowed`` if it was logged ALLOWED at least once."""

    host: str
    operation: AclOperation
    resource_type: ResourceType
    name: str
    allowed: bool


@dataclass(frozen=True, slots=True)
class Recommendation:
    principal: str
    bindings: tuple[AclBinding, ...]
    #: bindings[i] covers merged[i] observed names (1 for a LITERAL or DENY).
    merged: tuple[int, ...]
    exact: bool


class NameUniverse:
    """The resource names seen in the log, per type, sorted for prefix range counts."""

    def __init__(self, names: Mapping[ResourceType, Iterable[str]]) -> None:
        self._sorted = {rtype: sorted(set(values)) for rtype, values in names.items()}

    def names(self, rtype: ResourceType) -> list[str]:
        return self._sorted.get(rtype, [])


def _prefix_count(values: Sequence[str], prefix: str) -> int:
    lo = bisect.bisect_left(values, prefix)
    hi = bisect.bisect_left(values, prefix + "\U0010ffff" * 2, lo)
    # Names continuing with U+10FFFF itself sort after the bound: count them too.
    while hi < len(values) and values[hi].startswith(prefix):
        hi += 1
    return hi - lo


def merge_names(
    names: Iterable[str], may: Iterable[str], universe: Sequence[str]
) -> list[tuple[PatternType, str, int]]:
    """Patterns covering ``names``: (pattern type, name, how many names it covers). ``may`` (⊇ names) are the
    names the principal may do the operation on anyway; ``universe`` (sorted) every name seen in the log."""
    wanted = sorted(set(names))
    allowed = sorted(set(may) | set(wanted))
    groups: dict[str, list[str]] = defaultdict(list)
    literals: list[str] = []
    for name in wanted:
        for length in range(1, len(name) + 1):
            prefix = name[:length]
            if _prefix_count(universe, prefix) <= _prefix_count(allowed, prefix):
                groups[prefix].append(name)
                break
        else:
            literals.append(name)
    out = [(PatternType.LITERAL, name, 1) for name in literals]
    for members in groups.values():
        if len(members) == 1:
            out.append((PatternType.LITERAL, members[0], 1))
        else:
            out.append((PatternType.PREFIXED, os.path.commonprefix(members), len(members)))  # noqa: RUF071
    return sorted(out, key=lambda item: (item[1], item[0]))


def recommend(principal: str, observed: Iterable[Observed], universe: NameUniverse) -> Recommendation:
    seen = list(observed)
    allowed_hosts: dict[tuple[AclOperation, ResourceType, str], set[str]] = defaultdict(set)
    denied_keys: set[tuple[AclOperation, ResourceType, str]] = set()
    for o in seen:
        key = (o.operation, o.resource_type, o.name)
        if o.allowed:
            allowed_hosts[key].add(o.host)
        else:
            denied_keys.add(key)
    out: list[tuple[AclBinding, int]] = []

    def add(
        host: str,
        op: AclOperation,
        rtype: ResourceType,
        ptype: PatternType,
        name: str,
        n: int,
        perm: AclPermissionType = ALLOW,
    ) -> None:
        pattern = ResourcePattern(rtype, name, ptype)
        out.append((AclBinding(pattern, AccessControlEntry(principal, host, op, perm)), n))

    pool: dict[tuple[ResourceType, AclOperation], set[str]] = defaultdict(set)
    for (op, rtype, name), hosts in sorted(allowed_hosts.items(), key=lambda kv: (kv[0][1], kv[0][0], kv[0][2])):
        if (op, rtype, name) in denied_keys:  # allowed from some hosts only
            for host in sorted(hosts):
                add(host, op, rtype, PatternType.LITERAL, name, 1)
        else:
            pool[(rtype, op)].add(name)

    for (rtype, op), names in sorted(pool.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        implied_by = {
            name
            for (other_type, other_op), other_names in pool.items()
            if other_type is rtype and other_op is not op and op in covered_operations(other_op, ALLOW)
            for name in other_names
        }
        needed = names - implied_by
        for ptype, name, n in merge_names(needed, names | implied_by, universe.names(rtype)):
            add(WILDCARD_HOST, op, rtype, ptype, name, n)

    def authorizer() -> StandardAuthorizer:
        return StandardAuthorizer(acls=[StoredAcl(AclId(str(i)), b) for i, (b, _) in enumerate(out)])

    def decide(auth: StandardAuthorizer, o: Observed) -> bool:
        action = Action(o.operation, ResourcePattern(o.resource_type, o.name))
        return auth.authorize_one(RequestContext(principal, o.host), action) is AuthorizationResult.ALLOWED

    check = authorizer()
    for o in seen:
        if not o.allowed and decide(check, o):
            add(o.host, o.operation, o.resource_type, PatternType.LITERAL, o.name, 1, DENY)
    final = authorizer()
    exact = all(decide(final, o) == o.allowed for o in seen)
    return Recommendation(principal, tuple(b for b, _ in out), tuple(n for _, n in out), exact)
