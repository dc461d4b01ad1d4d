"""The immutable AclIndex: layout bookkeeping, copy-on-write changes and match masks."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from kafkaguard import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclId,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    StoredAcl,
)
from kafkaguard.authorizer.index import HEAD, RELEVANT_BIT, AclIndex
from kafkaguard.authorizer.operations import allow_bit, deny_bit
from tests.strategies import REQUEST_HOSTS, REQUEST_PRINCIPALS, binding_lists, bindings, resource_names, stored

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
READ, WRITE = AclOperation.READ, AclOperation.WRITE
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def sacl(
    acl_id: str,
    name: str,
    pattern_type: PatternType = PREFIXED,
    principal: str = "User:alice",
    op: AclOperation = READ,
    perm: AclPermissionType = ALLOW,
    host: str = "*",
    resource_type: ResourceType = TOPIC,
) -> StoredAcl:
    return StoredAcl(
        AclId(acl_id),
        AclBinding(ResourcePattern(resource_type, name, pattern_type), AccessControlEntry(principal, host, op, perm)),
    )


def layout(index: AclIndex, resource_type: ResourceType = TOPIC) -> tuple[dict[str, tuple[int, ...]], tuple[int, ...]]:
    table = index._tables[resource_type]
    return dict(table.lengths_by_head), table.short_lengths


def census(index: AclIndex, resource_type: ResourceType = TOPIC) -> dict[str, dict[int, int]]:
    return {head: dict(lengths) for head, lengths in index._tables[resource_type].census.items()}


def mask(index: AclIndex, name: str, principal: str = "User:alice", host: str = "10.0.0.1") -> int:
    return index.match_mask(TOPIC, name, principal, host)


def all_masks(index: AclIndex, names: list[str]) -> list[int]:
    return [
        index.match_mask(rtype, name, principal, host)
        for rtype, name, principal, host in itertools.product((TOPIC, GROUP), names, REQUEST_PRINCIPALS, REQUEST_HOSTS)
    ]


NAMES = ["", "*", "o", "or", "ord", "orde", "orders", "orders-eu", "orders-eu-1", "p", "pay", "payments", "x"]


def test_head_is_three():
    # The worked example of the module docstring assumes HEAD = 3.
    assert HEAD == 3


def test_docstring_worked_example_layout():
    index = AclIndex.build([sacl("1", "o"), sacl("2", "ord"), sacl("3", "orders-eu"), sacl("4", "payments.")])
    assert layout(index) == ({"ord": (3, 9), "pay": (9,)}, (1,))
    assert census(index) == {"": {1: 1}, "ord": {3: 1, 9: 1}, "pay": {9: 1}}


def test_with_changes_keeps_the_prefix_census_and_lengths():
    index = AclIndex.empty()
    index = index.with_changes(added=[sacl("1", "orders")])
    assert layout(index) == ({"ord": (6,)}, ())
    index = index.with_changes(added=[sacl("2", "ord")])
    assert layout(index) == ({"ord": (3, 6)}, ())
    index = index.with_changes(added=[sacl("3", "o"), sacl("4", "ab")])
    assert layout(index) == ({"ord": (3, 6)}, (1, 2))
    # Two prefixes of the same head and length are counted, not just noted.
    index = index.with_changes(added=[sacl("5", "ordXYZ")])
    assert census(index)["ord"] == {3: 1, 6: 2}
    index = index.with_changes(removed=[AclId("1")])
    assert layout(index) == ({"ord": (3, 6)}, (1, 2))
    index = index.with_changes(removed=[AclId("5")])
    assert layout(index) == ({"ord": (3,)}, (1, 2))
    index = index.with_changes(removed=[AclId("2"), AclId("3")])
    assert layout(index) == ({}, (2,))
    index = index.with_changes(removed=[AclId("4")])
    assert layout(index) == ({}, ())
    assert census(index) == {}
    assert len(index) == 0


def test_a_second_entry_on_a_prefix_does_not_count_the_prefix_twice():
    index = AclIndex.build([sacl("1", "orders")])
    index = index.with_changes(added=[sacl("2", "orders", principal="User:bob")])
    assert census(index) == {"ord": {6: 1}}
    index = index.with_changes(removed=[AclId("1")])
    assert census(index) == {"ord": {6: 1}}
    assert mask(index, "orders-1", "User:bob") & allow_bit(READ)
    assert not mask(index, "orders-1", "User:alice") & allow_bit(READ)
    index = index.with_changes(removed=[AclId("2")])
    assert census(index) == {}


def test_literal_acls_do_not_touch_the_prefix_census():
    index = AclIndex.build([sacl("1", "orders", LITERAL), sacl("2", "*", LITERAL)])
    assert census(index) == {}
    assert layout(index) == ({}, ())
    assert index.with_changes(removed=[AclId("1")])._tables[TOPIC].census == {}


def test_changes_never_mutate_the_original_index():
    original = AclIndex.build([sacl("1", "ord"), sacl("2", "orders", LITERAL)])
    before_masks = all_masks(original, NAMES)
    before_census = census(original)
    changed = original.with_changes(
        added=[sacl("3", "orde", perm=DENY), sacl("4", "o", perm=DENY)], removed=[AclId("1"), AclId("2")]
    )
    assert all_masks(original, NAMES) == before_masks
    assert census(original) == before_census
    assert {a.id for a in original} == {"1", "2"}
    assert {a.id for a in changed} == {"3", "4"}
    assert mask(changed, "orders") & deny_bit(READ)
    assert not mask(original, "orders") & deny_bit(READ)


def test_add_then_remove_restores_equal_decisions():
    base = [sacl("1", "ord"), sacl("2", "orders", LITERAL, perm=DENY), sacl("3", "*", LITERAL, principal="User:*")]
    index = AclIndex.build(base)
    before = all_masks(index, NAMES)
    extra = [sacl("10", "o", perm=DENY), sacl("11", "orders-eu", op=WRITE), sacl("12", "x", LITERAL, host="10.0.0.1")]
    grown = index.with_changes(added=extra)
    assert all_masks(grown, NAMES) != before
    restored = grown.with_changes(removed=[AclId("10"), AclId("11"), AclId("12")])
    assert all_masks(restored, NAMES) == before
    assert census(restored) == census(index)
    assert layout(restored) == layout(index)
    assert sorted(a.id for a in restored) == ["1", "2", "3"]


def test_re_adding_is_idempotent():
    index = AclIndex.build([sacl("1", "ord")])
    same_binding_new_id = sacl("2", "ord")
    same_id_new_binding = sacl("1", "other")
    again = index.with_changes(added=[same_binding_new_id, same_id_new_binding, sacl("1", "ord")])
    assert [a.id for a in again] == ["1"]
    assert census(again) == census(index)
    assert again.get(AclId("2")) is None
    assert again.id_of(same_binding_new_id.binding) == "1"


def test_remove_and_re_add_in_one_change():
    index = AclIndex.build([sacl("1", "ord")])
    swapped = index.with_changes(added=[sacl("2", "ord")], removed=[AclId("1")])
    assert [a.id for a in swapped] == ["2"]
    assert census(swapped) == {"ord": {3: 1}}
    assert mask(swapped, "orders") & allow_bit(READ)


def test_unknown_removals_are_ignored():
    index = AclIndex.build([sacl("1", "ord")])
    assert index.with_changes(removed=[AclId("nope")]) is index
    assert index.with_changes() is index


def test_build_deduplicates_bindings_and_ids_first_wins():
    index = AclIndex.build([sacl("1", "ord"), sacl("2", "ord"), sacl("1", "pay")])
    assert [(a.id, a.binding.pattern.name) for a in index] == [("1", "ord")]
    assert len(index) == 1


def test_match_mask_bits():
    index = AclIndex.build(
        [
            sacl("1", "orders", LITERAL, op=READ),
            sacl("2", "ord", PREFIXED, principal="User:*", op=WRITE, perm=DENY),
            sacl("3", "*", LITERAL, principal="User:bob"),
            sacl("4", "orders", LITERAL, host="10.0.0.2", op=AclOperation.DELETE),
        ]
    )
    got = mask(index, "orders")
    assert got & RELEVANT_BIT
    assert got & allow_bit(READ)
    assert got & allow_bit(AclOperation.DESCRIBE)  # READ implies DESCRIBE for ALLOW
    assert got & deny_bit(WRITE)
    assert not got & allow_bit(AclOperation.DELETE)  # other host
    assert mask(index, "orders", host="10.0.0.2") & allow_bit(AclOperation.DELETE)
    # Only the wildcard (for bob) is relevant to "x": relevant, but nothing for alice.
    assert mask(index, "x") == RELEVANT_BIT
    assert index.match_mask(GROUP, "orders", "User:alice", "10.0.0.1") == 0


def test_relevant_groups_most_specific_first():
    index = AclIndex.build(
        [
            sacl("w", "*", LITERAL),
            sacl("1", "o"),
            sacl("2", "orders-eu"),
            sacl("3", "ord"),
            sacl("4", "orders-eu", LITERAL),
            sacl("5", "orders-eu-1"),
            sacl("6", "orders", LITERAL),
        ]
    )
    groups = index.relevant_groups(TOPIC, "orders-eu")
    assert [(g.pattern.pattern_type, g.pattern.name) for g in groups] == [
        (LITERAL, "orders-eu"),
        (PREFIXED, "orders-eu"),
        (PREFIXED, "ord"),
        (PREFIXED, "o"),
        (LITERAL, "*"),
    ]
    assert [g.pattern.name for g in index.relevant_groups(TOPIC, "*")] == ["*"]
    assert [g.pattern.name for g in index.relevant_groups(TOPIC, "")] == ["*"]


def test_reading_accessors():
    acl = sacl("1", "ord")
    index = AclIndex.build([acl])
    assert index.get(AclId("1")) == acl
    assert index.id_of(acl.binding) == "1"
    assert index.id_of(sacl("x", "orde").binding) is None
    assert list(index) == [acl]
    assert [g.pattern for g in index.groups_of_type(TOPIC)] == [acl.binding.pattern]
    assert list(index.groups_of_type(GROUP)) == []
    assert list(index.find(AclBindingFilter.ANY)) == [acl]


def test_group_mask_for_matches_match_mask():
    index = AclIndex.build(
        [sacl("1", "ord", principal="User:*", host="10.0.0.1"), sacl("2", "ord", op=WRITE, perm=DENY)]
    )
    [group] = index.relevant_groups(TOPIC, "orders")
    for principal, host in itertools.product(REQUEST_PRINCIPALS, REQUEST_HOSTS):
        assert group.mask_for(principal, host) | RELEVANT_BIT == index.match_mask(TOPIC, "orders", principal, host)


@given(binding_lists, binding_lists, st.lists(resource_names, min_size=1, max_size=6))
def test_incremental_index_equals_bulk_built_index(first, second, names):
    bulk = AclIndex.build(stored([*first, *second]))
    incremental = AclIndex.empty().with_changes(added=stored(first)).with_changes(added=stored(second, len(first)))
    assert all_masks(incremental, names) == all_masks(bulk, names)
    for rtype in (TOPIC, GROUP):
        assert census(incremental, rtype) == census(bulk, rtype)
        assert layout(incremental, rtype) == layout(bulk, rtype)


@given(binding_lists, st.lists(bindings, max_size=4, unique=True), st.lists(resource_names, min_size=1, max_size=6))
def test_add_then_remove_restores_layout_and_masks(base, extra, names):
    extra = [b for b in extra if b not in base]
    index = AclIndex.build(stored(base))
    added = stored(extra, 1000)
    restored = index.with_changes(added=added).with_changes(removed=[a.id for a in added])
    assert all_masks(restored, names) == all_masks(index, names)
    for rtype in (TOPIC, GROUP):
        assert census(restored, rtype) == census(index, rtype)
        assert layout(restored, rtype) == layout(index, rtype)
    assert sorted(a.id for a in restored) == sorted(a.id for a in index)
