"""The API → checks table (SEMANTICS.md §13) and its evaluation, including KIP-755 auto-creation."""

from __future__ import annotations

import pytest

from kafkaguard import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AuthorizationResult,
    PatternType,
    RequestContext,
    ResourcePattern,
    ResourceType,
    StandardAuthorizer,
)
from kafkaguard.authorizer import MatchingAclRule
from kafkaguard.authorizer.requests import (
    METADATA_AUTO_CREATE,
    REQUIREMENTS,
    ApiKey,
    authorize_request,
    authorized_operations,
)

ALICE = RequestContext("User:alice", "10.0.0.1")
T, C, G = ResourceType.TOPIC, ResourceType.CLUSTER, ResourceType.GROUP


def acl(
    rtype: ResourceType,
    name: str,
    op: AclOperation,
    perm: AclPermissionType = AclPermissionType.ALLOW,
    principal: str = "User:alice",
    pattern: PatternType = PatternType.LITERAL,
) -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, pattern), AccessControlEntry(principal, "*", op, perm))


def authorizer(*bindings: AclBinding) -> StandardAuthorizer:
    auth = StandardAuthorizer(super_users={"User:admin"})
    results = auth.add_acls(list(bindings))
    assert all(r.succeeded for r in results)
    return auth


def test_acl_and_scram_admin_apis_need_the_cluster_checks_kafka_uses():
    assert REQUIREMENTS[ApiKey.DESCRIBE_ACLS].cluster is not None
    expected = {
        ApiKey.DESCRIBE_ACLS: AclOperation.DESCRIBE,
        ApiKey.CREATE_ACLS: AclOperation.ALTER,
        ApiKey.DELETE_ACLS: AclOperation.ALTER,
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: AclOperation.DESCRIBE,
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: AclOperation.ALTER,
    }
    for key, op in expected.items():
        check = REQUIREMENTS[key].cluster
        assert check is not None and check.operation is op and check.resource_type is C, key


@pytest.mark.parametrize("op", [AclOperation.DESCRIBE, AclOperation.ALTER, AclOperation.ALL])
def test_describe_acls_is_allowed_by_cluster_describe_or_an_implying_allow(op):
    auth = authorizer(acl(C, "kafka-cluster", op))
    outcome = authorize_request(auth, ALICE, REQUIREMENTS[ApiKey.DESCRIBE_ACLS])
    assert outcome.request_allowed


def test_describe_acls_without_cluster_acl_is_denied():
    auth = authorizer(acl(T, "orders", AclOperation.ALL))
    assert not authorize_request(auth, ALICE, REQUIREMENTS[ApiKey.DESCRIBE_ACLS]).request_allowed


def test_create_topics_cluster_create_grants_every_topic():
    auth = authorizer(acl(C, "kafka-cluster", AclOperation.CREATE))
    outcome = authorize_request(auth, ALICE, REQUIREMENTS[ApiKey.CREATE_TOPICS], {T: ["a", "b"]})
    assert outcome.allows(T, "a") and outcome.allows(T, "b")
    assert outcome.denied() == []


def test_create_topics_per_topic_create():
    auth = authorizer(acl(T, "team-", AclOperation.CREATE, pattern=PatternType.PREFIXED))
    outcome = authorize_request(auth, ALICE, REQUIREMENTS[ApiKey.CREATE_TOPICS], {T: ["team-x", "other"]})
    assert outcome.allows(T, "team-x")
    assert not outcome.allows(T, "other")
    assert outcome.denied() == [(T, "other")]


def test_auto_create_only_allows_metadata_auto_creation_but_not_create_topics():
    """KIP-755: a principal granted only AUTO_CREATE gets topics auto-created, not CreateTopics."""
    auth = authorizer(acl(T, "events", AclOperation.AUTO_CREATE))
    auto = authorize_request(auth, ALICE, METADATA_AUTO_CREATE, {T: ["events"]})
    create = authorize_request(auth, ALICE, REQUIREMENTS[ApiKey.CREATE_TOPICS], {T: ["events"]})
    assert auto.allows(T, "events")
    assert not create.allows(T, "events")
    assert REQUIREMENTS[ApiKey.CREATE_TOPICS].denial_error == "TOPIC_AUTHORIZATION_FAILED"


def test_cluster_create_implies_auto_create_and_cluster_deny_create_blocks_it():
    allowed = authorizer(acl(C, "kafka-cluster", AclOperation.CREATE))
    assert authorize_request(allowed, ALICE, METADATA_AUTO_CREATE, {T: ["new"]}).allows(T, "new")
    denied = authorizer(
        acl(T, "*", AclOperation.ALL),
        acl(T, "new", AclOperation.CREATE, AclPermissionType.DENY),
    )
    assert not authorize_request(denied, ALICE, METADATA_AUTO_CREATE, {T: ["new"]}).allows(T, "new")


def test_delete_topics_needs_describe_and_delete_per_topic_unless_cluster_delete():
    only_delete = authorizer(acl(T, "a", AclOperation.DELETE))  # DELETE implies DESCRIBE for ALLOW
    assert authorize_request(only_delete, ALICE, REQUIREMENTS[ApiKey.DELETE_TOPICS], {T: ["a"]}).allows(T, "a")
    only_describe = authorizer(acl(T, "a", AclOperation.DESCRIBE))
    outcome = authorize_request(only_describe, ALICE, REQUIREMENTS[ApiKey.DELETE_TOPICS], {T: ["a"]})
    assert not outcome.allows(T, "a")
    cluster = authorizer(acl(C, "kafka-cluster", AclOperation.DELETE))
    assert authorize_request(cluster, ALICE, REQUIREMENTS[ApiKey.DELETE_TOPICS], {T: ["a"]}).allows(T, "a")


def test_offset_commit_checks_group_and_topic_types_separately():
    auth = authorizer(acl(G, "g1", AclOperation.READ), acl(T, "t1", AclOperation.READ))
    outcome = authorize_request(auth, ALICE, REQUIREMENTS[ApiKey.OFFSET_COMMIT], {G: ["g1"], T: ["t1", "t2"]})
    assert outcome.allows(G, "g1") and outcome.allows(T, "t1")
    assert not outcome.allows(T, "t2")


def test_super_user_passes_every_requirement():
    auth = authorizer(acl(T, "*", AclOperation.ALL, AclPermissionType.DENY, principal="User:*"))
    admin = RequestContext("User:admin", "127.0.0.1")
    for key, requirement in REQUIREMENTS.items():
        outcome = authorize_request(auth, admin, requirement, {T: ["x"], G: ["g"]})
        assert outcome.request_allowed and not outcome.denied(), key


def test_authorized_operations_bit_field():
    auth = authorizer(acl(T, "orders", AclOperation.READ))
    field = authorized_operations(auth, ALICE, T, "orders")
    allowed = {op for op in AclOperation if field & (1 << op.code)}
    assert allowed == {AclOperation.READ, AclOperation.DESCRIBE}


def test_api_names_are_kafkas():
    assert ApiKey.DESCRIBE_ACLS.api_name == "DescribeAcls"
    assert ApiKey.ALTER_USER_SCRAM_CREDENTIALS.api_name == "AlterUserScramCredentials"
    assert ApiKey.SASL_HANDSHAKE.api_name == "SaslHandshake"
    for key, requirement in REQUIREMENTS.items():
        assert requirement.name == key.api_name, key


def test_the_deciding_rule_comes_from_the_snapshot_that_decided_after_a_swap():
    """The audit record is written from ``decision()``: after the authorizer's snapshot is swapped (a DENY added
    between deciding and auditing), the rule still explains the result that was given, not the new state."""
    allow = acl(T, "orders", AclOperation.READ)
    auth = authorizer(allow)
    outcome = authorize_request(auth, ALICE, REQUIREMENTS[ApiKey.FETCH], {T: ["orders"]})
    ((action, result),) = outcome.decisive
    assert result is AuthorizationResult.ALLOWED
    assert auth.add_acls([acl(T, "orders", AclOperation.READ, AclPermissionType.DENY)])[0].succeeded
    assert auth.explain(ALICE, action).result is AuthorizationResult.DENIED  # the authorizer moved on
    decision = outcome.decision(action)
    assert decision.result is result
    assert isinstance(decision.rule, MatchingAclRule)
    assert decision.rule.acl.binding == allow


def test_several_checks_of_one_request_share_a_snapshot_handed_in():
    auth = authorizer(acl(T, "orders", AclOperation.ALL))
    snapshot = auth.snapshot
    auth.remove_acls([AclBindingFilter.ANY])
    assert authorize_request(snapshot, ALICE, REQUIREMENTS[ApiKey.PRODUCE], {T: ["orders"]}).allows(T, "orders")
    assert authorized_operations(snapshot, ALICE, T, "orders") != 0
    assert not authorize_request(auth, ALICE, REQUIREMENTS[ApiKey.PRODUCE], {T: ["orders"]}).allows(T, "orders")
    assert authorized_operations(auth, ALICE, T, "orders") == 0
