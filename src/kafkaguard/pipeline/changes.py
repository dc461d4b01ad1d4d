"""Which accesses can change their decision between two ACL sets: ``simulate`` decides only those.

The core decides an access (principal P, host H, operation O, resource R) from the super users, the
allow.everyone setting and the ACLs *relevant* to R (those whose pattern covers R: the literal name, ``*``, and
every prefix of R; ``AclIndex.relevant_groups``). Among those, only ACLs whose principal is P or ``User:*`` and whose
host is H or ``*`` can match; the others matter only through "does any ACL apply to R", which decides between
DENIED and the allow.everyone default (``authorize_in``: ``RELEVANT_BIT``). So, with C and P the two sets and
Δ = bindings(C) △ bindings(P) (ids do not take part in decisions, duplicates neither):

* allow.everyone differs → any access may flip (every access is a candidate);
* P in super users of exactly one set → any access of P may flip;
* otherwise, if allow.everyone is off in both sets, an access may flip only if some ACL of Δ covers R *and* names
  P (or ``User:*``) *and* H (or ``*``): otherwise the ACLs that match it are the same in both sets, and a
  non-matching relevant ACL yields DENIED either way;
* if allow.everyone is on in both, an access may flip if some ACL of Δ covers R (it may change whether any ACL
  applies to R).

Every other access is decided alike under both sets: it is never decided at all. The operation is ignored (a
superset: still exact). ``reach`` answers "which Δ ACLs cover R" with the core's own index built from Δ alone, so
no matching rule is re-implemented here.

Worked example: C = {alice READ topic ``orders`` PREFIXED, bob READ ``payments``}, P = C − {bob READ payments}
+ {``User:*`` DESCRIBE ``logs``}; allow.everyone off, same super users. Δ = {bob READ payments, User:* DESCRIBE
logs}. For the logged resources ``orders-eu``, ``payments``, ``logs``: ``reach`` gives (payments, bob, any host)
and (logs, any principal, any host), so the candidates are bob's accesses to payments and everyone's accesses to
logs; alice's reads of orders-eu are not decided.

Cost: building Δ's index is O(|Δ|); ``reach`` is a few dict probes per distinct logged resource (the index's cost
model), in the driver; filtering the accesses is one broadcast hash join in the JVM (``transforms.may_flip``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from kafkaguard.authorizer.index import AclIndex
from kafkaguard.model import WILDCARD_HOST, WILDCARD_PRINCIPAL, WILDCARD_RESOURCE, PatternType, ResourceType, StoredAcl
from kafkaguard.pipeline.acls import AclSet

#: (resource_type, resource_name, principal or None = any, host or None = any): some ACL of Δ covers this
#: resource and names this principal at this host.
Reach = tuple[str, str, str | None, str | None]


@dataclass(frozen=True, slots=True)
class AclChange:
    """What differs between two ACL sets, as far as decisions are concerned."""

    #: the ACLs (one per binding) in exactly one of the two sets
    changed: tuple[StoredAcl, ...]
    #: principals that are super users in exactly one of the two sets
    super_users: frozenset[str]
    #: allow.everyone.if.no.acl.found differs: every access is a candidate
    everything: bool
    #: allow.everyone is on (in both): a changed ACL affects every principal of the resources it covers
    resource_wide: bool

    @classmethod
    def between(cls, current: AclSet, proposed: AclSet) -> AclChange:
        before = {acl.binding: acl for acl in current.acls}
        after = {acl.binding: acl for acl in proposed.acls}
        changed = [acl for binding, acl in before.items() if binding not in after]
        changed += [acl for binding, acl in after.items() if binding not in before]
        return cls(
            tuple(changed),
            current.super_users ^ proposed.super_users,
            current.allow_everyone_if_no_acl_found != proposed.allow_everyone_if_no_acl_found,
            current.allow_everyone_if_no_acl_found or proposed.allow_everyone_if_no_acl_found,
        )

    @property
    def nothing(self) -> bool:
        """No access can flip."""
        return not (self.changed or self.super_users or self.everything)

    def reach(self, resources: Iterable[tuple[str, str]]) -> Iterator[Reach]:
        """For each logged (resource_type, resource_name): who the changed ACLs covering it name (deduplicated)."""
        if not self.changed:
            return
        index = AclIndex.build(self.changed)
        for resource_type, name in resources:
            seen: set[tuple[str | None, str | None]] = set()
            for group in index.relevant_groups(ResourceType[resource_type], name):
                for acl in group.acls:
                    entry = acl.binding.entry
                    who = (
                        None if self.resource_wide or entry.principal == WILDCARD_PRINCIPAL else entry.principal,
                        None if self.resource_wide or entry.host == WILDCARD_HOST else entry.host,
                    )
                    if who not in seen:
                        seen.add(who)
                        yield resource_type, name, who[0], who[1]


def relevant_to(acl_set: AclSet, resources: Iterable[tuple[str, str]]) -> AclSet:
    """``acl_set`` with only the ACLs whose pattern covers one of ``resources`` (resource_type, name): it decides
    every access to those resources exactly as the whole set does (a decision reads only the ACLs relevant to its
    resource), and a worker builds it in a fraction of the time (10k ACLs: ~0.2 s per set and worker).

    Cost: O(total length of the names) to list their prefixes, then one set probe per ACL."""
    names: dict[ResourceType, set[str]] = {}
    prefixes: dict[ResourceType, set[str]] = {}
    for resource_type, name in resources:
        kind = ResourceType[resource_type]
        names.setdefault(kind, set()).add(name)
        known = prefixes.setdefault(kind, set())
        known.update(name[:k] for k in range(1, len(name) + 1))
    kept = []
    for acl in acl_set.acls:
        pattern = acl.binding.pattern
        if pattern.resource_type not in names:
            continue
        if pattern.pattern_type is PatternType.PREFIXED:
            covers = pattern.name in prefixes[pattern.resource_type]
        else:
            covers = pattern.name == WILDCARD_RESOURCE or pattern.name in names[pattern.resource_type]
        if covers:
            kept.append(acl)
    return replace(acl_set, acls=tuple(kept))
