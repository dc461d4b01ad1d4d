"""Principal groups in the authorizer: a ``Group:NAME`` ACL applies to every member, from the request's snapshot."""

from __future__ import annotations

from kafkaguard import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    Action,
    AuthorizationResult,
    RequestContext,
    ResourcePattern,
    ResourceType,
    StandardAuthorizer,
)

TOPIC, READ, WRITE = ResourceType.TOPIC, AclOperation.READ, AclOperation.WRITE
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALLOWED, DENIED = AuthorizationResult.ALLOWED, AuthorizationResult.DENIED


def binding(principal: str, op=READ, perm=ALLOW, name="orders", host="*") -> AclBinding:
    return AclBinding(ResourcePattern(TOPIC, name), AccessControlEntry(principal, host, op, perm))


def decide(authorizer: StandardAuthorizer, principal: str, op=READ, name="orders") -> AuthorizationResult:
    [result] = authorizer.authorize(RequestContext(principal, "10.0.0.1"), [Action(op, ResourcePattern(TOPIC, name))])
    return result


def make(*bindings: AclBinding, memberships=None, super_users="") -> StandardAuthorizer:
    authorizer = StandardAuthorizer(super_users, memberships=memberships or {})
    assert all(r.succeeded for r in authorizer.add_acls(bindings))
    return authorizer


def test_a_group_acl_applies_to_its_members_only():
    authorizer = make(binding("Group:ops"), memberships={"User:alice": ["Group:ops"]})
    assert decide(authorizer, "User:alice") is ALLOWED
    assert decide(authorizer, "User:bob") is DENIED
    # The group is not a wildcard for its principal type, and membership does not cross principal types.
    assert decide(authorizer, "ServiceAccount:alice") is DENIED


def test_a_deny_on_a_group_denies_its_members_even_with_their_own_allow():
    authorizer = make(
        binding("User:alice", op=AclOperation.ALL),
        binding("Group:contractors", op=WRITE, perm=DENY),
        memberships={"User:alice": ["Group:contractors"]},
    )
    assert decide(authorizer, "User:alice", READ) is ALLOWED
    assert decide(authorizer, "User:alice", WRITE) is DENIED


def test_membership_changes_apply_to_the_next_decision():
    authorizer = make(binding("Group:ops"))
    assert decide(authorizer, "User:alice") is DENIED
    authorizer.replace_memberships({"User:alice": ["Group:ops"]})
    assert decide(authorizer, "User:alice") is ALLOWED
    snapshot = authorizer.snapshot  # a request holding the old snapshot keeps deciding with it
    authorizer.replace_memberships({})
    assert decide(authorizer, "User:alice") is DENIED
    assert snapshot.groups_of("User:alice") == ("Group:ops",)


def test_explain_names_the_group_that_matched():
    authorizer = make(binding("Group:ops"), memberships={"User:alice": ["Group:ops", "Group:audit"]})
    decision = authorizer.explain(
        RequestContext("User:alice", "10.0.0.1"), Action(READ, ResourcePattern(TOPIC, "orders"))
    )
    assert decision.result is ALLOWED
    assert decision.rule.acl.binding.entry.principal == "Group:ops"  # type: ignore[union-attr]
    assert "through group Group:ops, which User:alice belongs to" in decision.explanation()
    # The audit record's rule is this string: it names the group; its principal field names the user.
    assert "principal=Group:ops" in str(decision.rule)


def test_authorize_by_resource_type_counts_group_acls():
    authorizer = make(binding("Group:ops", op=WRITE, name="payments"), memberships={"User:alice": ["Group:ops"]})
    alice, bob = RequestContext("User:alice", "10.0.0.1"), RequestContext("User:bob", "10.0.0.1")
    assert authorizer.authorize_by_resource_type(alice, WRITE, TOPIC) is ALLOWED
    assert authorizer.authorize_by_resource_type(bob, WRITE, TOPIC) is DENIED


def test_a_group_is_never_a_super_user():
    authorizer = make(memberships={"User:alice": ["Group:admins"]}, super_users="Group:admins")
    assert decide(authorizer, "User:alice") is DENIED
    assert decide(authorizer, "Group:admins") is ALLOWED  # the exact principal, as Kafka compares super.users


def test_memberships_are_frozen_sorted_and_deduplicated():
    authorizer = make(memberships={"User:alice": ["Group:b", "Group:a", "Group:b"], "User:bob": []})
    assert dict(authorizer.memberships) == {"User:alice": ("Group:a", "Group:b")}


def test_groups_from_a_login_token_join_the_stored_ones_for_that_caller_only():
    authorizer = make(
        binding("Group:ops"),
        binding("Group:payments", op=WRITE),
        binding("Group:contractors", op=WRITE, perm=DENY, name="pii"),
        binding("Group:contractors", op=WRITE, name="pii"),
        memberships={"User:alice": ["Group:ops"]},
    )
    read, write = Action(READ, ResourcePattern(TOPIC, "orders")), Action(WRITE, ResourcePattern(TOPIC, "orders"))
    with_token = RequestContext("User:alice", "10.0.0.1", ("Group:payments",))
    assert authorizer.authorize(with_token, [read, write]) == [ALLOWED, ALLOWED]  # stored ops + token payments
    assert authorizer.authorize(RequestContext("User:alice", "10.0.0.1"), [read, write]) == [ALLOWED, DENIED]
    # a token group alone, for a principal with no stored membership; a DENY through it wins as any other
    bob = RequestContext("User:bob", "10.0.0.1", ("Group:contractors",))
    assert authorizer.authorize(bob, [Action(WRITE, ResourcePattern(TOPIC, "pii")), read]) == [DENIED, DENIED]
    assert authorizer.authorize_by_resource_type(with_token, WRITE, TOPIC) is ALLOWED
    decision = authorizer.explain(with_token, write)
    assert "through group Group:payments, which User:alice belongs to (by its login's token)" in decision.explanation()
    stored = authorizer.explain(with_token, read)
    assert "through group Group:ops, which User:alice belongs to (by a stored membership)" in stored.explanation()


def test_the_audit_record_names_the_groups_the_login_brought():
    from datetime import UTC, datetime

    from kafkaguard.audit.records.record import record_from_decision, to_dict

    authorizer = make(binding("Group:payments"))
    action = Action(READ, ResourcePattern(TOPIC, "orders"))
    with_token = authorizer.explain(RequestContext("User:alice", "10.0.0.1", ("Group:payments",)), action)
    written = to_dict(record_from_decision(with_token, datetime.now(UTC)))
    assert written["login_groups"] == ["Group:payments"]
    rule = written["rule"]
    assert isinstance(rule, str)
    assert "principal=Group:payments" in rule
    without = authorizer.explain(RequestContext("User:alice", "10.0.0.1"), action)
    assert "login_groups" not in to_dict(record_from_decision(without, datetime.now(UTC)))
