"""Access control entries and entry filters (SEMANTICS.md §6.2; Kafka's AccessControlEntryFilter tests)."""

from __future__ import annotations

import pytest

from kafkaguard import AccessControlEntry, AccessControlEntryFilter, AclOperation, AclPermissionType, InvalidAclError
from kafkaguard.model import WILDCARD_HOST

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
READ, ALL = AclOperation.READ, AclOperation.ALL


def entry(principal: str = "User:alice", host: str = "*", op: AclOperation = READ, perm: AclPermissionType = ALLOW):
    return AccessControlEntry(principal, host, op, perm)


def test_wildcard_host_constant():
    assert WILDCARD_HOST == "*"


@pytest.mark.parametrize(
    ("op", "perm"),
    [(AclOperation.ANY, ALLOW), (READ, AclPermissionType.ANY)],
)
def test_entry_refuses_filter_only_values(op, perm):
    with pytest.raises(InvalidAclError, match="filters"):
        AccessControlEntry("User:alice", "*", op, perm)


def test_entry_refuses_non_string_principal_or_host():
    with pytest.raises(InvalidAclError):
        AccessControlEntry(None, "*", READ, ALLOW)  # type: ignore[arg-type]
    with pytest.raises(InvalidAclError):
        AccessControlEntry("User:alice", None, READ, ALLOW)  # type: ignore[arg-type]


def test_entry_admits_unknown_codes_and_free_host_strings():
    e = AccessControlEntry("User:alice", "", AclOperation.from_code(60), AclPermissionType.UNKNOWN)
    assert e.operation.code == 60
    assert e.host == ""


def test_entry_equality_is_by_all_four_fields_case_sensitive():
    assert entry() == entry()
    assert entry() != entry(principal="User:Alice")
    assert entry() != entry(host="10.0.0.1")
    assert entry() != entry(op=ALL)
    assert entry() != entry(perm=DENY)
    assert len({entry(), entry(), entry(perm=DENY)}) == 2


def test_str_is_kafkas_form():
    assert str(entry()) == "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"


def test_to_filter_matches_only_identical_entry():
    f = entry().to_filter()
    assert f == AccessControlEntryFilter("User:alice", "*", READ, ALLOW)
    assert f.matches(entry())
    assert not f.matches(entry(host="10.0.0.1"))


def test_any_filter_matches_every_entry():
    for e in (entry(), entry("User:*", "10.0.0.1", ALL, DENY), entry("Group:x", "::1", AclOperation.WRITE)):
        assert AccessControlEntryFilter.ANY.matches(e)


def test_principal_filter_is_exact_no_wildcard_semantics():
    # AuthorizerTest.testGetAclsPrincipal: a filter for User:alice does not return User:* entries, nor vice versa.
    alice = AccessControlEntryFilter("User:alice", None, AclOperation.ANY, AclPermissionType.ANY)
    wildcard = AccessControlEntryFilter("User:*", None, AclOperation.ANY, AclPermissionType.ANY)
    assert alice.matches(entry("User:alice"))
    assert not alice.matches(entry("User:*"))
    assert wildcard.matches(entry("User:*"))
    assert not wildcard.matches(entry("User:alice"))


def test_host_filter_star_matches_only_stored_star():
    star = AccessControlEntryFilter(None, "*", AclOperation.ANY, AclPermissionType.ANY)
    assert star.matches(entry(host="*"))
    assert not star.matches(entry(host="10.0.0.1"))
    ip = AccessControlEntryFilter(None, "10.0.0.1", AclOperation.ANY, AclPermissionType.ANY)
    assert not ip.matches(entry(host="*"))


def test_operation_filter_is_exact_all_only_matches_all():
    read = AccessControlEntryFilter(None, None, READ, AclPermissionType.ANY)
    all_ops = AccessControlEntryFilter(None, None, ALL, AclPermissionType.ANY)
    describe = AccessControlEntryFilter(None, None, AclOperation.DESCRIBE, AclPermissionType.ANY)
    assert read.matches(entry(op=READ))
    assert not read.matches(entry(op=ALL))
    assert all_ops.matches(entry(op=ALL))
    assert not all_ops.matches(entry(op=READ))
    # No implication in filters: DESCRIBE does not select READ.
    assert not describe.matches(entry(op=READ))


def test_permission_filter_is_exact():
    deny = AccessControlEntryFilter(None, None, AclOperation.ANY, DENY)
    assert deny.matches(entry(perm=DENY))
    assert not deny.matches(entry(perm=ALLOW))


def test_unknown_filter_values_match_nothing():
    unknown_op = AccessControlEntryFilter(None, None, AclOperation.UNKNOWN, AclPermissionType.ANY)
    unknown_perm = AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.from_code(40))
    for e in (entry(), entry(op=ALL, perm=DENY)):
        assert not unknown_op.matches(e)
        assert not unknown_perm.matches(e)
    assert unknown_op.is_unknown
    assert unknown_perm.is_unknown
    assert not AccessControlEntryFilter.ANY.is_unknown


@pytest.mark.parametrize(
    ("entry_filter", "message"),
    [
        (AccessControlEntryFilter(None, "*", READ, ALLOW), "Principal is NULL"),
        (AccessControlEntryFilter("User:a", None, READ, ALLOW), "Host is NULL"),
        (AccessControlEntryFilter("User:a", "*", AclOperation.ANY, ALLOW), "Operation is ANY"),
        (AccessControlEntryFilter("User:a", "*", AclOperation.UNKNOWN, ALLOW), "Operation is UNKNOWN"),
        (AccessControlEntryFilter("User:a", "*", READ, AclPermissionType.ANY), "Permission type is ANY"),
        (AccessControlEntryFilter("User:a", "*", READ, AclPermissionType.UNKNOWN), "Permission type is UNKNOWN"),
        (AccessControlEntryFilter("User:a", "*", READ, ALLOW), None),
    ],
)
def test_find_indefinite_field(entry_filter, message):
    assert entry_filter.find_indefinite_field() == message
