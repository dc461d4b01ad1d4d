"""Which operations an ACL's operation covers, as bit masks (SEMANTICS.md §3 step 5, §16.1).

Every decision reduces to OR-ing the masks of the matching entries and testing one bit, so the rules live here
once, as data:

* ALLOW: ALL covers every operation; READ, WRITE, DELETE and ALTER also cover DESCRIBE; ALTER_CONFIGS also
  covers DESCRIBE_CONFIGS; CREATE also covers AUTO_CREATE (KIP-755).
* DENY: ALL covers every operation; otherwise only the operation itself, with one deliberate exception:
  DENY CREATE also denies AUTO_CREATE, because auto-creation is a way of creating (SEMANTICS.md §16.1).
  Kafka's implications never apply to DENY: DENY READ does not deny DESCRIBE.

A mask is one int: bit ``code`` set = allowed, bit ``DENY_SHIFT + code`` set = denied.
"""

from __future__ import annotations

from kafkaguard.model import AclOperation, AclPermissionType

DENY_SHIFT = 16

#: Operations an authorize() call can ask about (not ANY, not UNKNOWN).
CONCRETE_OPERATIONS: tuple[AclOperation, ...] = tuple(
    op for op in AclOperation if op not in (AclOperation.ANY, AclOperation.UNKNOWN)
)

_ALLOW_IMPLIES: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.READ: frozenset({AclOperation.DESCRIBE}),
    AclOperation.WRITE: frozenset({AclOperation.DESCRIBE}),
    AclOperation.DELETE: frozenset({AclOperation.DESCRIBE}),
    AclOperation.ALTER: frozenset({AclOperation.DESCRIBE}),
    AclOperation.ALTER_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS}),
    AclOperation.CREATE: frozenset({AclOperation.AUTO_CREATE}),
}
_DENY_IMPLIES: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.CREATE: frozenset({AclOperation.AUTO_CREATE}),
}


def covered_operations(acl_operation: AclOperation, permission: AclPermissionType) -> frozenset[AclOperation]:
    """The concrete operations an ACL with this operation and permission applies to."""
    if acl_operation is AclOperation.ALL:
        return frozenset(CONCRETE_OPERATIONS)
    table = _ALLOW_IMPLIES if permission is AclPermissionType.ALLOW else _DENY_IMPLIES
    return frozenset({acl_operation}) | table.get(acl_operation, frozenset())


def _compute_entry_mask(acl_operation: AclOperation, permission: AclPermissionType) -> int:
    shift = DENY_SHIFT if permission is AclPermissionType.DENY else 0
    mask = 0
    for op in covered_operations(acl_operation, permission):
        mask |= 1 << (op.code + shift)
    return mask


_ENTRY_MASKS: dict[tuple[AclOperation, AclPermissionType], int] = {
    (op, perm): _compute_entry_mask(op, perm)
    for op in CONCRETE_OPERATIONS
    for perm in (AclPermissionType.ALLOW, AclPermissionType.DENY)
}


def entry_mask(acl_operation: AclOperation, permission: AclPermissionType) -> int:
    """The mask bits one ACL entry contributes (0 for values no stored ACL can have)."""
    return _ENTRY_MASKS.get((acl_operation, permission), 0)


def allow_bit(operation: AclOperation) -> int:
    return 1 << operation.code


def deny_bit(operation: AclOperation) -> int:
    return 1 << (operation.code + DENY_SHIFT)


def exact_operation_matches(acl_operation: AclOperation, operation: AclOperation) -> bool:
    """The matching of authorize_by_resource_type's scan (SEMANTICS.md §5 step 2): no implication, ALL matches
    everything, and CREATE stands for AUTO_CREATE as well (it is the same right, §16.1)."""
    if acl_operation is AclOperation.ALL or acl_operation is operation:
        return True
    return acl_operation is AclOperation.CREATE and operation is AclOperation.AUTO_CREATE
