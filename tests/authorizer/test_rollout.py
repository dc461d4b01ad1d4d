"""``authorizer.rollout``: the permissive decision point and the shadow set's flips, on real authorizers."""

from __future__ import annotations

from kafkaguard.authorizer import StandardAuthorizer
from kafkaguard.authorizer.requests import REQUIREMENTS, ApiKey, authorize_request
from kafkaguard.authorizer.rollout import Rollout, content_id, flips, permitted, shadow_set
from kafkaguard.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    AuthorizationResult,
    PatternType,
    RequestContext,
    ResourcePattern,
    ResourceType,
)

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
ALICE = RequestContext("User:alice", "10.0.0.7")


def binding(rtype: ResourceType, name: str, op: AclOperation, deny: bool = False) -> AclBinding:
    permission = AclPermissionType.DENY if deny else AclPermissionType.ALLOW
    return AclBinding(
        ResourcePattern(rtype, name, PatternType.LITERAL), AccessControlEntry("User:alice", "*", op, permission)
    )


def authorizer(*bindings: AclBinding) -> StandardAuthorizer:
    built = StandardAuthorizer()
    built.add_acls(list(bindings))
    return built


def test_permitted_passes_every_check_and_keeps_the_decisions_for_the_audit():
    active = authorizer(binding(GROUP, "billing", AclOperation.READ), binding(TOPIC, "orders", AclOperation.READ))
    outcome = authorize_request(active, ALICE, REQUIREMENTS[ApiKey.OFFSET_COMMIT],
                                {GROUP: ["billing"], TOPIC: ["orders", "pii"]})  # fmt: skip
    assert not outcome.allows(TOPIC, "pii")
    opened = permitted(outcome)
    assert opened.allows(TOPIC, "pii") and opened.allows(TOPIC, "orders") and opened.allows(GROUP, "billing")
    assert opened.denied() == []
    assert opened.decisive == outcome.decisive  # the would-be denial is still there to be audited
    assert [r for _, r in opened.decisive].count(AuthorizationResult.DENIED) == 1


def test_permitted_passes_a_denied_cluster_check():
    outcome = authorize_request(authorizer(), ALICE, REQUIREMENTS[ApiKey.DESCRIBE_ACLS])
    assert not outcome.request_allowed
    assert permitted(outcome).request_allowed


def test_permitted_returns_an_allowed_outcome_itself():
    outcome = authorize_request(authorizer(binding(TOPIC, "orders", AclOperation.READ)), ALICE,
                                REQUIREMENTS[ApiKey.FETCH], {TOPIC: ["orders"]})  # fmt: skip
    assert permitted(outcome) is outcome


def test_flips_are_the_decisive_actions_the_candidate_decides_otherwise():
    active = authorizer(binding(TOPIC, "orders", AclOperation.WRITE), binding(TOPIC, "audit", AclOperation.WRITE))
    candidate = shadow_set(
        "candidate.yaml",
        [binding(TOPIC, "audit", AclOperation.WRITE), binding(TOPIC, "pii", AclOperation.WRITE)],
        super_users=(),
        allow_everyone_if_no_acl_found=False,
        memberships={},
    )
    outcome = authorize_request(active, ALICE, REQUIREMENTS[ApiKey.PRODUCE],
                                {TOPIC: ["orders", "audit", "pii", "other"]})  # fmt: skip
    found = {
        outcome.decisive[position][0].resource_pattern.name: (outcome.decisive[position][1], decision.result)
        for position, decision in flips(outcome, candidate.snapshot)
    }
    assert found == {
        "orders": (AuthorizationResult.ALLOWED, AuthorizationResult.DENIED),
        "pii": (AuthorizationResult.DENIED, AuthorizationResult.ALLOWED),
    }
    rules = {str(d.rule) for _, d in flips(outcome, candidate.snapshot)}
    pii = binding(TOPIC, "pii", AclOperation.WRITE)
    assert any(f"id={content_id(pii)}" in rule for rule in rules)  # the id simulate gives the file's ACL
    assert candidate.acl_count == 2


def test_a_candidate_with_super_users_decides_as_the_active_one_would():
    candidate = shadow_set("c", [], super_users=("User:alice",), allow_everyone_if_no_acl_found=False, memberships={})
    outcome = authorize_request(authorizer(), ALICE, REQUIREMENTS[ApiKey.FETCH], {TOPIC: ["x"]})
    ((_, decision),) = flips(outcome, candidate.snapshot)
    assert decision.result is AuthorizationResult.ALLOWED and str(decision.rule) == "SuperUser"


def test_rollout_refuses_an_unknown_enforcement():
    try:
        Rollout("lenient")
    except ValueError as e:
        assert "enforcing" in str(e) and "permissive" in str(e)
    else:
        raise AssertionError("accepted")
    assert Rollout("permissive").permissive and not Rollout().permissive


def test_the_candidate_sees_the_group_memberships_of_the_active_decision():
    group_acl = AclBinding(
        ResourcePattern(TOPIC, "orders", PatternType.LITERAL),
        AccessControlEntry("Group:readers", "*", AclOperation.READ, AclPermissionType.ALLOW),
    )
    candidate = shadow_set("c", [group_acl], super_users=(), allow_everyone_if_no_acl_found=False, memberships={})
    active = StandardAuthorizer(memberships={"User:alice": ["Group:readers"]})  # alice joined after the file loaded
    outcome = authorize_request(active, ALICE, REQUIREMENTS[ApiKey.FETCH], {TOPIC: ["orders"]})
    ((_, decision),) = flips(outcome, candidate.snapshot)
    assert decision.result is AuthorizationResult.ALLOWED and "Group:readers" in str(decision.rule)
