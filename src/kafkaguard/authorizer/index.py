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

Beyond Kafka. CIDR hosts (KIP-1276) are kept per group in one table per (IP version, prefix length): the client's
address, shifted right by the block's host bits, is the key. A decision therefore costs one probe per distinct
prefix length present in a relevant group (a handful in practice), never a scan of the blocks: 10,000 /24 blocks on
one topic cost one probe. Principal groups cost one more probe per group the principal belongs to, in each table
(``member_of``, from the same snapshot as the index).

Changes never mutate an index: the big maps (ids, literal names, prefixes) are ``ShardedMap``s, so
``with_changes`` copies only the shards it touches (about n/64 entries) and rebuilds only the touched groups, then
the authorizer swaps one reference. A change therefore costs O(n/64 + group size), not O(n).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from kafkaguard.authorizer.operations import entry_mask
from kafkaguard.authorizer.sharded import MASK, ShardedMap
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
    is_cidr,
    parse_address,
    parse_cidr,
)

#: Set in a match mask when at least one ACL applies to the resource (for anyone), which decides whether
#: allow.everyone.if.no.acl.found may apply.
RELEVANT_BIT = 1 << 40
#: How many leading characters key the prefix lengths (see the module docstring).
HEAD = 3

_TYPE_SLOTS = max(t.code for t in ResourceType) + 1
_EMPTY: Mapping[str, int] = MappingProxyType({})


#: The CIDR-host entries of a group for one IP version and prefix length: (version, shift, network → principal →
#: mask), where ``network`` is an address shifted right by ``shift`` (see ``model.host.CidrBlock``).
Networks = tuple[int, int, Mapping[int, Mapping[str, int]]]


@dataclass(frozen=True, slots=True)
class AclGroup:
    """Every ACL on one resource pattern, with the precomputed decision masks.

    ``any_host[principal]`` is the OR of the masks of the principal's entries with host ``*``;
    ``by_host[host][principal]`` the same for entries naming one address; ``networks`` the same for entries whose
    host is a CIDR block, one table per (IP version, prefix length) found in the group, so a client's address is
    matched with one shift and one probe per distinct prefix length, never by scanning the blocks (an invalid block
    is in no table: it matches no one). ``by_host`` and ``networks`` are empty in a typical group, which then costs
    two dict probes per decision.
    """

    pattern: ResourcePattern
    acls: tuple[StoredAcl, ...]
    any_host: Mapping[str, int]
    by_host: Mapping[str, Mapping[str, int]]
    networks: tuple[Networks, ...]
    ids: Mapping[AccessControlEntry, AclId]
    #: ``by_host`` or ``networks`` is not empty: the one test a decision makes for the rare host-specific entries.
    host_specific: bool = False

    @classmethod
    def build(cls, pattern: ResourcePattern, acls: tuple[StoredAcl, ...]) -> AclGroup:
        any_host: dict[str, int] = {}
        by_host: dict[str, dict[str, int]] = {}
        by_block: dict[tuple[int, int], dict[int, dict[str, int]]] = {}
        for acl in acls:
            entry = acl.binding.entry
            if entry.host == WILDCARD_HOST:
                masks = any_host
            elif is_cidr(entry.host):
                block = parse_cidr(entry.host)
                if block is None:
                    continue
                masks = by_block.setdefault((block.version, block.shift), {}).setdefault(block.network, {})
            else:
                masks = by_host.setdefault(entry.host, {})
            masks[entry.principal] = masks.get(entry.principal, 0) | entry_mask(entry.operation, entry.permission_type)
        networks = tuple((version, shift, table) for (version, shift), table in sorted(by_block.items()))
        ids = {acl.binding.entry: acl.id for acl in acls}
        return cls(pattern, acls, any_host, by_host, networks, ids, bool(by_host or networks))

    def mask_for(self, principal: str, host: str, member_of: tuple[str, ...] = ()) -> int:
        """The OR of the masks of this group's entries that match the principal (or one of its groups) and host.
        (``AclIndex.match_mask`` computes the same inline; this is the readable form, and the tests' oracle.)"""
        mask = 0
        for table in (self.any_host, self.by_host.get(host, _EMPTY)):
            for name in (principal, WILDCARD_PRINCIPAL, *member_of):
                mask |= table.get(name, 0)
        return mask | (self.network_mask(principal, host, member_of) if self.networks else 0)

    def network_mask(self, principal: str, host: str, member_of: tuple[str, ...]) -> int:
        """The OR of the masks of the CIDR-host entries whose block holds ``host``: one shift and one probe per
        (IP version, prefix length) in the group."""
        address = parse_address(host)
        if address is None:
            return 0
        version, value = address
        mask = 0
        for block_version, shift, networks in self.networks:
            if block_version == version:
                at_network = networks.get(value >> shift)
                if at_network is not None:
                    mask |= at_network.get(principal, 0) | at_network.get(WILDCARD_PRINCIPAL, 0)
                    for member in member_of:
                        mask |= at_network.get(member, 0)
        return mask


def _members_mask(groups: list[AclGroup | None], principal: str, host: str, member_of: tuple[str, ...]) -> int:
    """``AclIndex.members_match_mask``: every table probed for the principal, ``User:*`` and each of its groups."""
    mask = 0
    for group in groups:
        if group is None:
            continue
        any_host = group.any_host
        mask |= RELEVANT_BIT | any_host.get(principal, 0) | any_host.get(WILDCARD_PRINCIPAL, 0)
        for member in member_of:
            mask |= any_host.get(member, 0)
        if group.host_specific:
            at_host = group.by_host.get(host)
            if at_host is not None:
                mask |= at_host.get(principal, 0) | at_host.get(WILDCARD_PRINCIPAL, 0)
                for member in member_of:
                    mask |= at_host.get(member, 0)
            if group.networks:
                mask |= group.network_mask(principal, host, member_of)
    return mask


@dataclass(frozen=True, slots=True)
class _TypeTable:
    """The patterns of one resource type. ``census[head][length]`` counts the stored prefixes per head and length
    (head ``""`` for prefixes shorter than HEAD); ``lengths_by_head`` and ``short_lengths`` are derived from it.
    ``wildcard`` is ``literal["*"]``, kept apart because every decision reads it."""

    literal: ShardedMap[str, AclGroup]
    prefixed: ShardedMap[str, AclGroup]
    census: dict[str, dict[int, int]]
    lengths_by_head: dict[str, tuple[int, ...]]
    short_lengths: tuple[int, ...]
    wildcard: AclGroup | None

    @classmethod
    def empty(cls) -> _TypeTable:
        return cls(ShardedMap(), ShardedMap(), {}, {}, (), None)


def _head(prefix: str) -> str:
    return prefix[:HEAD] if len(prefix) >= HEAD else ""


class AclIndex:
    """An immutable index of stored ACLs; see the module docstring for the layout."""

    __slots__ = ("_by_id", "_tables")

    def __init__(self, tables: tuple[_TypeTable, ...], by_id: ShardedMap[AclId, StoredAcl]) -> None:
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
        literal: list[dict[str, AclGroup]] = [{} for _ in range(_TYPE_SLOTS)]
        prefixed: list[dict[str, AclGroup]] = [{} for _ in range(_TYPE_SLOTS)]
        census: list[dict[str, dict[int, int]]] = [{} for _ in range(_TYPE_SLOTS)]
        for pattern, members in grouped.items():
            group = AclGroup.build(pattern, tuple(members.values()))
            slot = pattern.resource_type.code
            if pattern.pattern_type is PatternType.PREFIXED:
                prefixed[slot][pattern.name] = group
                lengths = census[slot].setdefault(_head(pattern.name), {})
                lengths[len(pattern.name)] = lengths.get(len(pattern.name), 0) + 1
            else:
                literal[slot][pattern.name] = group
        tables = tuple(
            _TypeTable(
                ShardedMap.from_items(literal[slot].items()),
                ShardedMap.from_items(prefixed[slot].items()),
                census[slot],
                {head: tuple(sorted(lengths)) for head, lengths in census[slot].items() if head},
                tuple(sorted(census[slot].get("", {}))),
                literal[slot].get(WILDCARD_RESOURCE),
            )
            for slot in range(_TYPE_SLOTS)
        )
        return cls(tables, ShardedMap.from_items(by_id.items()))

    # ----------------------------------------------------------------------------------------------- reading

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, acl_id: AclId) -> StoredAcl | None:
        return self._by_id.get(acl_id)

    def id_of(self, binding: AclBinding) -> AclId | None:
        group = self._group(binding.pattern)
        return group.ids.get(binding.entry) if group is not None else None

    def __iter__(self) -> Iterator[StoredAcl]:
        return self._by_id.values()

    def match_mask(self, resource_type: ResourceType, name: str, principal: str, host: str) -> int:
        """OR of the masks of every matching entry on every pattern relevant to (type, name), plus RELEVANT_BIT
        when any ACL applies to the resource at all. The hot path: written flat, without helper calls (the
        ShardedMap lookups are inlined as ``shards[hash(key) & MASK].get(key)``), except for CIDR entries
        (``AclGroup.network_mask``). A principal in groups is decided by ``members_match_mask``."""
        table = self._tables[resource_type]
        groups = [table.literal.shards[hash(name) & MASK].get(name)]
        if name != WILDCARD_RESOURCE:
            groups.append(table.wildcard)
        if table.census:
            shards = table.prefixed.shards
            size = len(name)
            for length in table.short_lengths:
                if length <= size:
                    prefix = name[:length]
                    groups.append(shards[hash(prefix) & MASK].get(prefix))
            for length in table.lengths_by_head.get(name[:HEAD], ()):
                if length > size:
                    break
                prefix = name[:length]
                groups.append(shards[hash(prefix) & MASK].get(prefix))
        mask = 0
        for group in groups:
            if group is not None:
                any_host = group.any_host
                mask |= RELEVANT_BIT | any_host.get(principal, 0) | any_host.get(WILDCARD_PRINCIPAL, 0)
                if group.host_specific:
                    at_host = group.by_host.get(host)
                    if at_host is not None:
                        mask |= at_host.get(principal, 0) | at_host.get(WILDCARD_PRINCIPAL, 0)
                    if group.networks:
                        mask |= group.network_mask(principal, host, ())
        return mask

    def members_match_mask(
        self, resource_type: ResourceType, name: str, principal: str, host: str, member_of: tuple[str, ...]
    ) -> int:
        """``match_mask`` for a principal that belongs to groups (``member_of``: ``Group:ops``, …), whose entries
        match as the principal's own: one more probe per group in each table."""
        return _members_mask(self._candidates(resource_type, name), principal, host, member_of)

    def _candidates(self, resource_type: ResourceType, name: str) -> list[AclGroup | None]:
        """The groups ``match_mask`` probes (None where a probe missed), unsorted. ``match_mask`` has the same lines
        inline: a call there is a measurable share of a decision on the hot path (see docs/benchmarks.md, "Figures from
        the code")."""
        table = self._tables[resource_type]
        groups = [table.literal.shards[hash(name) & MASK].get(name)]
        if name != WILDCARD_RESOURCE:
            groups.append(table.wildcard)
        if table.census:
            shards = table.prefixed.shards
            size = len(name)
            for length in table.short_lengths:
                if length <= size:
                    prefix = name[:length]
                    groups.append(shards[hash(prefix) & MASK].get(prefix))
            for length in table.lengths_by_head.get(name[:HEAD], ()):
                if length > size:
                    break
                prefix = name[:length]
                groups.append(shards[hash(prefix) & MASK].get(prefix))
        return groups

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
        if name != WILDCARD_RESOURCE and table.wildcard is not None:
            found.append(table.wildcard)
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
                for groups, kind in ((table.literal, PatternType.LITERAL), (table.prefixed, PatternType.PREFIXED)):
                    if pattern_type in (kind, PatternType.ANY):
                        group = groups.get(name)
                        if group is not None:
                            yield group

    # ----------------------------------------------------------------------------------------------- changing

    def with_changes(self, added: Iterable[StoredAcl] = (), removed: Iterable[AclId] = ()) -> AclIndex:
        """A new index with ``removed`` ids taken out, then ``added`` put in. Ids that are absent are ignored,
        and so is an added ACL whose id or binding is already stored (creation is idempotent, §8.3)."""
        id_changes: dict[AclId, StoredAcl | None] = {}
        # pattern -> the group's ACLs after the change, keyed by entry (one id per distinct binding)
        touched: dict[ResourcePattern, dict[AccessControlEntry, StoredAcl]] = {}

        def stored(acl_id: AclId) -> StoredAcl | None:
            return id_changes[acl_id] if acl_id in id_changes else self._by_id.get(acl_id)

        def members(pattern: ResourcePattern) -> dict[AccessControlEntry, StoredAcl]:
            current = touched.get(pattern)
            if current is None:
                group = self._group(pattern)
                current = {acl.binding.entry: acl for acl in group.acls} if group is not None else {}
                touched[pattern] = current
            return current

        for acl_id in removed:
            gone = stored(acl_id)
            if gone is not None:
                id_changes[acl_id] = None
                del members(gone.binding.pattern)[gone.binding.entry]
        for acl in added:
            group_members = members(acl.binding.pattern)
            if stored(acl.id) is not None or acl.binding.entry in group_members:
                continue
            id_changes[acl.id] = acl
            group_members[acl.binding.entry] = acl
        if not touched:
            return self

        by_slot: dict[int, list[tuple[ResourcePattern, dict[AccessControlEntry, StoredAcl]]]] = {}
        for pattern, group_members in touched.items():
            by_slot.setdefault(pattern.resource_type.code, []).append((pattern, group_members))
        tables = list(self._tables)
        for slot, changes in by_slot.items():
            tables[slot] = self._changed_table(self._tables[slot], changes)
        return AclIndex(tuple(tables), self._by_id.updated(id_changes))

    @staticmethod
    def _changed_table(
        old: _TypeTable, changes: list[tuple[ResourcePattern, dict[AccessControlEntry, StoredAcl]]]
    ) -> _TypeTable:
        literal_changes: dict[str, AclGroup | None] = {}
        prefixed_changes: dict[str, AclGroup | None] = {}
        census = dict(old.census)
        lengths_by_head = dict(old.lengths_by_head)
        touched_heads: set[str] = set()
        for pattern, group_members in changes:
            group = AclGroup.build(pattern, tuple(group_members.values())) if group_members else None
            if pattern.pattern_type is not PatternType.PREFIXED:
                literal_changes[pattern.name] = group
                continue
            prefixed_changes[pattern.name] = group
            existed = pattern.name in old.prefixed
            if existed == (group is not None):
                continue  # the prefix stays (or stays absent): the census does not change
            head, size = _head(pattern.name), len(pattern.name)
            lengths = census[head] = dict(census.get(head, {}))
            lengths[size] = lengths.get(size, 0) + (1 if group is not None else -1)
            if not lengths[size]:
                del lengths[size]
            if not lengths:
                del census[head]
            touched_heads.add(head)
        for head in touched_heads:
            if head and head in census:
                lengths_by_head[head] = tuple(sorted(census[head]))
            else:
                lengths_by_head.pop(head, None)
        literal = old.literal.updated(literal_changes)
        wildcard = literal_changes.get(WILDCARD_RESOURCE, old.wildcard)
        return _TypeTable(
            literal,
            old.prefixed.updated(prefixed_changes),
            census,
            lengths_by_head,
            tuple(sorted(census.get("", {}))) if "" in touched_heads else old.short_lengths,
            wildcard,
        )

    def _group(self, pattern: ResourcePattern) -> AclGroup | None:
        table = self._tables[pattern.resource_type.code]
        groups = table.prefixed if pattern.pattern_type is PatternType.PREFIXED else table.literal
        return groups.get(pattern.name)
