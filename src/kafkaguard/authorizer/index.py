"""The immutable ACL index behind every decision.

Hand-written because it is the hot path: one authorize() must stay a handful of dict probes at 100k ACLs.

Layout, per resource type:

* ``literal[name]`` — the ACLs on the LITERAL pattern ``name`` (the wildcard is the literal name ``*``);
* ``prefixed[prefix]`` — the ACLs on the PREFIXED pattern ``prefix``;
* ``lengths_by_head[head]`` — for prefixes of at least ``HEAD`` characters, the distinct lengths of the stored
  prefixes that start with ``head`` (their first ``HEAD`` characters), ascending;
* ``short_lengths`` — the distinct lengths of the stored prefixes shorter than ``HEAD``.

The ACLs relevant to a concrete resource name N are therefore ``literal[N]``, ``literal["*"]`` and
``prefixed[N[:k]]`` for each k in ``short_lengths`` and in ``lengths_by_head[N[:HEAD]]`` with k ≤ len(N).
Worked example (HEAD = 3), PREFIXED ACLs ``o``, ``ord``, ``orders-eu`` and ``payments.``: short_lengths = (1,),
lengths_by_head = {"ord": (3, 9), "pay": (9,)}. For N = ``orders``: probe ``o`` (hit), then head ``ord`` gives
lengths 3 (hit) and 9 (> 6, stop). For N = ``users``: probe ``u``, head ``use`` is absent: done.
The cost is a few probes, independent of the number of ACLs and of the prefix lengths used by other name
families; Kafka's reverse-sorted walk is replaced by hashing. (SPARK-NOTES.md measured that plain
"every distinct length" probing grows with the number of distinct lengths; keying them by head removes that.)

Each group precomputes, per principal (and per host for host-specific entries), the OR of
``operations.entry_mask`` over its entries, so a decision is a few dict lookups and bit tests, and the slow
explanation path (``explain``) walks the entries of the same groups.

Changes never mutate an index: ``with_changes`` copies only the dicts it touches (the id map, and per touched
resource type its literal or prefixed table) and rebuilds only the touched groups, then the authorizer swaps one
reference.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from kafkaguard.authorizer.operations import entry_mask
from kafkaguard.model import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclId,
    PatternType,
    ResourcePattern,
    ResourceType,
    StoredAcl,
)

#: Set in a match mask when at least one ACL applies to the resource (for anyone), which decides whether
#: allow.everyone.if.no.acl.found may apply.
RELEVANT_BIT = 1 << 40
#: How many leading characters key the prefix lengths (see the module docstring).
HEAD = 3

_TYPE_SLOTS = max(t.code for t in ResourceType) + 1
_EMPTY: Mapping[str, int] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class AclGroup:
    """Every ACL on one resource pattern, with the precomputed decision masks.

    ``any_host[principal]`` is the OR of the masks of the principal's entries with host ``*``;
    ``by_host[host][principal]`` the same for entries naming one host (empty when the group has none, the common
    case). Splitting them keeps a typical group at two dict probes per decision.
    """

    pattern: ResourcePattern
    acls: tuple[StoredAcl, ...]
    any_host: Mapping[str, int]
    by_host: Mapping[str, Mapping[str, int]]
    ids: Mapping[AccessControlEntry, AclId]

    @classmethod
    def build(cls, pattern: ResourcePattern, acls: tuple[StoredAcl, ...]) -> AclGroup:
        any_host: dict[str, int] = {}
        by_host: dict[str, dict[str, int]] = {}
        for acl in acls:
            entry = acl.binding.entry
            masks = any_host if entry.host == WILDCARD_HOST else by_host.setdefault(entry.host, {})
            masks[entry.principal] = masks.get(entry.principal, 0) | entry_mask(entry.operation, entry.permission_type)
        return cls(pattern, acls, any_host, by_host, {acl.binding.entry: acl.id for acl in acls})

    def mask_for(self, principal: str, host: str) -> int:
        """The OR of the masks of this group's entries that match the principal and host."""
        mask = self.any_host.get(principal, 0) | self.any_host.get(WILDCARD_PRINCIPAL, 0)
        at_host = self.by_host.get(host, _EMPTY)
        return mask | at_host.get(principal, 0) | at_host.get(WILDCARD_PRINCIPAL, 0)


@dataclass(frozen=True, slots=True)
class _TypeTable:
    """The patterns of one resource type. ``census[head][length]`` counts the stored prefixes per head and length
    (head ``""`` for prefixes shorter than HEAD); ``lengths_by_head`` and ``short_lengths`` are derived from it."""

    literal: dict[str, AclGroup]
    prefixed: dict[str, AclGroup]
    census: dict[str, dict[int, int]]
    lengths_by_head: dict[str, tuple[int, ...]]
    short_lengths: tuple[int, ...]

    @classmethod
    def empty(cls) -> _TypeTable:
        return cls({}, {}, {}, {}, ())


def _head(prefix: str) -> str:
    return prefix[:HEAD] if len(prefix) >= HEAD else ""


class AclIndex:
    """An immutable index of stored ACLs; see the module docstring for the layout."""

    __slots__ = ("_by_id", "_tables")

    def __init__(self, tables: tuple[_TypeTable, ...], by_id: dict[AclId, StoredAcl]) -> None:
        self._tables = tables
        self._by_id = by_id

    @classmethod
    def empty(cls) -> AclIndex:
        return cls.build(())

    @classmethod
    def build(cls, acls: Iterable[StoredAcl]) -> AclIndex:
        """Bulk construction, one pass; identical bindings under different ids are kept once (first wins)."""
        by_id: dict[AclId, StoredAcl] = {}
        grouped: dict[ResourcePattern, dict[AccessControlEntry, StoredAcl]] = {}
        for acl in acls:
            members = grouped.setdefault(acl.binding.pattern, {})
            if acl.binding.entry in members or acl.id in by_id:
                continue
            by_id[acl.id] = acl
            members[acl.binding.entry] = acl
        tables = [_TypeTable.empty() for _ in range(_TYPE_SLOTS)]
        for pattern, members in grouped.items():
            group = AclGroup.build(pattern, tuple(members.values()))
            table = tables[pattern.resource_type.code]
            if pattern.pattern_type is PatternType.PREFIXED:
                table.prefixed[pattern.name] = group
                lengths = table.census.setdefault(_head(pattern.name), {})
                lengths[len(pattern.name)] = lengths.get(len(pattern.name), 0) + 1
            else:
                table.literal[pattern.name] = group
        return cls(tuple(_derive_lengths(t) for t in tables), by_id)

    # ----------------------------------------------------------------------------------------------- reading

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, acl_id: AclId) -> StoredAcl | None:
        return self._by_id.get(acl_id)

    def id_of(self, binding: AclBinding) -> AclId | None:
        group = self._group(binding.pattern)
        return group.ids.get(binding.entry) if group is not None else None

    def __iter__(self) -> Iterator[StoredAcl]:
        return iter(self._by_id.values())

    def match_mask(self, resource_type: ResourceType, name: str, principal: str, host: str) -> int:
        """OR of the masks of every matching entry on every pattern relevant to (type, name), plus RELEVANT_BIT
        when any ACL applies to the resource at all. The hot path: written flat, without helper calls."""
        table = self._tables[resource_type]
        literal = table.literal
        groups = [literal.get(name)]
        if name != WILDCARD_RESOURCE:
            groups.append(literal.get(WILDCARD_RESOURCE))
        if table.prefixed:
            prefixed = table.prefixed
            size = len(name)
            for length in table.short_lengths:
                if length <= size:
                    groups.append(prefixed.get(name[:length]))
            for length in table.lengths_by_head.get(name[:HEAD], ()):
                if length > size:
                    break
                groups.append(prefixed.get(name[:length]))
        mask = 0
        for group in groups:
            if group is not None:
                any_host = group.any_host
                mask |= RELEVANT_BIT | any_host.get(principal, 0) | any_host.get(WILDCARD_PRINCIPAL, 0)
                if group.by_host:
                    at_host = group.by_host.get(host)
                    if at_host is not None:
                        mask |= at_host.get(principal, 0) | at_host.get(WILDCARD_PRINCIPAL, 0)
        return mask

    def relevant_groups(self, resource_type: ResourceType, name: str) -> list[AclGroup]:
        """The groups relevant to a concrete resource, most specific first: literal, prefixes longest first,
        then the wildcard."""
        table = self._tables[resource_type.code]
        found: list[AclGroup] = []
        exact = table.literal.get(name)
        if exact is not None:
            found.append(exact)
        lengths = (*table.short_lengths, *table.lengths_by_head.get(name[:HEAD], ()))
        for length in sorted(lengths, reverse=True):
            if length <= len(name):
                group = table.prefixed.get(name[:length])
                if group is not None:
                    found.append(group)
        if name != WILDCARD_RESOURCE:
            wildcard = table.literal.get(WILDCARD_RESOURCE)
            if wildcard is not None:
                found.append(wildcard)
        return found

    def groups_of_type(self, resource_type: ResourceType) -> Iterator[AclGroup]:
        table = self._tables[resource_type.code]
        yield from table.literal.values()
        yield from table.prefixed.values()

    def find(self, acl_filter: AclBindingFilter) -> Iterator[StoredAcl]:
        """Every stored ACL the filter matches (SEMANTICS.md §6), touching only the groups it can match."""
        pattern_filter, entry_filter = acl_filter.pattern_filter, acl_filter.entry_filter
        if acl_filter.is_unknown:
            return
        candidates = self._candidate_groups(
            pattern_filter.resource_type, pattern_filter.name, pattern_filter.pattern_type
        )
        for group in candidates:
            if pattern_filter.matches(group.pattern):
                for acl in group.acls:
                    if entry_filter.matches(acl.binding.entry):
                        yield acl

    def _candidate_groups(
        self, resource_type: ResourceType, name: str | None, pattern_type: PatternType
    ) -> Iterator[AclGroup]:
        if resource_type is ResourceType.ANY:
            types: Iterable[ResourceType] = (t for t in ResourceType if t.code >= 2)
        else:
            types = (resource_type,)
        for rtype in types:
            table = self._tables[rtype.code]
            if name is None:
                if pattern_type is not PatternType.PREFIXED:
                    yield from table.literal.values()
                if pattern_type is not PatternType.LITERAL:
                    yield from table.prefixed.values()
            elif pattern_type is PatternType.MATCH:
                yield from self.relevant_groups(rtype, name)
            else:
                for groups, kind in (
                    (table.literal, PatternType.LITERAL),
                    (table.prefixed, PatternType.PREFIXED),
                ):
                    if pattern_type in (kind, PatternType.ANY):
                        group = groups.get(name)
                        if group is not None:
                            yield group

    # ----------------------------------------------------------------------------------------------- changing

    def with_changes(self, added: Iterable[StoredAcl] = (), removed: Iterable[AclId] = ()) -> AclIndex:
        """A new index with ``removed`` ids taken out, then ``added`` put in. Ids that are absent are ignored,
        and so is an added ACL whose id or binding is already stored (creation is idempotent, §8.3)."""
        by_id = dict(self._by_id)
        # pattern -> the group's ACLs after the change, keyed by entry (one id per distinct binding)
        touched: dict[ResourcePattern, dict[AccessControlEntry, StoredAcl]] = {}

        def members(pattern: ResourcePattern) -> dict[AccessControlEntry, StoredAcl]:
            current = touched.get(pattern)
            if current is None:
                group = self._group(pattern)
                current = {acl.binding.entry: acl for acl in group.acls} if group is not None else {}
                touched[pattern] = current
            return current

        for acl_id in removed:
            gone = by_id.pop(acl_id, None)
            if gone is not None:
                del members(gone.binding.pattern)[gone.binding.entry]
        for acl in added:
            group_members = members(acl.binding.pattern)
            if acl.id in by_id or acl.binding.entry in group_members:
                continue
            by_id[acl.id] = acl
            group_members[acl.binding.entry] = acl

        if not touched:
            return self
        tables = list(self._tables)
        copied: set[int] = set()
        for pattern, group_members in touched.items():
            slot = pattern.resource_type.code
            if slot not in copied:
                copied.add(slot)
                old = tables[slot]
                tables[slot] = _TypeTable(dict(old.literal), dict(old.prefixed), dict(old.census), {}, ())
            table = tables[slot]
            groups = table.prefixed if pattern.pattern_type is PatternType.PREFIXED else table.literal
            existed = pattern.name in groups
            if group_members:
                groups[pattern.name] = AclGroup.build(pattern, tuple(group_members.values()))
            else:
                groups.pop(pattern.name, None)
            if pattern.pattern_type is PatternType.PREFIXED and existed != bool(group_members):
                head, size = _head(pattern.name), len(pattern.name)
                lengths = table.census[head] = dict(table.census.get(head, {}))
                lengths[size] = lengths.get(size, 0) + (1 if group_members else -1)
                if not lengths[size]:
                    del lengths[size]
                if not lengths:
                    del table.census[head]
        for slot in copied:
            tables[slot] = _derive_lengths(tables[slot], previous=self._tables[slot])
        return AclIndex(tuple(tables), by_id)

    def _group(self, pattern: ResourcePattern) -> AclGroup | None:
        table = self._tables[pattern.resource_type.code]
        groups = table.prefixed if pattern.pattern_type is PatternType.PREFIXED else table.literal
        return groups.get(pattern.name)


def _derive_lengths(table: _TypeTable, previous: _TypeTable | None = None) -> _TypeTable:
    """Fill ``lengths_by_head``/``short_lengths`` from the census, reusing the previous tuples of unchanged heads
    so that a change costs O(heads) dict work, not a re-sort of every head."""
    lengths_by_head: dict[str, tuple[int, ...]] = {}
    for head, lengths in table.census.items():
        if not head:
            continue
        reused = previous.lengths_by_head.get(head) if previous is not None else None
        if reused is not None and previous is not None and previous.census.get(head) is lengths:
            lengths_by_head[head] = reused
        else:
            lengths_by_head[head] = tuple(sorted(lengths))
    short = tuple(sorted(table.census.get("", {})))
    return _TypeTable(table.literal, table.prefixed, table.census, lengths_by_head, short)
