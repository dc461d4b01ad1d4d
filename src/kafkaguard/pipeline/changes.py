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
superset: still exact). The JVM finds the candidates (``transforms.may_flip``): each logged name is looked up as a
literal name, as ``*`` and as its prefixes of the lengths Δ's PREFIXED patterns have, in a broadcast table of Δ.
``reach`` asks the same question of the core's own index built from Δ (the tests' oracle: the two must agree).

Worked example: C = {alice READ topic ``orders`` PREFIXED, bob READ ``payments``}, P = C − {bob READ payments}
+ {``User:*`` DESCRIBE ``logs``}; allow.everyone off, same super users. Δ = {bob READ payments, User:* DESCRIBE
logs}. For the logged resources ``orders-eu``, ``payments``, ``logs``: ``reach`` gives (payments, bob, any host)
and (logs, any principal, any host), so the candidates are bob's accesses to payments and everyone's accesses to
logs; alice's reads of orders-eu are not decided.

Cost: in the JVM, per distinct access, 2 + (distinct lengths of Δ's prefixes) hash probes of a broadcast table of
|Δ| rows, within the job that collects the candidates; nothing per logged record.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from kafkaguard.authorizer.index import AclIndex
from kafkaguard.model import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    PatternType,
    ResourceType,
    StoredAcl,
    is_cidr,
    is_group,
)
from kafkaguard.pipeline.acls import AclSet

#: (resource_type, resource_name, principal or None = any, host or None = any): some ACL of Δ covers this
#: resource and names this principal at this host.
Reach = tuple[str, str, str | None, str | None]
#: (resource_type, pattern_type, pattern name, principal or None = any, host or None = any): one ACL of Δ as the
#: JVM's filter matches it (``transforms.may_flip``).
Changed = tuple[str, str, str, str | None, str | None]


@dataclass(frozen=True, slots=True)
class AclChange:
    """What differs between two ACL sets, as far as decisions are concerned."""

    #: the ACLs (one per binding) in exactly one of the two sets
    changed: tuple[StoredAcl, ...]
    #: principals every access of whom may flip: super users in exactly one of the two sets, and principals whose
    #: groups differ between the two sets
    whole_principals: frozenset[str]
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
        regrouped = {
            principal
            for principal in {*current.memberships, *proposed.memberships}
            if current.memberships.get(principal, ()) != proposed.memberships.get(principal, ())
        }
        return cls(
            tuple(changed),
            frozenset(current.super_users ^ proposed.super_users | regrouped),
            current.allow_everyone_if_no_acl_found != proposed.allow_everyone_if_no_acl_found,
            current.allow_everyone_if_no_acl_found or proposed.allow_everyone_if_no_acl_found,
        )

    @property
    def nothing(self) -> bool:
        """No access can flip."""
        return not (self.changed or self.whole_principals or self.everything)

    def patterns(self) -> list[Changed]:
        """The changed ACLs as the JVM's filter reads them (``transforms.may_flip``), deduplicated."""
        rows = {
            (
                acl.binding.pattern.resource_type.name,
                acl.binding.pattern.pattern_type.name,
                acl.binding.pattern.name,
                *self._who(acl),
            )
            for acl in self.changed
        }
        return sorted(rows, key=str)

    def prefix_lengths(self) -> list[int]:
        """The distinct lengths of the changed PREFIXED patterns: the prefixes of a logged name to look up."""
        return sorted(
            {
                len(acl.binding.pattern.name)
                for acl in self.changed
                if acl.binding.pattern.pattern_type.name == "PREFIXED"
            }
        )

    @property
    def wildcard(self) -> bool:
        """Some changed ACL is on the LITERAL ``*`` (every resource of its type)."""
        return any(
            acl.binding.pattern.pattern_type is PatternType.LITERAL and acl.binding.pattern.name == WILDCARD_RESOURCE
            for acl in self.changed
        )

    def _who(self, acl: StoredAcl) -> tuple[str | None, str | None]:
        """The (principal, host) a changed ACL can reach, None for "anyone": a wildcard, a CIDR block (a logged
        address is not compared with it as text) and a group principal (its members are not plain strings to
        compare) reach anyone here, which keeps the accesses kept a superset of those the change can flip."""
        entry = acl.binding.entry
        any_principal = entry.principal == WILDCARD_PRINCIPAL or is_group(entry.principal)
        return (
            None if self.resource_wide or any_principal else entry.principal,
            None if self.resource_wide or entry.host == WILDCARD_HOST or is_cidr(entry.host) else entry.host,
        )

    def reach(self, resources: Iterable[tuple[str, str]]) -> Iterator[Reach]:
        """For each (resource_type, resource_name): who the changed ACLs covering it name (deduplicated), by the
        core's own index — the question ``transforms.may_flip`` answers in the JVM, asked in Python (the tests'
        oracle for it)."""
        if not self.changed:
            return
        index = AclIndex.build(self.changed)
        for resource_type, name in resources:
            seen: set[tuple[str | None, str | None]] = set()
            for group in index.relevant_groups(ResourceType[resource_type], name):
                for acl in group.acls:
                    who = self._who(acl)
                    if who not in seen:
                        seen.add(who)
                        yield resource_type, name, who[0], who[1]


def relevant_to(acl_set: AclSet, resources: Iterable[tuple[str, str]]) -> AclSet:
    """``acl_set`` with only the ACLs whose pattern covers one of ``resources`` (resource_type, name): it decides
    every access to those resources exactly as the whole set does (a decision reads only the ACLs relevant to its
    resource), and a worker builds it in a fraction of the time (see docs/benchmarks.md, "Figures from the code").

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
