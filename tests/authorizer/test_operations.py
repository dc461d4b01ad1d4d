"""Operation coverage as bit masks (SEMANTICS.md §3 step 5, §16.1)."""

from __future__ import annotations

import pytest

from kafkaguard import AclOperation, AclPermissionType
from kafkaguard.authorizer.index import RELEVANT_BIT
from kafkaguard.authorizer.operations import (
    CONCRETE_OPERATIONS,
    DENY_SHIFT,
    allow_bit,
    covered_operations,
    deny_bit,
    entry_mask,
    exact_operation_matches,
)

Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
EXPECTED_ALLOW = {
    Op.READ: {Op.READ, Op.DESCRIBE},
    Op.WRITE: {Op.WRITE, Op.DESCRIBE},
    Op.DELETE: {Op.DELETE, Op.DESCRIBE},
    Op.ALTER: {Op.ALTER, Op.DESCRIBE},
    Op.ALTER_CONFIGS: {Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS},
    Op.CREATE: {Op.CREATE, Op.AUTO_CREATE},
}


def test_concrete_operations():
    assert set(CONCRETE_OPERATIONS) == {op for op in Op if op not in (Op.ANY, Op.UNKNOWN)}
    assert Op.AUTO_CREATE in CONCRETE_OPERATIONS
    assert len(CONCRETE_OPERATIONS) == 14


@pytest.mark.parametrize("op", CONCRETE_OPERATIONS)
def test_allow_coverage(op):
    expected = set(CONCRETE_OPERATIONS) if op is Op.ALL else EXPECTED_ALLOW.get(op, {op})
    assert set(covered_operations(op, ALLOW)) == expected


@pytest.mark.parametrize("op", CONCRETE_OPERATIONS)
def test_deny_coverage_has_no_implication(op):
    if op is Op.ALL:
        expected = set(CONCRETE_OPERATIONS)
    elif op is Op.CREATE:
        expected = {Op.CREATE, Op.AUTO_CREATE}  # the one deliberate widening, §16.1
    else:
        expected = {op}
    assert set(covered_operations(op, DENY)) == expected


def test_nothing_but_all_covers_the_operations_kafka_never_implies():
    for target in (Op.CREATE, Op.CLUSTER_ACTION, Op.IDEMPOTENT_WRITE, Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS, Op.DELETE):
        granting = {op for op in CONCRETE_OPERATIONS if target in covered_operations(op, ALLOW)}
        assert granting == {Op.ALL, target}


@pytest.mark.parametrize("op", CONCRETE_OPERATIONS)
@pytest.mark.parametrize("perm", [ALLOW, DENY])
def test_entry_mask_is_the_bits_of_the_covered_operations(op, perm):
    bit = allow_bit if perm is ALLOW else deny_bit
    expected = 0
    for covered in covered_operations(op, perm):
        expected |= bit(covered)
    assert entry_mask(op, perm) == expected
    if perm is ALLOW:
        assert entry_mask(op, perm) < (1 << DENY_SHIFT)
    else:
        assert entry_mask(op, perm) & ((1 << DENY_SHIFT) - 1) == 0


def test_entry_mask_of_values_no_acl_can_have_is_zero():
    assert entry_mask(Op.ANY, ALLOW) == 0
    assert entry_mask(Op.READ, AclPermissionType.ANY) == 0
    assert entry_mask(Op.from_code(40), DENY) == 0


def test_bits_are_distinct_and_below_the_relevant_bit():
    bits = [allow_bit(op) for op in CONCRETE_OPERATIONS] + [deny_bit(op) for op in CONCRETE_OPERATIONS]
    assert len(set(bits)) == len(bits)
    combined = 0
    for bit in bits:
        assert bit & combined == 0
        combined |= bit
    assert combined < RELEVANT_BIT
    assert max(op.code for op in Op) < DENY_SHIFT


def test_exact_operation_matches_for_the_by_resource_type_scan():
    assert exact_operation_matches(Op.READ, Op.READ)
    assert exact_operation_matches(Op.ALL, Op.DESCRIBE)
    assert not exact_operation_matches(Op.READ, Op.DESCRIBE)
    assert not exact_operation_matches(Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS)
    assert exact_operation_matches(Op.CREATE, Op.AUTO_CREATE)
    assert not exact_operation_matches(Op.AUTO_CREATE, Op.CREATE)
    assert not exact_operation_matches(Op.DESCRIBE, Op.ALL)
