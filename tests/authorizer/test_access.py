"""Who can do what (``authorizer.access``): the ACLs behind each answer, and decisions that are authorize()'s."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaguard import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    Action,
    AuthorizationResult,
    PatternType,
    RequestContext,
    ResourcePattern,
    ResourceType,
    StandardAuthorizer,
)
from kafkaguard.authorizer.access import SUPPORTED_OPERATIONS, access_of, who_can
from tests.strategies import binding_lists, membership_maps, stored

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def acl(principal, op, name="orders", ptype=LITERAL, perm=ALLOW, host="*", rtype=TOPIC) -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, ptype), AccessControlEntry(principal, host, op, perm))


def make(*bindings, memberships=None, super_users="") -> StandardAuthorizer:
    authorizer = StandardAuthorizer(super_users, memberships=memberships or {})
    assert all(r.succeeded for r in authorizer.add_acls(bindings))
    return authorizer


AUTHORIZER_ACLS = (
    acl("User:alice", Op.READ),
    acl("Group:ops", Op.WRITE, name="orders-", ptype=PREFIXED),
    acl("User:*", Op.DESCRIBE, name="*"),
    acl("User:alice", Op.WRITE, name="orders-eu", perm=DENY),
    acl("User:bob", Op.READ, name="payments"),
    acl("User:alice", Op.READ, name="g1", rtype=GROUP),
    acl("User:alice", Op.ALL, name="audit", host="10.0.0.0/8"),
)


def test_access_of_lists_own_wildcard_and_group_acls_by_pattern_and_decides_catalog_topics():
    authorizer = make(*AUTHORIZER_ACLS, memberships={"User:alice": ["Group:ops"]})
    topics = ["orders", "orders-eu", "orders-us", "payments", "audit", "other"]
    access = access_of(authorizer.snapshot, "User:alice", topics=topics)
    assert access.groups == ("Group:ops",) and not access.super_user
    by_pattern = {(p.pattern.resource_type, p.pattern.name): p for p in access.patterns}
    assert set(by_pattern) == {(TOPIC, "orders"), (TOPIC, "orders-"), (TOPIC, "*"), (TOPIC, "orders-eu"),
                               (GROUP, "g1"), (TOPIC, "audit")}  # fmt: skip
    assert by_pattern[(TOPIC, "orders")].allows == (Op.READ, Op.DESCRIBE)  # READ implies DESCRIBE
    assert by_pattern[(TOPIC, "orders-eu")].denies == (Op.WRITE,)
    assert by_pattern[(TOPIC, "orders-")].acls[0].binding.entry.principal == "Group:ops"
    # ALL is reported as the type's operations.
    assert by_pattern[(TOPIC, "audit")].allows == SUPPORTED_OPERATIONS[TOPIC]
    decided = {d.resource.name: d for d in access.resources}
    assert set(decided) == set(topics)  # the * pattern reaches every topic
    assert Op.WRITE in decided["orders-us"].allowed  # through the group's prefixed ACL
    assert Op.WRITE in decided["orders-eu"].denied  # her own DENY wins
    # No host given: decided for an address no host-specific ACL names, so the 10.0.0.0/8 ACL does not apply.
    assert decided["audit"].allowed == (Op.DESCRIBE,)
    from_inside = access_of(authorizer.snapshot, "User:alice", host="10.1.1.1", topics=topics)
    assert Op.WRITE in {d.resource.name: d for d in from_inside.resources}["audit"].allowed
    from_outside = access_of(authorizer.snapshot, "User:alice", host="11.1.1.1")
    assert (TOPIC, "audit") not in {(p.pattern.resource_type, p.pattern.name) for p in from_outside.patterns}


def test_who_can_expands_groups_keeps_user_star_and_decides_each_row():
    authorizer = make(
        *AUTHORIZER_ACLS,
        memberships={"User:alice": ["Group:ops"], "User:carol": ["Group:ops"]},
        super_users="User:admin",
    )
    answer = who_can(authorizer.snapshot, TOPIC, "orders-eu")
    assert answer.super_users == ("User:admin",)
    rows = {(h.principal, h.host): h for h in answer.holders}
    assert set(rows) == {("User:alice", "*"), ("User:carol", "*"), ("User:*", "*"), ("Group:ops", "*")}
    assert rows[("User:carol", "*")].via == ("Group:ops",)
    # the group's own row: any login whose token brings Group:ops (no ACLs or stored groups of its own)
    assert rows[("Group:ops", "*")].via == ("Group:ops",)
    assert Op.WRITE in rows[("Group:ops", "*")].decided.allowed
    assert Op.WRITE in rows[("User:carol", "*")].decided.allowed
    assert Op.WRITE in rows[("User:alice", "*")].decided.denied
    assert rows[("User:*", "*")].decided.allowed == (Op.DESCRIBE,)


def test_who_can_decides_a_cidr_row_inside_its_block():
    authorizer = make(*AUTHORIZER_ACLS)
    rows = {(h.principal, h.host): h for h in who_can(authorizer.snapshot, TOPIC, "audit").holders}
    assert rows[("User:alice", "10.0.0.0/8")].decided.allowed == SUPPORTED_OPERATIONS[TOPIC]


@settings(max_examples=60)
@given(binding_lists, membership_maps, st.sampled_from(["a", "ab", "b", "hardcode"]))
def test_who_can_rows_are_authorize_decisions(bindings, memberships, name):
    authorizer = StandardAuthorizer(acls=stored(bindings), memberships=memberships)
    for resource_type in (TOPIC, GROUP):
        for holder in who_can(authorizer.snapshot, resource_type, name).holders:
            if holder.principal == "User:*" or "/" in holder.host or holder.host == "*":
                continue  # decided at a chosen address: covered by the tests above
            context = RequestContext(holder.principal, holder.host)
            for op in SUPPORTED_OPERATIONS[resource_type]:
                [result] = authorizer.authorize(context, [Action(op, ResourcePattern(resource_type, name))])
                assert (op in holder.decided.allowed) is (result is AuthorizationResult.ALLOWED)
